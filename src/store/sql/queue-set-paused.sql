-- name: queueSetPaused
-- Pauses or resumes a queue (no row when it does not exist). A paused queue keeps
-- accepting submits; nothing is claimed from it. Resuming wakes the dispatchers of every
-- server (NOTIFY on evora_job_available). Writes the audit event `queue.pause` or
-- `queue.resume` (target: the queue) in this statement; none when there is no such queue.
WITH updated AS (
  UPDATE evora.queues SET paused = :paused, updated_at = coalesce(:now::timestamptz, now()) WHERE name = :name RETURNING *
),
audited AS (
  INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
  SELECT coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName,
         CASE WHEN :paused THEN 'queue.pause' ELSE 'queue.resume' END, u.name, '{}'::jsonb
  FROM updated u
),
woken AS (
  SELECT pg_notify('evora_job_available', name) FROM updated WHERE NOT paused
)
SELECT * FROM updated WHERE (SELECT count(*) FROM woken) >= 0

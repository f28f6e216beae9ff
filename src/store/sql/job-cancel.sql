-- name: jobCancel
-- An operator's cancel. PENDING or WAITING: cancelled at once, with a `cancelled` event. RUNNING:
-- flagged (cancel_requested_at), and the holder's server is told through NOTIFY on
-- evora_job_cancel so it can push `cancel` to the worker; the job becomes CANCELLED when
-- the worker gives it up or its lease expires. Any other state: no row (the store answers
-- CANCELLED jobs as they are and refuses the rest). The audit event `job.cancel` (target:
-- the id; change: the previous state) is written in this statement, only when a job changed.
WITH previous AS (
  SELECT id, state FROM evora.jobs WHERE id = :id AND state IN ('PENDING', 'WAITING', 'RUNNING') FOR NO KEY UPDATE
),
updated AS (
  UPDATE evora.jobs j
  SET state = CASE WHEN p.state IN ('PENDING', 'WAITING') THEN 'CANCELLED'::evora.job_state ELSE j.state END,
      finished_at = CASE WHEN p.state IN ('PENDING', 'WAITING') THEN coalesce(:now::timestamptz, now()) ELSE j.finished_at END,
      cancel_requested_at = CASE WHEN j.state = 'RUNNING'
                                 THEN coalesce(j.cancel_requested_at, coalesce(:now::timestamptz, now()))
                                 ELSE j.cancel_requested_at END
  FROM previous p
  WHERE j.id = p.id AND j.state = p.state
  RETURNING j.*, p.state AS previous_state
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(finished_at), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg('cancelled'::evora.job_event_kind), array_agg(previous_state), array_agg(state),
         array_agg(attempt), array_agg(worker_id),
         array_agg(NULL::float8), array_agg(NULL::float8)
  FROM (SELECT * FROM updated WHERE state = 'CANCELLED') c
  HAVING count(*) > 0
),
audited AS (
  INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
  SELECT coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName, 'job.cancel', u.id::text,
         jsonb_build_object('previous_state', u.previous_state)
  FROM updated u
),
told AS (
  SELECT pg_notify('evora_job_cancel', u.id::text) FROM updated u WHERE u.state = 'RUNNING'
)
SELECT * FROM updated WHERE (SELECT count(*) FROM told) >= 0

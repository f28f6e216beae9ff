-- name: queueSetPaused
-- Pauses or resumes a queue (no row when it does not exist). A paused queue keeps
-- accepting submits; nothing is claimed from it. Resuming wakes the dispatchers of every
-- server (NOTIFY on evora_job_available).
WITH updated AS (
  UPDATE evora.queues SET paused = :paused, updated_at = coalesce(:now::timestamptz, now()) WHERE name = :name RETURNING *
),
woken AS (
  SELECT pg_notify('evora_job_available', name) FROM updated WHERE NOT paused
)
SELECT * FROM updated WHERE (SELECT count(*) FROM woken) >= 0

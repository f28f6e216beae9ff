-- move: finished jobs kept in a table of their own (finished_jobs, primary key only): what
-- moving them out of the hot table would cost instead of an UPDATE. Shaped like `noevents`
-- (lease check, result, the same columns read back), so the two compare like for like.
WITH input AS (
  SELECT DISTINCT ON (id, token) * FROM unnest($1::uuid[], $2::uuid[], $3::jsonb[]) AS c(id, token, result)
),
moved AS (
  DELETE FROM evora.jobs j USING input c
  WHERE j.id = c.id AND j.lease_token = c.token AND (CASE WHEN j.state = 'RUNNING' THEN true END)
  RETURNING j.*, c.result AS new_result
)
INSERT INTO finished_jobs AS j (id, queue, type, payload, state, priority, run_at, attempt, max_attempts, lease_token,
                                worker_id, idempotency_key, result, last_error, created_at, started_at, finished_at)
SELECT id, queue, type, payload, 'COMPLETED', priority, run_at, attempt, max_attempts, lease_token,
       worker_id, idempotency_key, new_result, last_error, created_at, started_at, now()
FROM moved
RETURNING j.id, j.lease_token, j.queue, j.type, j.state, j.attempt, j.worker_id, j.last_error

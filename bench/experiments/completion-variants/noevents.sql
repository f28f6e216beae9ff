-- noevents: the completion without its outbox event (lease check, result, the same read-back).
WITH input AS (
  SELECT DISTINCT ON (id, token) * FROM unnest($1::uuid[], $2::uuid[], $3::jsonb[]) AS c(id, token, result)
)
UPDATE evora.jobs j
SET state = 'COMPLETED', result = c.result, locked_until = NULL, finished_at = now()
FROM input c
WHERE j.id = c.id AND j.lease_token = c.token AND (CASE WHEN j.state = 'RUNNING' THEN true END)
RETURNING j.id, j.lease_token, j.queue, j.type, j.state, j.attempt, j.worker_id, j.last_error

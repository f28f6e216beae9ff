-- name: jobCompleteMany
-- A graphile-worker-shaped completion for hotpath-sql.ts (complete=…): the jobs whose lease
-- is current deleted by id, nothing else (no attempt history, no kept branch, no event;
-- :results unused). Measurement only: what Evora's deleting completion costs beyond it.
WITH input AS (
  SELECT * FROM unnest(:ids::uuid[], :tokens::uuid[], :results::jsonb[]) AS c(id, token, result)
)
DELETE FROM evora.jobs j
USING input c
WHERE j.id = c.id AND j.lease_token = c.token AND (CASE WHEN j.state = 'RUNNING' THEN true END)
  AND coalesce(:now::timestamptz, now()) IS NOT NULL
RETURNING j.id, j.lease_token, j.queue, j.type, j.attempt, j.worker_id

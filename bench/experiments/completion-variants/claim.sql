-- claim: up to $2 PENDING jobs of queue $1 become RUNNING under a fresh lease of worker $3,
-- as Evora's claim leaves them (attempt, lease token, lease end, worker, start). Not Evora's
-- claim (no event, no slots, no queue join): only the completions are timed.
UPDATE evora.jobs j
SET state = 'RUNNING',
    attempt = j.attempt + 1,
    lease_token = gen_random_uuid(),
    locked_until = now() + interval '5 minutes',
    worker_id = $3,
    started_at = now()
WHERE j.id IN (
  SELECT id FROM evora.jobs
  WHERE queue = $1 AND state = 'PENDING'
  ORDER BY priority, run_at, id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
)
RETURNING j.id, j.lease_token

-- name: jobClaim
-- A graphile-worker-shaped claim for hotpath-sql.ts (claim=…): one queue, the best :limit
-- PENDING jobs locked (SKIP LOCKED) and made RUNNING under a fresh lease, as Evora's claim
-- leaves them; no slots, no per-queue lease, no limited-queue check, no event. Measurement
-- only: what Evora's claim costs beyond the bare change (it takes the store's parameters).
WITH picked AS (
  SELECT j.id
  FROM evora.jobs j
  WHERE j.state = 'PENDING' AND j.queue = (:queues::text[])[1] AND j.run_at <= coalesce(:now::timestamptz, now())
    AND (:types::text[] IS NULL OR array_position(:types::text[], j.type) IS NOT NULL)
  ORDER BY j.priority, j.run_at, j.id
  LIMIT :limit
  FOR UPDATE SKIP LOCKED
)
UPDATE evora.jobs j
SET state = 'RUNNING', attempt = j.attempt + 1, lease_token = gen_random_uuid(),
    locked_until = coalesce(:now::timestamptz, now()) + make_interval(secs => 60),
    worker_id = (:workerIds::text[])[(:slotWorkers::int[])[1]], started_at = coalesce(:now::timestamptz, now()),
    cancel_requested_at = NULL
FROM picked p WHERE j.id = p.id
RETURNING j.id, j.queue, j.type, j.payload, j.priority, j.run_at, j.attempt, j.max_attempts, j.lease_token,
          j.idempotency_key, j.last_error, j.created_at, j.parent_ids, j.checkpoint

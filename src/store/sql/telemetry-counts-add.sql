-- name: telemetryCountsAdd
-- Adds a batch's changes to the number of jobs per queue and state (one element per
-- (queue, state); deltas may be negative).
INSERT INTO evora.telemetry_queue_counts AS c (queue, state, n)
SELECT * FROM unnest(:queues::text[], :states::evora.job_state[], :deltas::bigint[])
ON CONFLICT (queue, state) DO UPDATE SET n = c.n + EXCLUDED.n

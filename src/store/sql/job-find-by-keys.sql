-- name: jobFindByKeys
-- The jobs that hold the given (queue, idempotency key) pairs, and whether each has the
-- type and payload the replaying submit sent (jsonb equality).
-- Must stay true: it runs as its own statement after the insert, in a fresh snapshot, so it
-- sees a conflicting row that a concurrent submit committed while the insert waited on it.
SELECT j.*, (j.type = k.type AND j.payload = k.payload) AS same_content
FROM unnest(:queues::text[], :idempotencyKeys::text[], :types::text[], :payloads::jsonb[]) AS k(queue, idempotency_key, type, payload)
JOIN evora.jobs j ON j.queue = k.queue AND j.idempotency_key = k.idempotency_key

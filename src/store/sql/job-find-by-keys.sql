-- name: jobFindByKeys
-- The jobs that hold the given (queue, idempotency key) pairs, and the first submitted field
-- in which each replay differs from its job (NULL: identical), by the one rule of
-- evora.job_submit_difference (0005_strict_idempotency.sql), which evora.submit_job uses too.
-- Must stay true: it runs as its own statement after the insert, in a fresh snapshot, so it
-- sees a conflicting row that a concurrent submit committed while the insert waited on it;
-- the replay's fields go through evora.job_submitted_fields as the insert's do. A pair given
-- twice (a batch naming one key more than once) gets a row for each, compared with its own
-- fields; key_index says which (0-based, in the order given).
SELECT j.*,
       evora.job_submit_difference(j.type, j.payload, j.submitted, k.type, k.payload,
                                   evora.job_submitted_fields(k.priority, k.run_at, k.max_attempts, k.policy)) AS difference,
       (k.n - 1)::int AS key_index
FROM unnest(:queues::text[], :idempotencyKeys::text[], :types::text[], :payloads::jsonb[],
            :priorities::int[], :runAts::timestamptz[], :maxAttempts::int[], :policies::jsonb[])
  WITH ORDINALITY AS k(queue, idempotency_key, type, payload, priority, run_at, max_attempts, policy, n)
JOIN evora.jobs j ON j.queue = k.queue AND j.idempotency_key = k.idempotency_key

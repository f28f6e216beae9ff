-- name: queueUpsert
-- Creates a queue or changes the given settings of an existing one: a null parameter
-- keeps the current value (or takes the default for a new queue). :maxConcurrency 0 means
-- "no limit" (NULL in the table); a retention of 0 means "keep forever" (NULL in the
-- table); an attempt timeout of 0 means "none" (NULL, the default). A new queue's created_at and updated_at are :now (or the database's clock).
-- `created` says which happened, decided by this statement itself: a row it inserted has
-- no xmax, one it updated has this transaction's.
-- :ratePerSecond null keeps the rate limit, 0 clears it, else it is set with :rateBurst
-- (validated: finite, > 0, burst >= 1); a changed limit refills the bucket (its state NULL),
-- the same limit set again keeps it (so repeating an upsert never grants another burst).
-- :maxConcurrencyPerKey: null keeps, 0 clears (NULL), else the per-key limit (0009).
-- :deleteOnComplete: null keeps (false for a new queue), else sets it (0015).
-- Wakes every server's claimers for the queue (a loosened limit frees room at once).
-- Writes the audit event `queue.upsert` (target: the queue; change: :change, the settings the
-- request set) in this statement.
-- Must stay true: the defaults here are the table's defaults (src/store/migrations).
WITH upserted AS (
INSERT INTO evora.queues AS q (name, max_attempts, backoff_kind, backoff_base_seconds, backoff_cap_seconds,
                               backoff_jitter, lease_seconds, max_concurrency, created_at, updated_at,
                               completed_retention_seconds, cancelled_retention_seconds, dlq_retention_seconds,
                               attempt_timeout_seconds,
                               rate_per_second, rate_burst, max_concurrency_per_key, delete_on_complete)
VALUES (:name,
        coalesce(:maxAttempts::int, 5), coalesce(:backoffKind::evora.backoff_kind, 'exponential'),
        coalesce(:backoffBaseSeconds::float8, 5), coalesce(:backoffCapSeconds::float8, 3600), coalesce(:backoffJitter::float8, 0.2),
        coalesce(:leaseSeconds::int, 30), nullif(:maxConcurrency::int, 0),
        coalesce(:now::timestamptz, now()), coalesce(:now::timestamptz, now()),
        CASE WHEN :completedRetentionSeconds::float8 IS NULL THEN 604800 ELSE nullif(:completedRetentionSeconds::float8, 0) END,
        CASE WHEN :cancelledRetentionSeconds::float8 IS NULL THEN 604800 ELSE nullif(:cancelledRetentionSeconds::float8, 0) END,
        CASE WHEN :dlqRetentionSeconds::float8 IS NULL THEN 2592000 ELSE nullif(:dlqRetentionSeconds::float8, 0) END,
        nullif(:attemptTimeoutSeconds::float8, 0),
        nullif(:ratePerSecond::float8, 0), CASE WHEN nullif(:ratePerSecond::float8, 0) IS NOT NULL THEN :rateBurst::int END,
        nullif(:maxConcurrencyPerKey::int, 0), coalesce(:deleteOnComplete::bool, false))
ON CONFLICT (name) DO UPDATE SET
  max_attempts = coalesce(:maxAttempts::int, q.max_attempts),
  backoff_kind = coalesce(:backoffKind::evora.backoff_kind, q.backoff_kind),
  backoff_base_seconds = coalesce(:backoffBaseSeconds::float8, q.backoff_base_seconds),
  backoff_cap_seconds = coalesce(:backoffCapSeconds::float8, q.backoff_cap_seconds),
  backoff_jitter = coalesce(:backoffJitter::float8, q.backoff_jitter),
  lease_seconds = coalesce(:leaseSeconds::int, q.lease_seconds),
  max_concurrency = CASE WHEN :maxConcurrency::int IS NULL THEN q.max_concurrency ELSE nullif(:maxConcurrency::int, 0) END,
  completed_retention_seconds = CASE WHEN :completedRetentionSeconds::float8 IS NULL THEN q.completed_retention_seconds
                                     ELSE nullif(:completedRetentionSeconds::float8, 0) END,
  cancelled_retention_seconds = CASE WHEN :cancelledRetentionSeconds::float8 IS NULL THEN q.cancelled_retention_seconds
                                     ELSE nullif(:cancelledRetentionSeconds::float8, 0) END,
  dlq_retention_seconds = CASE WHEN :dlqRetentionSeconds::float8 IS NULL THEN q.dlq_retention_seconds
                               ELSE nullif(:dlqRetentionSeconds::float8, 0) END,
  attempt_timeout_seconds = CASE WHEN :attemptTimeoutSeconds::float8 IS NULL THEN q.attempt_timeout_seconds
                                 ELSE nullif(:attemptTimeoutSeconds::float8, 0) END,
  rate_per_second = CASE WHEN :ratePerSecond::float8 IS NULL THEN q.rate_per_second ELSE nullif(:ratePerSecond::float8, 0) END,
  rate_burst = CASE WHEN :ratePerSecond::float8 IS NULL THEN q.rate_burst
                    WHEN :ratePerSecond::float8 = 0 THEN NULL ELSE :rateBurst::int END,
  -- The bucket is kept unless the limit changes: an upsert that repeats the queue's settings
  -- (a deploy, every worker's start) must not hand out another burst.
  rate_tokens = CASE WHEN :ratePerSecond::float8 IS NULL
                       OR (:ratePerSecond::float8 = q.rate_per_second AND :rateBurst::int = q.rate_burst)
                     THEN q.rate_tokens END,
  rate_refilled_at = CASE WHEN :ratePerSecond::float8 IS NULL
                            OR (:ratePerSecond::float8 = q.rate_per_second AND :rateBurst::int = q.rate_burst)
                          THEN q.rate_refilled_at END,
  max_concurrency_per_key = CASE WHEN :maxConcurrencyPerKey::int IS NULL THEN q.max_concurrency_per_key
                                 ELSE nullif(:maxConcurrencyPerKey::int, 0) END,
  delete_on_complete = coalesce(:deleteOnComplete::bool, q.delete_on_complete),
  updated_at = coalesce(:now::timestamptz, now())
RETURNING q.*, (q.xmax = 0) AS created
),
audited AS (
  INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
  SELECT coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName, 'queue.upsert', u.name, :change::jsonb
  FROM upserted u
),
-- Wakes the dispatchers of every server (NOTIFY on evora_job_available, as a resume does): a
-- raised or cleared limit lets waiting jobs start now, not at the next fallback poll or token
-- timer (which may be a day away for a slow rate). A wake-up that finds nothing is harmless.
woken AS (
  SELECT pg_notify('evora_job_available', name) FROM upserted
)
SELECT * FROM upserted WHERE (SELECT count(*) FROM woken) >= 0

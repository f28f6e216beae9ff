-- A queue's backoff base may not be longer than its cap. Such a pair made every retry
-- delay the cap (evora.backoff_seconds takes the least of the two), whatever the kind and
-- the base said: `queue set --backoff fixed --backoff-base 2h` on a queue with the default
-- 1-hour cap retried hourly, silently. UpsertQueue now refuses a change that would leave
-- base > cap (src/store/queues.ts maps this constraint to INVALID_ARGUMENT).
--
-- Rows that already have base > cap get base = cap first: their delays were the cap
-- already (or, with jitter, at most the cap), and stay so: no retry waits longer than it did.
UPDATE evora.queues
SET backoff_base_seconds = backoff_cap_seconds
WHERE backoff_base_seconds > backoff_cap_seconds;

ALTER TABLE evora.queues
    ADD CONSTRAINT queues_backoff_base_within_cap CHECK (backoff_base_seconds <= backoff_cap_seconds);

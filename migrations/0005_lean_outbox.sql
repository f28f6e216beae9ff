-- A leaner outbox. Batches no longer stamp each event row (an UPDATE per event, plus two
-- partial indexes that every event insert had to maintain). A batch is now defined by two
-- numbers recorded when it is opened:
--   horizon: the xmin of the projector's snapshot: every transaction with a smaller id has
--            ended, so no event with xid < horizon can appear later;
--   hi_id:   the largest event id taken.
-- The batch is every event with id <= hi_id and xid < horizon: a set that cannot change
-- until the batch is closed (its rows deleted), so a rerun after a crash applies exactly
-- the same events. Events of transactions still open at that moment are taken by a later
-- batch (counts are sums: the order does not matter).

ALTER TABLE evora.job_events ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
DROP INDEX evora.job_events_unbatched_idx;
DROP INDEX evora.job_events_batch_idx;
ALTER TABLE evora.job_events DROP COLUMN batch_id;

ALTER TABLE evora.projector_batches ADD COLUMN hi_id bigint NOT NULL DEFAULT 0;
ALTER TABLE evora.projector_batches ADD COLUMN horizon xid8 NOT NULL DEFAULT '0';

-- Recent events are looked up by time; one index fewer to maintain per projected event.
DROP INDEX evora.telemetry_recent_events_job_idx;

-- Jobs with the same priority and run_at (a batch submit) are claimed in id order, which
-- is submit order (UUIDv7): the claim index carries the id so the order costs no sort.
DROP INDEX evora.jobs_claimable_idx;
CREATE INDEX jobs_claimable_idx ON evora.jobs (queue, priority, run_at, id) WHERE state = 'PENDING';

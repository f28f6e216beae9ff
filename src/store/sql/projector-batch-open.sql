-- name: projectorBatchOpen
-- Opens a new projector batch for :sink: whole outbox rows in id order, until about :limit
-- events (the row that crosses the limit is taken whole; at least one row), among those
-- written by transactions that have ended. No row when there is nothing to project.
-- Must stay true: a batch is the two numbers recorded here, horizon (the xmin of this
-- snapshot: every transaction with a smaller id has ended, so no event with xid < horizon
-- can appear later) and hi_id (the largest event row taken). The batch is every outbox row
-- with id <= hi_id AND xid < horizon: a set that cannot change until the batch is closed,
-- so a rerun after a crash applies exactly the same events (docs/telemetry.md). At most one
-- batch is open (a unique index, migration 0002): while another projector's batch is open
-- this inserts nothing, and the caller reads that batch (projector-batch-open-get.sql).
WITH horizon AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin),
first_rows AS (
  SELECT e.id, e.n FROM evora.job_events e, horizon h WHERE e.xid < h.xmin ORDER BY e.id LIMIT :limit
),
taken AS (
  SELECT id, n FROM (SELECT id, n, sum(n) OVER (ORDER BY id) - n AS before FROM first_rows) r
  WHERE before < :limit
)
INSERT INTO evora.projector_batches (sink, events, hi_id, horizon)
SELECT :sink, sum(t.n), max(t.id), (SELECT xmin FROM horizon) FROM taken t HAVING count(*) > 0
ON CONFLICT DO NOTHING
RETURNING id, hi_id, horizon

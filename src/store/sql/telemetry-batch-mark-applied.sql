-- name: telemetryBatchMarkApplied
-- Records that the embedded telemetry sink applies projector batch :batchId; no row when
-- it was applied before, or when the batch is no longer open (closed: it was applied before
-- its close, so applying it again would count it twice). Must stay true: runs in the
-- transaction that applies the batch, so applying it again after a crash is a no-op; the
-- batch row is locked (FOR KEY SHARE) until that transaction ends, so a projector closing
-- the batch (projector-batch-close.sql deletes the row) waits for the apply to commit, and
-- an apply that comes after the close finds no row. That is why the markers of closed
-- batches can be deleted (telemetry-applied-batches-prune.sql).
INSERT INTO evora.telemetry_applied_batches (batch_id)
SELECT b.id FROM evora.projector_batches b WHERE b.id = :batchId FOR KEY SHARE
ON CONFLICT DO NOTHING RETURNING batch_id

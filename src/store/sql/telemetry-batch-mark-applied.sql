-- name: telemetryBatchMarkApplied
-- Records that the embedded telemetry sink applies projector batch :batchId; no row when
-- it was applied before. Must stay true: runs in the transaction that applies the batch,
-- so applying it again after a crash is a no-op.
INSERT INTO evora.telemetry_applied_batches (batch_id) VALUES (:batchId) ON CONFLICT DO NOTHING RETURNING batch_id

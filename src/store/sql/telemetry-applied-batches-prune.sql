-- name: telemetryAppliedBatchesPrune
-- Deletes up to :limit of the embedded sink's applied-batch markers (lowest ids first) whose
-- projector batch is closed. Returns how many; :limit of them means more may be due.
-- Must stay true: a marker is needed only while its batch is open, since only an open batch
-- is applied (telemetry-batch-mark-applied.sql finds a closed one gone and applies nothing),
-- so the marker of every open batch is kept: a batch re-applied after a crash is still
-- recognised. A marker is written after its batch row committed, so a snapshot that sees the
-- marker also sees the batch while it is open.
WITH old AS (
  SELECT a.batch_id FROM evora.telemetry_applied_batches a
  WHERE NOT EXISTS (SELECT 1 FROM evora.projector_batches b WHERE b.id = a.batch_id)
  ORDER BY a.batch_id
  LIMIT :limit
),
deleted AS (
  DELETE FROM evora.telemetry_applied_batches a USING old o WHERE a.batch_id = o.batch_id
  RETURNING 1
)
SELECT count(*)::int AS batches FROM deleted

-- name: projectorBatchClose
-- Closes an applied projector batch: deletes its outbox rows and the batch row, in one
-- statement. Must stay true: called only after the batch was applied to the sink, so a
-- crash anywhere before leaves the events in the outbox.
WITH batch AS (DELETE FROM evora.projector_batches WHERE id = :batchId RETURNING hi_id, horizon)
DELETE FROM evora.job_events e USING batch b WHERE e.id <= b.hi_id AND e.xid < b.horizon

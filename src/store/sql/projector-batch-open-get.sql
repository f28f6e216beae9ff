-- name: projectorBatchOpenGet
-- The projector batch a crash left open, if any (at most one is open at a time: the
-- projector runs on the elected leader only and closes a batch before opening the next).
SELECT id, hi_id, horizon FROM evora.projector_batches ORDER BY id LIMIT 1

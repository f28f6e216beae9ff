-- name: projectorBatchOpenGet
-- The open projector batch, if any: one a crash left open, or one another projector (an
-- overlapping leader) is applying. At most one is open at a time (a unique index,
-- migration 0002), and a projector closes its batch before opening the next.
SELECT id, hi_id, horizon FROM evora.projector_batches ORDER BY id LIMIT 1

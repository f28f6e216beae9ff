-- At most one projector batch is open at a time.
--
-- The projector runs on the elected leader, but two leaders can overlap for a moment (the
-- old one's tick finishing while the new one starts). Two projectors that both found no
-- open batch each opened one over the same outbox rows, and both were applied: those
-- events were counted twice. With this index the second insert finds the first batch
-- (`ON CONFLICT DO NOTHING` in src/store/sql/projector-batch-open.sql) and that projector
-- applies the same batch, which each sink applies once (docs/telemetry.md).
--
-- A database where that race already left two batches open keeps the oldest (the one the
-- projector would have finished first); the events of the others stay in the outbox and go
-- into later batches.
DELETE FROM evora.projector_batches WHERE id > (SELECT min(id) FROM evora.projector_batches);

CREATE UNIQUE INDEX projector_batches_one_open_idx ON evora.projector_batches ((true));

-- name: telemetryRecentEventsCopy
-- The embedded sink's recent events: a projector batch's packed outbox rows (id <= :hiId,
-- xid < :horizon) copied as they are, in SQL, so the events never travel to the projector
-- and back. A row copied before is skipped.
INSERT INTO evora.telemetry_recent_events (outbox_id, at, n, job_ids, queues, types, kinds, to_states, attempts, worker_ids)
SELECT id, at, n, job_ids, queues, types, kinds, to_states, attempts, worker_ids
FROM evora.job_events WHERE id <= :hiId AND xid < :horizon::xid8
ON CONFLICT (outbox_id) DO NOTHING

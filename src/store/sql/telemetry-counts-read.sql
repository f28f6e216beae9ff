-- name: telemetryCountsRead
-- The number of jobs per queue and state, of the given queues (null: all).
SELECT queue, state, n FROM evora.telemetry_queue_counts WHERE :queues::text[] IS NULL OR queue = ANY(:queues)

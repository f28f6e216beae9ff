-- name: telemetryMinutesRead
-- The per-minute buckets after :since, of the given queues (null: all).
SELECT queue, minute, submitted, completed, failed, dead_lettered, wait_hist, run_hist
FROM evora.telemetry_minutes WHERE (:queues::text[] IS NULL OR queue = ANY(:queues)) AND minute > :since

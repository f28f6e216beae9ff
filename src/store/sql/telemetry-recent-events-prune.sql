-- name: telemetryRecentEventsPrune
-- Deletes the embedded sink's recent events older than :retentionSeconds.
DELETE FROM evora.telemetry_recent_events WHERE at < coalesce(:now::timestamptz, now()) - make_interval(secs => :retentionSeconds)

-- name: telemetryRecentEventsPrune
-- Deletes up to :limit of the embedded sink's recent events (oldest first) older than
-- :retentionSeconds before now. Returns how many; :limit of them means more may be due.
-- Must stay true: bounded, through telemetry_recent_events_at_idx, and run by retention
-- (telemetryPrune), not in a batch's apply: after a quiet day the events due are all of the
-- day before, and one statement over all of them in the apply's transaction could outlast
-- the query timeout on every retry, so that the projector never closed a batch again.
WITH old AS (
  SELECT r.outbox_id FROM evora.telemetry_recent_events r
  WHERE r.at < coalesce(:now::timestamptz, now()) - make_interval(secs => :retentionSeconds)
  ORDER BY r.at
  LIMIT :limit
),
deleted AS (
  DELETE FROM evora.telemetry_recent_events r USING old o WHERE r.outbox_id = o.outbox_id
  RETURNING 1
)
SELECT count(*)::int AS events FROM deleted

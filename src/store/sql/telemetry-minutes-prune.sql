-- name: telemetryMinutesPrune
-- Deletes up to :limit of the embedded sink's minute buckets (oldest first) that start more
-- than :keepMinutes before now: no read looks back that far (docs/telemetry.md,
-- "Retention"). Returns how many; :limit of them means more may be due. Through
-- telemetry_minutes_minute_idx (migration 0017), so a pass with nothing to delete is cheap.
WITH old AS (
  SELECT m.queue, m.minute FROM evora.telemetry_minutes m
  WHERE m.minute < coalesce(:now::timestamptz, now()) - make_interval(mins => :keepMinutes::int)
  ORDER BY m.minute
  LIMIT :limit
),
deleted AS (
  DELETE FROM evora.telemetry_minutes m USING old o WHERE m.queue = o.queue AND m.minute = o.minute
  RETURNING 1
)
SELECT count(*)::int AS minutes FROM deleted

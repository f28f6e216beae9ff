-- name: scheduleSetPaused
-- Pauses or resumes a schedule. Resuming a paused one sets next_run_at to :nextRunAt (the
-- first fire time after now: fires missed while paused are skipped) and wakes the
-- scheduler; pausing or resuming in place changes nothing else. Writes the audit event
-- `schedule.pause` or `schedule.resume` (target: the schedule) in this statement.
WITH changed AS (
  UPDATE evora.schedules s
  SET paused = :paused,
      next_run_at = CASE WHEN s.paused AND NOT :paused THEN :nextRunAt::timestamptz ELSE s.next_run_at END,
      updated_at = CASE WHEN s.paused = :paused THEN s.updated_at ELSE coalesce(:now::timestamptz, now()) END
  WHERE s.name = :name
  RETURNING s.*
),
audited AS (
  INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
  SELECT coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName,
         CASE WHEN :paused THEN 'schedule.pause' ELSE 'schedule.resume' END, c.name, '{}'::jsonb
  FROM changed c
),
woken AS (
  SELECT pg_notify('evora_schedule_changed', name) FROM changed WHERE NOT :paused
)
SELECT * FROM changed WHERE (SELECT count(*) FROM woken) >= 0

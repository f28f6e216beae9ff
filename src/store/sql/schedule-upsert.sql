-- name: scheduleUpsert
-- Creates a schedule or replaces every setting of an existing one (paused, last_run_at and
-- last_job_id are kept). next_run_at: :nextRunAt (the first fire time after now, computed
-- by the caller) for a new schedule or a changed cron or time zone; otherwise the current
-- one, so that an upsert that changes only the job's fields neither skips nor repeats a
-- fire. updated_at moves only when a setting changed. `created` says which happened
-- (xmax = 0: inserted). Wakes the scheduler
-- (evora_schedule_changed) at commit. Writes the audit event `schedule.upsert` (target: the
-- schedule; change: its settings) in this statement.
WITH upserted AS (
  INSERT INTO evora.schedules AS s (name, cron, timezone, queue, type, payload, priority, max_attempts,
                                    misfire_policy, misfire_cap, next_run_at, created_at, updated_at)
  VALUES (:name, :cron, :timezone, :queue, :type, :payload::jsonb, :priority::int, :maxAttempts::int,
          :misfirePolicy, :misfireCap::int, :nextRunAt::timestamptz,
          coalesce(:now::timestamptz, now()), coalesce(:now::timestamptz, now()))
  ON CONFLICT (name) DO UPDATE SET
    cron = EXCLUDED.cron,
    timezone = EXCLUDED.timezone,
    queue = EXCLUDED.queue,
    type = EXCLUDED.type,
    payload = EXCLUDED.payload,
    priority = EXCLUDED.priority,
    max_attempts = EXCLUDED.max_attempts,
    misfire_policy = EXCLUDED.misfire_policy,
    misfire_cap = EXCLUDED.misfire_cap,
    next_run_at = CASE WHEN s.cron = EXCLUDED.cron AND s.timezone = EXCLUDED.timezone THEN s.next_run_at
                       ELSE EXCLUDED.next_run_at END,
    updated_at = CASE WHEN (s.cron, s.timezone, s.queue, s.type, s.payload, s.priority, s.max_attempts, s.misfire_policy, s.misfire_cap)
                           IS NOT DISTINCT FROM (EXCLUDED.cron, EXCLUDED.timezone, EXCLUDED.queue, EXCLUDED.type, EXCLUDED.payload,
                                                 EXCLUDED.priority, EXCLUDED.max_attempts, EXCLUDED.misfire_policy, EXCLUDED.misfire_cap)
                      THEN s.updated_at ELSE coalesce(:now::timestamptz, now()) END
  RETURNING s.*, (s.xmax = 0) AS created
),
audited AS (
  INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
  SELECT coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName, 'schedule.upsert', u.name,
         jsonb_build_object('cron', u.cron, 'timezone', u.timezone, 'queue', u.queue, 'type', u.type, 'priority', u.priority,
                            'max_attempts', u.max_attempts, 'misfire_policy', u.misfire_policy, 'misfire_cap', u.misfire_cap)
  FROM upserted u
),
woken AS (
  SELECT pg_notify('evora_schedule_changed', name) FROM upserted
)
SELECT * FROM upserted WHERE (SELECT count(*) FROM woken) >= 0

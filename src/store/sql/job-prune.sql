-- name: jobPrune
-- One batch of retention: deletes up to :limit finished jobs (COMPLETED, CANCELLED, DLQ)
-- whose queue's retention for their state has passed since they finished (finished_at
-- before :now minus the retention; a NULL retention keeps them forever), oldest first within
-- each queue and state. Returns how many it deleted per queue and state.
-- Must stay true:
-- - only finished states are ever deleted (the explicit state list also lets the planner use
--   the partial jobs_finished_idx: each (queue, state) is one index range scan);
-- - never a job whose events are still in the outbox, i.e. not yet projected into
--   telemetry: a job's events are written by the statements that changed it, each stamped
--   with that statement's time, the last one (its finish) with `at` = finished_at; so a job
--   that finished before the oldest outbox row left nothing there. With the projector behind
--   (telemetry store down), pruning waits with it;
-- - bounded and short: at most :limit rows locked (SKIP LOCKED: a row an operator is
--   retrying right now is left for a later batch) and deleted by primary key; no event is
--   written (pruning is not a change of state: telemetry counts are left as they are);
-- - a deleted job's attempt history (evora.job_attempts) is deleted with it, in this statement;
-- - a parent that ended DLQ or CANCELLED is kept, past its retention, while a child it
--   cancelled (or one an operator cancelled) is still there, CANCELLED: that child's retry
--   must see it failed (sql/job-retry.sql; 0011_dependencies.sql). Deleted, it would read as
--   a parent that COMPLETED and was pruned, and the child would run without it. It goes at
--   the first run after the last such child is deleted (by its own queue's retention). Only
--   jobs with dependents pay the lookup (jobs_parent_ids_idx).
WITH horizon AS (
  SELECT coalesce(min(at), 'infinity'::timestamptz) AS oldest_event FROM evora.job_events
),
policies AS (
  SELECT q.name AS queue, r.state,
         least(coalesce(:now::timestamptz, now()) - make_interval(secs => r.seconds),
               (SELECT oldest_event FROM horizon)) AS finished_before
  FROM evora.queues q
  CROSS JOIN LATERAL (VALUES ('COMPLETED'::evora.job_state, q.completed_retention_seconds),
                             ('CANCELLED'::evora.job_state, q.cancelled_retention_seconds),
                             ('DLQ'::evora.job_state, q.dlq_retention_seconds)) AS r(state, seconds)
  WHERE r.seconds IS NOT NULL
),
picked AS (
  SELECT c.id
  FROM policies p
  CROSS JOIN LATERAL (
    SELECT j.id
    FROM evora.jobs j
    WHERE j.queue = p.queue AND j.state = p.state AND j.state IN ('COMPLETED', 'CANCELLED', 'DLQ')
      AND j.finished_at < p.finished_before
      AND NOT (j.has_dependents AND j.state IN ('CANCELLED', 'DLQ') AND EXISTS (
        SELECT 1 FROM evora.jobs c WHERE c.parent_ids @> ARRAY[j.id] AND c.parent_ids IS NOT NULL AND c.state = 'CANCELLED'))
    ORDER BY j.finished_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
  ) c
  LIMIT :limit
),
deleted AS (
  DELETE FROM evora.jobs j
  WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
  RETURNING j.id, j.queue, j.state
),
attempts_deleted AS (
  -- Their attempt history (evora.job_attempts has no foreign key: see 0012_progress_attempts.sql).
  DELETE FROM evora.job_attempts a
  WHERE a.job_id = ANY (ARRAY(SELECT id FROM deleted))
)
SELECT queue, state, count(*)::int AS jobs FROM deleted GROUP BY queue, state ORDER BY queue, state

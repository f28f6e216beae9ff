-- name: jobRetry
-- An operator's manual retry: a DLQ or CANCELLED job goes back to PENDING, due now, with
-- its attempts reset and its last run forgotten (lease, worker, result, times; the last
-- error stays). One `retried_manually` event; wakes its queue. No row for any other state.
-- A job with parents (0011_dependencies.sql) goes back to WAITING while a parent is
-- unfinished, and is not retried (no row) while a parent is DLQ or CANCELLED: that parent's
-- retry restores it. Nor (no row) when the parent that cancelled it (cancelled_by, always one
-- of its parent_ids; a grandchild's names its own parent, the previous generation) no longer
-- exists: that parent ended DLQ or CANCELLED and was deleted since (retention, PurgeJobs), so
-- it can never complete, and this job must not run without it. A parent missing otherwise
-- (it COMPLETED, then was deleted) does not hold the job back. Its parents are read with a
-- locking read (their latest versions), so a parent completing meanwhile either is seen
-- COMPLETED or finds this job WAITING, and a parent the pruner deletes meanwhile is either
-- kept by this lock (the pruner skips locked rows) or seen gone.
-- The audit event `job.retry` (target: the id; change: the previous state) is written in this
-- statement, only when the job was retried.
WITH previous AS (
  SELECT id, state, parent_ids, cancelled_by FROM evora.jobs WHERE id = :id AND state IN ('DLQ', 'CANCELLED') FOR UPDATE
),
parents AS (
  SELECT p.id, p.state FROM evora.jobs p, previous v WHERE p.id = ANY (v.parent_ids) ORDER BY p.id FOR SHARE OF p
),
updated AS (
  UPDATE evora.jobs j
  SET state = (CASE WHEN EXISTS (SELECT 1 FROM parents WHERE state <> 'COMPLETED') THEN 'WAITING' ELSE 'PENDING' END)::evora.job_state,
      cancelled_by = NULL,
      attempt = 0,
      run_at = coalesce(:now::timestamptz, now()),
      lease_token = NULL,
      locked_until = NULL,
      worker_id = NULL,
      result = NULL,
      cancel_requested_at = NULL,
      started_at = NULL,
      finished_at = NULL
  FROM previous p
  WHERE j.id = p.id AND NOT EXISTS (SELECT 1 FROM parents WHERE state IN ('DLQ', 'CANCELLED'))
    AND (p.cancelled_by IS NULL OR EXISTS (SELECT 1 FROM parents WHERE id = p.cancelled_by))
  RETURNING j.*, p.state AS previous_state
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(run_at), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg('retried_manually'::evora.job_event_kind), array_agg(previous_state::evora.job_state), array_agg(state),
         array_agg(attempt), array_agg(worker_id),
         array_agg(NULL::float8), array_agg(NULL::float8)
  FROM updated
  HAVING count(*) > 0
),
audited AS (
  INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
  SELECT coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName, 'job.retry', u.id::text,
         jsonb_build_object('previous_state', u.previous_state)
  FROM updated u
),
woken AS (
  SELECT pg_notify('evora_job_available', d.queue) FROM (SELECT DISTINCT queue FROM updated WHERE state = 'PENDING') d
)
SELECT * FROM updated WHERE (SELECT count(*) FROM woken) >= 0

-- name: jobRetryMany
-- One batch of an operator's bulk retry (RetryJobs): up to :limit jobs matching the filter
-- (queue, states, type, error group (evora.error_group), finished before, ids; null: not
-- filtered on) that finished at or
-- before :cutoff (null: any time), each changed exactly as sql/job-retry.sql changes one job: back to PENDING, due
-- now, attempts reset, last run forgotten (the last error stays); a job with parents
-- (0011_dependencies.sql) back to WAITING while a parent is unfinished, and not taken at
-- all while a parent is DLQ or CANCELLED (that parent's retry restores it) or when the
-- parent that cancelled it (cancelled_by) no longer exists (it can never complete: as
-- sql/job-retry.sql refuses it; not counted, left CANCELLED). One `retried_manually`
-- event per job in one outbox row; wakes each queue once. Returns how many it retried, how
-- many it picked (locked; more than it retried when a parent's latest version holds a job
-- back: a full pick means more may match), and its time (the caller's :cutoff for the run's
-- later batches).
-- A batch that retried any job writes one audit event `jobs.retry` (target: :auditTarget;
-- change: :auditChange with the batch's job count), none otherwise (the log is append-only:
-- a run is one event per batch, each in its batch's transaction).
-- Must stay true:
-- - only DLQ and CANCELLED jobs are ever retried, whatever :states says (the explicit list);
-- - bounded: at most :limit rows locked, SKIP LOCKED (a row another operator or the pruner
--   holds is left for a later run); no ORDER BY, so a batch is one range scan of
--   jobs_finished_idx when a queue is given, not a sort of every match;
-- - the caller's loop ends: a retried job leaves the match (PENDING or WAITING), a job held by
--   a DLQ or CANCELLED parent or by a deleted cancelled_by is never in it, and one that fails back
--   into the DLQ meanwhile finished after :cutoff, so the run never takes a job twice.
WITH previous AS (
  SELECT j.id, j.state, j.parent_ids, j.cancelled_by
  FROM evora.jobs j
  WHERE j.state IN ('DLQ', 'CANCELLED') AND j.state = ANY (:states::evora.job_state[])
    AND (:queue::text IS NULL OR j.queue = :queue)
    AND (:type::text IS NULL OR j.type = :type)
    AND (:errorGroup::text IS NULL OR evora.error_group(j.last_error) = :errorGroup)
    AND (:finishedBefore::timestamptz IS NULL OR j.finished_at < :finishedBefore)
    AND (:ids::uuid[] IS NULL OR j.id = ANY (:ids))
    AND (:cutoff::timestamptz IS NULL OR j.finished_at <= :cutoff)
    AND (j.parent_ids IS NULL
         OR NOT EXISTS (SELECT 1 FROM evora.jobs p WHERE p.id = ANY (j.parent_ids) AND p.state IN ('DLQ', 'CANCELLED')))
    AND (j.cancelled_by IS NULL OR EXISTS (SELECT 1 FROM evora.jobs p WHERE p.id = j.cancelled_by))
  LIMIT :limit
  FOR UPDATE OF j SKIP LOCKED
),
parents AS (
  -- Latest versions (a locking read), as sql/job-retry.sql reads them: a parent completing
  -- meanwhile is seen COMPLETED or finds its child WAITING, and one deleted meanwhile is seen gone.
  SELECT v.id AS child, p.id AS parent, p.state
  FROM previous v JOIN evora.jobs p ON p.id = ANY (v.parent_ids)
  ORDER BY p.id
  FOR SHARE OF p
),
updated AS (
  UPDATE evora.jobs j
  SET state = (CASE WHEN EXISTS (SELECT 1 FROM parents a WHERE a.child = p.id AND a.state <> 'COMPLETED')
                    THEN 'WAITING' ELSE 'PENDING' END)::evora.job_state,
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
  WHERE j.id = p.id AND NOT EXISTS (SELECT 1 FROM parents a WHERE a.child = p.id AND a.state IN ('DLQ', 'CANCELLED'))
    AND (p.cancelled_by IS NULL OR EXISTS (SELECT 1 FROM parents a WHERE a.child = p.id AND a.parent = p.cancelled_by))
  RETURNING j.id, j.queue, j.type, j.state, j.attempt, j.worker_id, j.run_at, p.state AS previous_state
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
  SELECT coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName, 'jobs.retry', :auditTarget,
         :auditChange::jsonb || jsonb_build_object('jobs', c.n)
  FROM (SELECT count(*) AS n FROM updated) c
  WHERE c.n > 0
),
woken AS (
  SELECT pg_notify('evora_job_available', d.queue) FROM (SELECT DISTINCT queue FROM updated WHERE state = 'PENDING') d
)
SELECT count(*)::int AS jobs, (SELECT count(*) FROM previous)::int AS picked, coalesce(:now::timestamptz, now()) AS at
FROM updated
WHERE (SELECT count(*) FROM woken) >= 0

-- name: jobCancelMany
-- One batch of an operator's bulk cancel (CancelJobs): up to :limit jobs matching the filter
-- (queue, states, type, error group (evora.error_group), ids; null: not filtered on; no
-- finished-before: these jobs have not finished) created at or before :cutoff (null: this
-- batch's time, `now`: in the first batch, a job created later is one whose transaction
-- began after this one's, which it cannot see anyway; with `now` passed in, it is what the
-- caller says is now), each changed exactly as sql/job-cancel.sql changes one job: PENDING or WAITING
-- cancelled at once (the dependents trigger cancels their WAITING descendants, 0011), RUNNING
-- flagged (cancel_requested_at) and its holder's server told through NOTIFY on
-- evora_job_cancel. One `cancelled` event per cancelled job in one outbox row. Returns how
-- many it changed, how many it picked (locked: a full pick means more may match), and its
-- time (the caller's :cutoff for the run's later batches).
-- A batch that changed any job writes one audit event `jobs.cancel` (target: :auditTarget;
-- change: :auditChange with the batch's job count), none otherwise.
-- Must stay true:
-- - only PENDING, WAITING and RUNNING jobs are ever changed, whatever :states says;
-- - a RUNNING job already flagged is not in the match (nothing to change: it stays RUNNING
--   until its worker gives it up), so the caller's loop ends: a changed job leaves the match
--   (CANCELLED, or RUNNING and flagged), and no job created after the run's first batch
--   joins it however fast producers submit;
-- - bounded: at most :limit rows locked, SKIP LOCKED (a row a worker's report or another
--   operator holds is left for a later run).
WITH previous AS (
  SELECT j.id, j.state
  FROM evora.jobs j
  WHERE j.state IN ('PENDING', 'WAITING', 'RUNNING') AND j.state = ANY (:states::evora.job_state[])
    AND (j.state <> 'RUNNING' OR j.cancel_requested_at IS NULL)
    AND (:queue::text IS NULL OR j.queue = :queue)
    AND (:type::text IS NULL OR j.type = :type)
    AND (:errorGroup::text IS NULL OR evora.error_group(j.last_error) = :errorGroup)
    AND (:ids::uuid[] IS NULL OR j.id = ANY (:ids))
    AND j.created_at <= coalesce(:cutoff::timestamptz, :now::timestamptz, now())
  LIMIT :limit
  FOR NO KEY UPDATE OF j SKIP LOCKED
),
updated AS (
  UPDATE evora.jobs j
  SET state = CASE WHEN p.state IN ('PENDING', 'WAITING') THEN 'CANCELLED'::evora.job_state ELSE j.state END,
      finished_at = CASE WHEN p.state IN ('PENDING', 'WAITING') THEN coalesce(:now::timestamptz, now()) ELSE j.finished_at END,
      cancel_requested_at = CASE WHEN j.state = 'RUNNING'
                                 THEN coalesce(j.cancel_requested_at, coalesce(:now::timestamptz, now()))
                                 ELSE j.cancel_requested_at END
  FROM previous p
  WHERE j.id = p.id AND j.state = p.state
  RETURNING j.id, j.queue, j.type, j.state, j.attempt, j.worker_id, j.finished_at, p.state AS previous_state
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(finished_at), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg('cancelled'::evora.job_event_kind), array_agg(previous_state), array_agg(state),
         array_agg(attempt), array_agg(worker_id),
         array_agg(NULL::float8), array_agg(NULL::float8)
  FROM (SELECT * FROM updated WHERE state = 'CANCELLED') c
  HAVING count(*) > 0
),
audited AS (
  INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
  SELECT coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName, 'jobs.cancel', :auditTarget,
         :auditChange::jsonb || jsonb_build_object('jobs', c.n)
  FROM (SELECT count(*) AS n FROM updated) c
  WHERE c.n > 0
),
told AS (
  SELECT pg_notify('evora_job_cancel', u.id::text) FROM updated u WHERE u.state = 'RUNNING'
)
SELECT count(*)::int AS jobs, (SELECT count(*) FROM previous)::int AS picked, coalesce(:now::timestamptz, now()) AS at
FROM updated
WHERE (SELECT count(*) FROM told) >= 0

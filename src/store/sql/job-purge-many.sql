-- name: jobPurgeMany
-- One batch of an operator's purge (PurgeJobs): deletes up to :limit finished jobs
-- (COMPLETED, CANCELLED, DLQ) matching the filter (queue, states, type, finished before,
-- ids; null: not filtered on) that finished at or before :cutoff (null: any time). Returns
-- how many it deleted and its time (the caller's :cutoff for the run's later batches, so a
-- run does not chase jobs that finish while it runs, and ends).
-- Must stay true (as for retention, sql/job-prune.sql):
-- - only finished states are ever deleted, whatever :states says (the explicit list: a
--   state added later is never purged);
-- - never a job whose events are still in the outbox, i.e. not yet projected into
--   telemetry (a job that finished before the oldest outbox row left nothing there); such a
--   job is left for a later run;
-- - bounded: at most :limit rows locked (SKIP LOCKED: a row an operator is retrying right
--   now is left alone) and deleted by primary key; no ORDER BY, so a batch is one range scan
--   of jobs_finished_idx when a queue is given; no event is written (telemetry counts are
--   left as they are, as retention leaves them);
-- - a deleted job's attempt history (evora.job_attempts) is deleted with it, in this statement;
-- - a batch that deleted any job writes one audit event `jobs.purge` (target: :auditTarget;
--   change: :auditChange with the batch's job count) in this statement, none otherwise.
WITH horizon AS (
  SELECT coalesce(min(at), 'infinity'::timestamptz) AS oldest_event FROM evora.job_events
),
picked AS (
  SELECT j.id
  FROM evora.jobs j
  WHERE j.state IN ('COMPLETED', 'CANCELLED', 'DLQ') AND j.state = ANY (:states::evora.job_state[])
    AND j.finished_at < (SELECT oldest_event FROM horizon)
    AND (:queue::text IS NULL OR j.queue = :queue)
    AND (:type::text IS NULL OR j.type = :type)
    AND (:errorGroup::text IS NULL OR evora.error_group(j.last_error) = :errorGroup)
    AND (:finishedBefore::timestamptz IS NULL OR j.finished_at < :finishedBefore)
    AND (:ids::uuid[] IS NULL OR j.id = ANY (:ids))
    AND (:cutoff::timestamptz IS NULL OR j.finished_at <= :cutoff)
  LIMIT :limit
  FOR UPDATE SKIP LOCKED
),
deleted AS (
  DELETE FROM evora.jobs j
  WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
  RETURNING j.id
),
attempts_deleted AS (
  -- Their attempt history (evora.job_attempts has no foreign key: see 0012_progress_attempts.sql).
  DELETE FROM evora.job_attempts a
  WHERE a.job_id = ANY (ARRAY(SELECT id FROM deleted))
),
audited AS (
  INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
  SELECT coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName, 'jobs.purge', :auditTarget,
         :auditChange::jsonb || jsonb_build_object('jobs', c.n)
  FROM (SELECT count(*) AS n FROM deleted) c
  WHERE c.n > 0
)
SELECT count(*)::int AS jobs, coalesce(:now::timestamptz, now()) AS at FROM deleted

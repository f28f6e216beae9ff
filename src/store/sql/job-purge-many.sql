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
--   change: :auditChange with the batch's job count) in this statement, none otherwise;
-- - a job never runs before every parent it names has completed, and a parent deleted while
--   DLQ or CANCELLED never will (0011_dependencies.sql; retention keeps such a parent,
--   sql/job-prune.sql, but a purge deletes it). So each CANCELLED child of a DLQ or
--   CANCELLED job deleted here (not deleted itself) is, in this statement, marked cancelled
--   by it: cancelled_by = that parent (the first by id if several), last_error "parent <id>
--   ended <state>", as the trigger names a parent that still holds a child back. Its own
--   retry is then refused (sql/job-retry.sql: cancelled_by is gone), and no other parent's
--   retry restores it (that restores only the children naming it). Otherwise a child
--   cancelled by another failed parent P2 would be restored by P2's retry and run when P2
--   completes, the deleted parent silently dropped, and an operator-cancelled child's retry
--   would run it the same way. Left as it is: a child whose cancelled_by is gone already or is
--   deleted in this batch (it can never run either way). No event: its state is unchanged;
-- - no deadlock with a retry of such a child (which locks the child, then its parents): the
--   children are locked SKIP LOCKED, and a parent with a child another transaction holds is
--   not deleted in this batch (left for a later call, as a locked parent is). Such a batch
--   may come back short, ending the call early; calling again finds the rest.
WITH horizon AS (
  SELECT coalesce(min(at), 'infinity'::timestamptz) AS oldest_event FROM evora.job_events
),
picked AS (
  SELECT j.id, j.state, j.has_dependents
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
failed AS (
  -- The picked parents that can never complete: only jobs with dependents pay the lookup below.
  SELECT id, state FROM picked WHERE has_dependents AND state IN ('DLQ', 'CANCELLED')
),
held AS MATERIALIZED (
  -- Their CANCELLED children that stay (jobs_parent_ids_idx), as this statement's snapshot has them.
  SELECT c.id, c.parent_ids, c.cancelled_by
  FROM evora.jobs c
  WHERE EXISTS (SELECT 1 FROM failed)
    AND c.parent_ids && ARRAY(SELECT id FROM failed) AND c.parent_ids IS NOT NULL AND c.state = 'CANCELLED'
    AND c.id <> ALL (ARRAY(SELECT id FROM picked))
),
locked AS MATERIALIZED (
  SELECT c.id
  FROM evora.jobs c
  WHERE c.id = ANY (ARRAY(SELECT id FROM held)) AND c.state = 'CANCELLED'
  FOR NO KEY UPDATE SKIP LOCKED
),
kept AS (
  -- A failed parent with a child another transaction holds: not deleted in this batch.
  SELECT f.id
  FROM failed f
  WHERE EXISTS (SELECT 1 FROM held h WHERE f.id = ANY (h.parent_ids) AND h.id <> ALL (ARRAY(SELECT id FROM locked)))
),
deleted AS (
  DELETE FROM evora.jobs j
  WHERE j.id = ANY (ARRAY(SELECT id FROM picked)) AND j.id <> ALL (ARRAY(SELECT id FROM kept))
  RETURNING j.id, j.state
),
marked AS (
  -- Each locked child whose cancelled_by is still there after this batch: now cancelled by
  -- the first failed parent deleted here.
  UPDATE evora.jobs c
  SET cancelled_by = m.parent, last_error = format('parent %s ended %s', m.parent, m.state)
  FROM (
    SELECT DISTINCT ON (h.id) h.id, d.id AS parent, d.state
    FROM held h
    JOIN deleted d ON d.id = ANY (h.parent_ids) AND d.state IN ('DLQ', 'CANCELLED')
    WHERE h.id = ANY (ARRAY(SELECT id FROM locked))
      AND (h.cancelled_by IS NULL
           OR (h.cancelled_by <> ALL (ARRAY(SELECT id FROM deleted))
               AND EXISTS (SELECT 1 FROM evora.jobs x WHERE x.id = h.cancelled_by)))
    ORDER BY h.id, d.id
  ) m
  WHERE c.id = m.id AND c.state = 'CANCELLED'
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

-- name: jobPurgeMany
-- One batch of an operator's purge (PurgeJobs): deletes up to :limit finished jobs
-- (COMPLETED, CANCELLED, DLQ) matching the filter (queue, states, type, finished before,
-- ids; null: not filtered on) that finished at or before :cutoff (null: any time). Returns
-- how many it deleted, how many it picked (locked; more than it deleted when it kept a parent,
-- below: a full pick means more may match), and its time (the caller's :cutoff for the run's
-- later batches, so a run does not chase jobs that finish while it runs, and ends).
-- Must stay true (as for retention, sql/job-prune.sql):
-- - only finished states are ever deleted, whatever :states says (the explicit list: a
--   state added later is never purged);
-- - never a job whose events are still in the outbox, i.e. not yet projected into
--   telemetry (a job that finished before the oldest outbox row left nothing there); such a
--   job is left for a later run;
-- - bounded: at most :limit rows locked (SKIP LOCKED: a row an operator is retrying right
--   now is left alone) and deleted by primary key (besides the CANCELLED children of failed
--   parents among them, below: as many as those have); no ORDER BY, so a batch is one range scan
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
--   deletes fewer than it picked; the caller goes on while a batch picked :limit rows and
--   deleted any, so only the kept parents (and rows other transactions held) are left.
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
  -- The picked parents that can never complete: only jobs with dependents pay the lookups below.
  SELECT id, state FROM picked WHERE has_dependents AND state IN ('DLQ', 'CANCELLED')
),
children AS MATERIALIZED (
  -- Their children, as this statement's snapshot has them: one probe of jobs_parent_ids_idx
  -- per such parent. Materialized so that the state test below stays out of the probe (as
  -- an index condition it was ANDed with jobs_finished_idx: every CANCELLED job read per probe).
  SELECT c.id, c.state, c.parent_ids, c.cancelled_by
  FROM failed f
  CROSS JOIN LATERAL (
    SELECT c.id, c.state, c.parent_ids, c.cancelled_by
    FROM evora.jobs c
    WHERE c.parent_ids @> ARRAY[f.id] AND c.parent_ids IS NOT NULL
  ) c
),
held AS MATERIALIZED (
  -- The CANCELLED ones that stay (not deleted in this batch), each once.
  SELECT DISTINCT ON (c.id) c.id, c.parent_ids, c.cancelled_by
  FROM children c
  WHERE c.state = 'CANCELLED' AND NOT EXISTS (SELECT 1 FROM picked p WHERE p.id = c.id)
),
locked AS MATERIALIZED (
  -- Their latest versions, still CANCELLED, by primary key; one another transaction holds is skipped.
  SELECT c.id
  FROM held h
  JOIN evora.jobs c ON c.id = h.id
  WHERE c.state = 'CANCELLED'
  FOR NO KEY UPDATE OF c SKIP LOCKED
),
kept AS (
  -- The parents of a child another transaction holds (usually none): not deleted in this batch.
  SELECT DISTINCT p.id
  FROM (SELECT h.parent_ids FROM held h WHERE NOT EXISTS (SELECT 1 FROM locked l WHERE l.id = h.id) OFFSET 0) u
  CROSS JOIN LATERAL unnest(u.parent_ids) AS p(id)
),
deleted AS (
  DELETE FROM evora.jobs j
  WHERE j.id = ANY (ARRAY(SELECT id FROM picked)) AND j.id <> ALL (ARRAY(SELECT id FROM kept))
  RETURNING j.id, j.state
),
marked AS (
  -- Each locked child (so still CANCELLED) whose cancelled_by is still there after this
  -- batch: now cancelled by the first failed parent deleted here.
  UPDATE evora.jobs c
  SET cancelled_by = m.parent, last_error = format('parent %s ended %s', m.parent, m.state)
  FROM (
    SELECT DISTINCT ON (h.id) h.id, d.id AS parent, d.state
    FROM held h
    JOIN locked l ON l.id = h.id
    CROSS JOIN LATERAL unnest(h.parent_ids) AS p(id)
    JOIN deleted d ON d.id = p.id AND d.state IN ('DLQ', 'CANCELLED')
    WHERE h.cancelled_by IS NULL
       OR (NOT EXISTS (SELECT 1 FROM deleted x WHERE x.id = h.cancelled_by)
           AND EXISTS (SELECT 1 FROM evora.jobs x WHERE x.id = h.cancelled_by))
    ORDER BY h.id, d.id
  ) m
  WHERE c.id = m.id
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
SELECT count(*)::int AS jobs, (SELECT count(*) FROM picked)::int AS picked, coalesce(:now::timestamptz, now()) AS at FROM deleted

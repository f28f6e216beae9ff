-- name: jobCountMany
-- A bulk action's dry run (RetryJobs, PurgeJobs, CancelJobs with dry_run): how many jobs the
-- action would touch now. The filter as in sql/job-retry-many.sql, sql/job-purge-many.sql
-- and sql/job-cancel-many.sql; :cancelOnly adds the cancel's rule that a RUNNING job whose
-- cancel was already requested is left alone (there is nothing left to change);
-- :projectedOnly adds the purge's rule that a job whose events are still in the outbox is
-- left alone; :retryOnly adds the retry's rules that a job with a parent in DLQ or CANCELLED
-- is left alone (that parent's retry restores it), and so is one whose cancelled_by names a
-- job that no longer exists (it can never complete). The caller passes only states its action
-- may touch. Changes nothing.
-- Also returns `finished_before`: the newest finished_at among the jobs counted, cut to the
-- millisecond, plus one millisecond (null when none was counted): the smallest bound at the
-- API's resolution (its Timestamps are dates of milliseconds) that a finished_at filter's
-- strict `<` still passes for every job counted. Cut, not rounded: PostgreSQL keeps
-- microseconds, so a job at .123456 needs .124, and .123 + 1 µs would lose it. Never later
-- than :finishedBefore (every job counted is before it, and it is a whole millisecond). Every
-- finished job has a finished_at (each path that finishes one sets it), so no job counted
-- falls outside the bound. From the jobs' own values, not this server's clock.
SELECT count(*)::int8 AS jobs,
       date_trunc('milliseconds', max(j.finished_at)) + interval '1 millisecond' AS finished_before
FROM evora.jobs j
WHERE j.state = ANY (:states::evora.job_state[])
  AND (:queue::text IS NULL OR j.queue = :queue)
  AND (:type::text IS NULL OR j.type = :type)
  AND (:errorGroup::text IS NULL OR evora.error_group(j.last_error) = :errorGroup)
  AND (:finishedBefore::timestamptz IS NULL OR j.finished_at < :finishedBefore)
  AND (:ids::uuid[] IS NULL OR j.id = ANY (:ids))
  AND (NOT :projectedOnly::bool
       OR j.finished_at < (SELECT coalesce(min(at), 'infinity'::timestamptz) FROM evora.job_events))
  AND (NOT :retryOnly::bool OR j.parent_ids IS NULL
       OR NOT EXISTS (SELECT 1 FROM evora.jobs p WHERE p.id = ANY (j.parent_ids) AND p.state IN ('DLQ', 'CANCELLED')))
  AND (NOT :retryOnly::bool OR j.cancelled_by IS NULL
       OR EXISTS (SELECT 1 FROM evora.jobs p WHERE p.id = j.cancelled_by))
  AND (NOT :cancelOnly::bool OR j.state <> 'RUNNING' OR j.cancel_requested_at IS NULL)

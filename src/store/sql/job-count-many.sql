-- name: jobCountMany
-- A bulk action's dry run (RetryJobs, PurgeJobs with dry_run): how many jobs the action
-- would touch now. The filter as in sql/job-retry-many.sql and sql/job-purge-many.sql;
-- :projectedOnly adds the purge's rule that a job whose events are still in the outbox is
-- left alone; :retryOnly adds the retry's rules that a job with a parent in DLQ or CANCELLED
-- is left alone (that parent's retry restores it), and so is one whose cancelled_by names a
-- job that no longer exists (it can never complete). The caller passes only states its action
-- may touch. Changes nothing.
SELECT count(*)::int8 AS jobs
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

-- name: jobCascadeQueues
-- Where a cancel or a retry of the jobs the filter matches would reach through their
-- dependents: the queues of the descendants the dependents trigger would change
-- (0011_dependencies.sql, 0018_dependency_cascade_loop.sql), with how many jobs in each. How a
-- token limited to queues is kept from changing jobs of other queues through a parent in
-- its own (src/grpc/auth.ts, cascadeScopeCheck). The filter as in sql/job-count-many.sql
-- (null: not filtered on); the roots' own queues are not counted, only their descendants'.
-- - :retry false (a cancel; the caller passes PENDING, WAITING and RUNNING as :states): the
--   walk takes WAITING children, generation by generation, as the trigger cancels them when
--   the root ends CANCELLED (a RUNNING root's when its worker gives it up).
-- - :retry true (the caller passes DLQ and CANCELLED): the roots are the jobs the retry may
--   take (cancelled_by still there, as job-count-many.sql's :retryOnly), and the walk takes
--   CANCELLED children whose cancelled_by is a job reached, as the trigger restores them. A
--   job held back by a parent in DLQ or CANCELLED is a root too, unless the filter names that
--   one job: a bulk retry runs batch after batch (jobsRetryMany), and once an earlier batch
--   retried the parent (or the trigger restored it), a later batch retries the job, whose
--   trigger restores its own descendants. (One batch decides on one snapshot: RetryJob, or a
--   filter of one id, never takes a job whose parent it retries.)
-- Must stay true: a superset of the jobs the trigger changes, never fewer. On a retry it also
-- counts a child still held back by another DLQ or CANCELLED parent (the trigger only renames
-- its cancelled_by) and that child's descendants (which the trigger leaves alone), and in bulk
-- the descendants of a held root whose parent the run never retries: a scoped
-- caller may be refused a retry that would have stayed in its queues, never let through one
-- that leaves them. Only roots with has_dependents start a walk (a job without children costs
-- its probe); each step is a probe of the GIN index jobs_parent_ids_idx. Changes nothing.
WITH RECURSIVE roots AS (
  SELECT j.id
  FROM evora.jobs j
  WHERE j.has_dependents AND j.state = ANY (:states::evora.job_state[])
    AND (:queue::text IS NULL OR j.queue = :queue)
    AND (:type::text IS NULL OR j.type = :type)
    AND (:errorGroup::text IS NULL OR evora.error_group(j.last_error) = :errorGroup)
    AND (:finishedBefore::timestamptz IS NULL OR j.finished_at < :finishedBefore)
    AND (:ids::uuid[] IS NULL OR j.id = ANY (:ids))
    AND (NOT :retry::bool OR j.parent_ids IS NULL OR cardinality(:ids) IS DISTINCT FROM 1
         OR NOT EXISTS (SELECT 1 FROM evora.jobs p WHERE p.id = ANY (j.parent_ids) AND p.state IN ('DLQ', 'CANCELLED')))
    AND (NOT :retry::bool OR j.cancelled_by IS NULL
         OR EXISTS (SELECT 1 FROM evora.jobs p WHERE p.id = j.cancelled_by))
),
reached (id, queue, has_dependents) AS (
  SELECT c.id, c.queue, c.has_dependents
  FROM roots r
  JOIN evora.jobs c ON c.parent_ids @> ARRAY[r.id] AND c.parent_ids IS NOT NULL
  WHERE CASE WHEN :retry::bool THEN c.state = 'CANCELLED' AND c.cancelled_by = r.id ELSE c.state = 'WAITING' END
  UNION
  SELECT c.id, c.queue, c.has_dependents
  FROM reached r
  JOIN evora.jobs c ON c.parent_ids @> ARRAY[r.id] AND c.parent_ids IS NOT NULL
  WHERE r.has_dependents
    AND CASE WHEN :retry::bool THEN c.state = 'CANCELLED' AND c.cancelled_by = r.id ELSE c.state = 'WAITING' END
)
SELECT queue, count(*)::int8 AS jobs
FROM reached
GROUP BY queue
ORDER BY queue

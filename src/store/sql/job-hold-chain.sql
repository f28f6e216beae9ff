-- name: jobHoldChain
-- Why an operator's retry refused a job for its parents (sql/job-retry.sql), for the one line
-- the refusal says (src/store/jobs-operator.ts, jobRetry): the chain of jobs that holds it
-- back, from :id up its dependency graph. Each step goes from a DLQ or CANCELLED job with
-- parents to the job holding it: the parent that cancelled it (cancelled_by), else its first
-- parent (by id) in DLQ or CANCELLED. A step to a cancelled_by that no longer exists (a purge
-- deleted it) comes back with a NULL state and ends the chain: that job can never complete,
-- so nothing below it can ever run. Otherwise the chain ends at a job that nothing holds back:
-- the one whose retry comes first (a DLQ job, or one an operator cancelled). Returns the first
-- step (the job's own parent) and the last two (the end, and the job before it), by depth
-- from 1; no row when nothing holds the job back (its parents changed since the retry).
-- Must stay true:
-- - it ends: parent_ids name jobs that existed when the job was submitted (or jobs of the same
--   SubmitJobs call, checked acyclic), and cancelled_by is one of them, so no chain comes back
--   to a job; one primary-key probe per step;
-- - a read, no lock: it explains a refusal and decides nothing.
WITH RECURSIVE chain (depth, id) AS (
  SELECT 0, :id::uuid
  UNION ALL
  SELECT c.depth + 1, n.next
  FROM chain c
  JOIN evora.jobs j ON j.id = c.id
  CROSS JOIN LATERAL (
    SELECT coalesce(j.cancelled_by,
                    (SELECT p.id FROM evora.jobs p
                     WHERE p.id = ANY (j.parent_ids) AND p.state IN ('DLQ', 'CANCELLED')
                     ORDER BY p.id
                     LIMIT 1)) AS next
  ) n
  WHERE j.state IN ('DLQ', 'CANCELLED') AND j.parent_ids IS NOT NULL AND n.next IS NOT NULL
),
steps AS (
  SELECT c.depth, c.id, j.state, j.last_error, max(c.depth) OVER () AS last
  FROM chain c
  LEFT JOIN evora.jobs j ON j.id = c.id
  WHERE c.depth > 0
)
SELECT depth, id, state, last_error FROM steps WHERE depth = 1 OR depth >= last - 1 ORDER BY depth

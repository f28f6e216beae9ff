-- name: jobDeadLetterGroups
-- Dead-lettered jobs grouped by queue, type and error group (evora.error_group, the same
-- expression JobFilter.error_group matches in the bulk statements), largest group first,
-- at most :limit groups. Bounded: only the newest :scanLimit DLQ jobs (by id: creation
-- order) of :queue, or of every queue when null, are grouped, walked newest first through
-- jobs_dlq_queue_idx or jobs_dlq_idx (0014_worker_sessions.sql). One more id than that is
-- read, never grouped: `seen` (the same on every row) is :scanLimit + 1 exactly when more DLQ
-- jobs exist than were grouped, so exactly :scanLimit of them is not "truncated". `groups`
-- (the same on every row) is how many groups there are before :limit keeps the largest.
-- Never reads a job in another state.
-- The newest ids first, each branch an index-only walk (one is pruned by the planner: of a
-- queue, jobs_dlq_queue_idx; of every queue, jobs_dlq_idx), then their rows by primary key.
WITH newest AS (
  (SELECT j.id
   FROM evora.jobs j
   WHERE :queue::text IS NOT NULL AND j.state = 'DLQ' AND j.queue = :queue
   ORDER BY j.id DESC
   LIMIT :scanLimit::int8 + 1)
  UNION ALL
  (SELECT j.id
   FROM evora.jobs j
   WHERE :queue::text IS NULL AND j.state = 'DLQ'
   ORDER BY j.id DESC
   LIMIT :scanLimit::int8 + 1)
),
recent AS (
  -- By primary key, the ids as one array (a join lets the planner walk every dead letter).
  SELECT j.queue, j.type, j.last_error, j.finished_at
  FROM evora.jobs j
  WHERE j.id = ANY (ARRAY(SELECT id FROM newest ORDER BY id DESC LIMIT :scanLimit)) AND j.state = 'DLQ'
)
SELECT r.queue, r.type, evora.error_group(r.last_error) AS error,
       count(*)::int8 AS jobs, max(r.finished_at) AS newest_finished_at,
       (SELECT count(*) FROM newest)::int8 AS seen,
       count(*) OVER ()::int8 AS groups
FROM recent r
GROUP BY r.queue, r.type, evora.error_group(r.last_error)
ORDER BY jobs DESC, newest_finished_at DESC, r.queue, r.type, error
LIMIT :limit

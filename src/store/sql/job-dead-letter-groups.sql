-- name: jobDeadLetterGroups
-- Dead-lettered jobs grouped by queue, type and error group (evora.error_group, the same
-- expression JobFilter.error_group matches in the bulk statements), largest group first,
-- at most :limit groups. Bounded: only the newest :scanLimit DLQ jobs (of :queue, or of
-- every queue when null) are grouped, walked newest first through jobs_finished_idx (a
-- queue) or jobs_dlq_idx (every queue); `scanned` (the same on every row) tells the caller
-- whether the bound was hit. Never reads a job in another state.
-- Two branches, one pruned by the planner: a queue's walk is in jobs_finished_idx's own order
-- (queue, state, finished_at), so it never walks other queues' dead letters.
WITH recent AS (
  (SELECT j.queue, j.type, j.last_error, j.finished_at
   FROM evora.jobs j
   WHERE :queue::text IS NOT NULL AND j.queue = :queue AND j.state = 'DLQ'
   ORDER BY j.queue DESC, j.state DESC, j.finished_at DESC
   LIMIT :scanLimit)
  UNION ALL
  (SELECT j.queue, j.type, j.last_error, j.finished_at
   FROM evora.jobs j
   WHERE :queue::text IS NULL AND j.state = 'DLQ'
   ORDER BY j.finished_at DESC
   LIMIT :scanLimit)
)
SELECT r.queue, r.type, evora.error_group(r.last_error) AS error,
       count(*)::int8 AS jobs, max(r.finished_at) AS newest_finished_at,
       (SELECT count(*) FROM recent)::int8 AS scanned
FROM recent r
GROUP BY r.queue, r.type, evora.error_group(r.last_error)
ORDER BY jobs DESC, newest_finished_at DESC, r.queue, r.type, error
LIMIT :limit

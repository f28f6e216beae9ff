-- name: jobAttemptList
-- A job's attempts, oldest first: those that ended without success (evora.job_attempts, by
-- when they ended), then the attempt the job row itself describes when it is RUNNING (outcome
-- RUNNING, no end) or COMPLETED (the completed attempt is never stored: the happy path writes
-- no history row). One statement, so the list is one snapshot. No rows for an unknown id.
SELECT attempt, worker_id, started_at, finished_at, outcome, error
FROM (
  SELECT 0 AS live, a.attempt, a.worker_id, a.started_at, a.finished_at, a.outcome::text AS outcome, a.error
  FROM evora.job_attempts a
  WHERE a.job_id = :id
  UNION ALL
  SELECT 1, j.attempt, j.worker_id, j.started_at, CASE WHEN j.state = 'COMPLETED' THEN j.finished_at END, j.state::text, NULL
  FROM evora.jobs j
  WHERE j.id = :id AND j.state IN ('RUNNING', 'COMPLETED') AND j.attempt > 0
) h
ORDER BY live, finished_at, attempt

-- name: jobAttemptList
-- A job's attempts that ended without success (evora.job_attempts), oldest first. The
-- current or completed attempt is not stored: the store adds it from the job row.
SELECT attempt, worker_id, started_at, finished_at, outcome, error
FROM evora.job_attempts
WHERE job_id = :id
ORDER BY finished_at, attempt

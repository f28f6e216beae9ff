-- name: scheduleAdvanceMany
-- Records what the scheduler (or a trigger) did, one element per schedule: the new
-- next_run_at, and when a job was submitted, its fire time and id (null keeps the current
-- last_run_at / last_job_id). Runs in the transaction that submitted the jobs.
UPDATE evora.schedules s
SET next_run_at = x.next_run_at,
    last_run_at = coalesce(x.last_run_at, s.last_run_at),
    last_job_id = coalesce(x.last_job_id, s.last_job_id)
FROM unnest(:names::text[], :nextRunAts::timestamptz[], :lastRunAts::timestamptz[], :lastJobIds::uuid[])
  AS x(name, next_run_at, last_run_at, last_job_id)
WHERE s.name = x.name
RETURNING s.name

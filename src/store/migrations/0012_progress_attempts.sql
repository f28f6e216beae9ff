-- Progress, checkpoints and attempt history (docs/api.md "Progress and checkpoints",
-- "Attempt history").
--
-- evora.jobs.progress: the last progress report a lease holder made, as a JSON object
-- {"percent" | "done","total", "message", "attempt", "reported_at"} (NULL = none yet); written
-- only by job-progress-many.sql, coalesced by the server to about one write per job per second.
-- evora.jobs.checkpoint: the last checkpoint reported (NULL = none); it outlives the attempt
-- that reported it, and every claim returns it so the next attempt resumes from it.
-- Both NULL by default: adding them rewrites nothing.
ALTER TABLE evora.jobs ADD COLUMN progress jsonb;
ALTER TABLE evora.jobs ADD COLUMN checkpoint jsonb;

-- How an attempt ended. COMPLETED and RUNNING are never stored: the current or completed
-- attempt is read from the job row itself (attempt, worker_id, started_at, finished_at,
-- state), so the happy path writes nothing here.
CREATE TYPE evora.attempt_outcome AS ENUM ('COMPLETED', 'FAILED', 'TIMED_OUT', 'LEASE_EXPIRED', 'SNOOZED', 'CANCELLED');

-- One row per attempt that ended without success, written in the same statement that ended
-- it (job-fail-many, job-snooze-many, job-sweep-expired, job-sweep-timed-out).
-- Must stay true: a job's rows go with the job: every statement that deletes jobs (retention,
-- job-prune.sql; any purge) deletes their rows here in the same statement. No foreign key on
-- purpose: ON DELETE CASCADE runs one query per deleted job, which made retention 25-30%
-- slower (bench/experiments/prune.ts, 200,000 jobs: 38-44k jobs/s became 28-34k); one
-- set-based DELETE per batch costs less.
CREATE TABLE evora.job_attempts (
    job_id      uuid NOT NULL,
    attempt     integer NOT NULL,
    worker_id   text,
    started_at  timestamptz,
    finished_at timestamptz NOT NULL,
    outcome     evora.attempt_outcome NOT NULL,
    error       text
);
CREATE INDEX job_attempts_job_idx ON evora.job_attempts (job_id, finished_at);

-- Retention: how long each queue keeps its finished jobs, and the index the pruner walks.
--
-- A queue keeps a COMPLETED, CANCELLED or DLQ job for at least its retention after the job
-- finished (jobs.finished_at, set by every statement that finishes a job and cleared by a
-- manual retry); then the leader's pruner (src/maintenance/pruner.ts,
-- src/store/sql/job-prune.sql) deletes it, in small batches. NULL = kept forever (the API
-- says 0). Seconds as double precision, like the backoff settings. The defaults: a week for
-- completed and cancelled jobs, 30 days for the dead-letter queue (the jobs an operator may
-- still want to look at or retry). Existing queues get the defaults too: the first pruner
-- run after this migration deletes their finished jobs older than that.
ALTER TABLE evora.queues
    ADD COLUMN completed_retention_seconds double precision DEFAULT 604800
        CHECK (completed_retention_seconds IS NULL OR completed_retention_seconds > 0),
    ADD COLUMN cancelled_retention_seconds double precision DEFAULT 604800
        CHECK (cancelled_retention_seconds IS NULL OR cancelled_retention_seconds > 0),
    ADD COLUMN dlq_retention_seconds double precision DEFAULT 2592000
        CHECK (dlq_retention_seconds IS NULL OR dlq_retention_seconds > 0);

-- The pruner's path: per queue and finished state, by finish time, so one batch is an index
-- range scan from the oldest entry of each (queue, state) whose retention has passed, and a
-- queue that keeps its jobs forever (or longer) is never walked. Only finished rows are in
-- it: the claim, the sweeper and the worker writes never touch it; its cost is one index
-- entry written per finished job (docs/store.md, "Retention", has the measurement).
--
-- Built in the migration's transaction (CREATE INDEX CONCURRENTLY cannot run in one), so
-- on an existing database it blocks writes to evora.jobs while it reads the finished rows:
-- seconds per million of them.
CREATE INDEX jobs_finished_idx ON evora.jobs (queue, state, finished_at)
    WHERE state IN ('COMPLETED', 'CANCELLED', 'DLQ');

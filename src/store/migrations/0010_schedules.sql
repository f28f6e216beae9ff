-- Recurring schedules (ScheduleService; docs/api.md "Schedules").
--
-- A schedule names a cron expression in a time zone and the job to submit at each fire
-- time. The leader's scheduler (src/maintenance/scheduler.ts) locks due rows (next_run_at
-- has come, not paused) FOR UPDATE SKIP LOCKED and, in the same transaction, submits their
-- jobs with the idempotency key schedule:<name>:<fire time> and moves next_run_at on, so a
-- fire gets exactly one job however many processes try.
-- Must stay true: next_run_at is always a fire time of (cron, timezone), or the first one
-- after a change; cron and time zone are checked by the API (src/domain/schedule.ts), not
-- here. last_job_id is not a foreign key: retention may delete the job.
CREATE TABLE evora.schedules (
    name            text PRIMARY KEY,
    cron            text NOT NULL,
    timezone        text NOT NULL DEFAULT 'UTC',
    queue           text NOT NULL,
    type            text NOT NULL,
    payload         jsonb NOT NULL DEFAULT '{}',
    priority        integer NOT NULL DEFAULT 0,
    max_attempts    integer CHECK (max_attempts IS NULL OR max_attempts >= 1),
    misfire_policy  text NOT NULL DEFAULT 'run_once' CHECK (misfire_policy IN ('skip', 'run_once', 'run_each')),
    misfire_cap     integer NOT NULL DEFAULT 100 CHECK (misfire_cap BETWEEN 1 AND 1000),
    paused          boolean NOT NULL DEFAULT false,
    next_run_at     timestamptz NOT NULL,
    last_run_at     timestamptz,
    last_job_id     uuid,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- The scheduler's due scan and its earliest-next-fire read.
CREATE INDEX schedules_due_idx ON evora.schedules (next_run_at) WHERE NOT paused;

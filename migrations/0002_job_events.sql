-- The transactional outbox: every change of a job's state writes one row here in the same
-- statement as the change itself, so telemetry sees each change exactly once and never
-- one that was rolled back. The projector (src/services/projector.ts) applies rows to the
-- telemetry store in batches and then deletes them.

CREATE TYPE evora.job_event_kind AS ENUM (
    'submitted',
    'claimed',
    'completed',
    'failed_retrying',
    'dead_lettered',
    'cancelled',
    'retried_manually',
    'snoozed',
    'lease_expired'
);

CREATE TABLE evora.job_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      uuid NOT NULL,
    queue       text NOT NULL,
    type        text NOT NULL,
    kind        evora.job_event_kind NOT NULL,
    from_state  evora.job_state,            -- NULL for 'submitted'
    to_state    evora.job_state NOT NULL,
    attempt     integer NOT NULL,
    worker_id   text,
    at          timestamptz NOT NULL,
    -- claimed: how long the job was claimable before it was claimed (run_at -> claim).
    wait_ms     double precision,
    -- completed / failed / expired: how long the attempt ran (claim -> finish).
    run_ms      double precision,
    -- The projector batch this row was taken into (NULL: not yet taken).
    batch_id    bigint
);

CREATE INDEX job_events_unbatched_idx ON evora.job_events (id) WHERE batch_id IS NULL;
CREATE INDEX job_events_batch_idx ON evora.job_events (batch_id) WHERE batch_id IS NOT NULL;

-- Projector batches. A batch is opened by taking a set of outbox rows, applied to the
-- telemetry store with per-document guards, and closed by deleting its rows. A batch
-- left open by a crash is applied again, with exactly the same rows (see docs/telemetry.md).
CREATE TABLE evora.projector_batches (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sink        text NOT NULL,
    opened_at   timestamptz NOT NULL DEFAULT now(),
    events      integer NOT NULL
);

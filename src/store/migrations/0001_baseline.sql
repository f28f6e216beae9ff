-- Evora's schema, created directly: the baseline of every later migration.
--
-- This file replaced the development chain 0001_jobs … 0009_submit_handoff before the
-- first release (it creates the schema they ended with, without the objects they left
-- behind). It is never edited again: a schema change is a new file, 0002_<what>.sql, applied
-- after this one by src/store/migrate.ts (in one transaction, recorded in
-- evora.schema_migrations). A database migrated by the old chain is refused by the runner,
-- not half-migrated.
--
-- Everything lives in the `evora` schema (created by the migration runner) so that Evora
-- can share a database with an application. The statements that read and write these
-- tables are in src/store/sql/.

-- ---------------------------------------------------------------------------------------
-- Queues and jobs
-- ---------------------------------------------------------------------------------------

-- Job states. A PENDING job whose run_at is in the future is scheduled, not claimable.
CREATE TYPE evora.job_state AS ENUM ('PENDING', 'RUNNING', 'COMPLETED', 'DLQ', 'CANCELLED');

CREATE TYPE evora.backoff_kind AS ENUM ('exponential', 'linear', 'fixed');

-- Per-queue policy. A submit to an unknown queue creates its row with these defaults
-- (src/store/sql/queue-upsert.sql repeats them).
CREATE TABLE evora.queues (
    name                    text PRIMARY KEY,
    max_attempts            integer NOT NULL DEFAULT 5 CHECK (max_attempts >= 1),
    backoff_kind            evora.backoff_kind NOT NULL DEFAULT 'exponential',
    backoff_base_seconds    double precision NOT NULL DEFAULT 5 CHECK (backoff_base_seconds >= 0),
    backoff_cap_seconds     double precision NOT NULL DEFAULT 3600 CHECK (backoff_cap_seconds >= 0),
    backoff_jitter          double precision NOT NULL DEFAULT 0.2 CHECK (backoff_jitter BETWEEN 0 AND 1),
    lease_seconds           integer NOT NULL DEFAULT 30 CHECK (lease_seconds >= 1),
    paused                  boolean NOT NULL DEFAULT false,
    max_concurrency         integer CHECK (max_concurrency IS NULL OR max_concurrency >= 1),
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now()
);

-- Job ids are UUIDv7 (the store makes them; this default serves SQL written by hand), so
-- the primary key grows at its right edge and id order is creation order (used by keyset
-- pagination). PostgreSQL 18+ has uuidv7(); older servers get an equivalent built from the
-- clock and random bytes.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 180000 THEN
        EXECUTE $f$CREATE FUNCTION evora.new_job_id() RETURNS uuid
            LANGUAGE sql VOLATILE PARALLEL SAFE AS 'SELECT uuidv7()'$f$;
    ELSE
        EXECUTE $f$CREATE FUNCTION evora.new_job_id() RETURNS uuid
            LANGUAGE sql VOLATILE PARALLEL SAFE AS $body$
            SELECT encode(
                set_bit(set_bit(
                    overlay(uuid_send(gen_random_uuid())
                            PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                            FROM 1 FOR 6),
                    52, 1), 53, 1),
                'hex')::uuid
            $body$ $f$;
    END IF;
END
$$;

CREATE TABLE evora.jobs (
    id                  uuid PRIMARY KEY DEFAULT evora.new_job_id(),
    queue               text NOT NULL,
    type                text NOT NULL,
    payload             jsonb NOT NULL DEFAULT '{}'::jsonb,
    state               evora.job_state NOT NULL DEFAULT 'PENDING',
    priority            integer NOT NULL DEFAULT 0,
    run_at              timestamptz NOT NULL DEFAULT now(),
    attempt             integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts        integer NOT NULL CHECK (max_attempts >= 1),
    -- Fencing token: a fresh value on every claim. Every worker write must present it.
    lease_token         uuid,
    locked_until        timestamptz,
    worker_id           text,
    idempotency_key     text,
    result              jsonb,
    last_error          text,
    -- Set when an operator cancels a RUNNING job; the job becomes CANCELLED when the
    -- worker gives it up or its lease expires.
    cancel_requested_at timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    started_at          timestamptz,
    finished_at         timestamptz,
    -- A RUNNING job always holds a lease, so the sweeper can always recover it.
    CONSTRAINT jobs_running_has_lease CHECK (
        state <> 'RUNNING' OR (lease_token IS NOT NULL AND locked_until IS NOT NULL)
    )
);

-- The claim path: only PENDING rows, in claim order (priority, run_at, then id: jobs of
-- one batch are claimed in submit order, with no sort). Finished jobs are not in it, so
-- the hot path does not grow with history.
CREATE INDEX jobs_claimable_idx ON evora.jobs (queue, priority, run_at, id) WHERE state = 'PENDING';
-- The sweeper's path: running leases by expiry.
CREATE INDEX jobs_running_lease_idx ON evora.jobs (locked_until) WHERE state = 'RUNNING';
-- One job per (queue, idempotency key).
CREATE UNIQUE INDEX jobs_idempotency_idx ON evora.jobs (queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- The state machine, enforced by the database for every code path, raw SQL included
-- ---------------------------------------------------------------------------------------

-- The legal state changes: the one place that says what is legal.
CREATE TABLE evora.job_state_transitions (
    from_state evora.job_state NOT NULL,
    to_state   evora.job_state NOT NULL,
    PRIMARY KEY (from_state, to_state)
);

INSERT INTO evora.job_state_transitions (from_state, to_state) VALUES
    ('PENDING',   'RUNNING'),
    ('RUNNING',   'COMPLETED'),
    ('RUNNING',   'PENDING'),    -- retry after a failure, snooze, or an expired lease
    ('RUNNING',   'DLQ'),
    ('DLQ',       'PENDING'),    -- manual retry
    ('PENDING',   'CANCELLED'),
    ('RUNNING',   'CANCELLED'),
    ('CANCELLED', 'PENDING');    -- manual retry

-- Rejects a change of state. Runs only for a change the trigger's WHEN clause found
-- illegal (below), so it only raises.
CREATE FUNCTION evora.job_state_transition_check() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM evora.job_state_transitions
        WHERE from_state = OLD.state AND to_state = NEW.state
    ) THEN
        RAISE EXCEPTION 'evora: illegal job state transition % -> % (job %)', OLD.state, NEW.state, OLD.id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;

-- (Re)creates the update trigger with the legal (from, to) pairs of
-- evora.job_state_transitions as constants in its WHEN clause: a legal change costs an
-- expression and no query (the plpgsql body cost about 40 us per changed row on the claim
-- and completion paths), heartbeats (no change of state) skip it, and an illegal change
-- fires it and is rejected. A migration that changes the transitions table must call this
-- again (test/store/schema.test.ts).
CREATE FUNCTION evora.job_state_transition_trigger_create() RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    legal text;
BEGIN
    SELECT string_agg(format('(%L::evora.job_state, %L::evora.job_state)', from_state, to_state), ', '
                      ORDER BY from_state, to_state)
      INTO legal
      FROM evora.job_state_transitions;
    DROP TRIGGER IF EXISTS jobs_state_transition_update ON evora.jobs;
    EXECUTE format(
        'CREATE TRIGGER jobs_state_transition_update
             BEFORE UPDATE OF state ON evora.jobs
             FOR EACH ROW
             WHEN (OLD.state IS DISTINCT FROM NEW.state AND (OLD.state, NEW.state) NOT IN (%s))
             EXECUTE FUNCTION evora.job_state_transition_check()',
        legal);
END
$$;

SELECT evora.job_state_transition_trigger_create();

-- A job is created PENDING, or RUNNING as a claim leaves a job when a submit hands it
-- straight to a worker (src/store/sql/job-insert-handoff.sql): a creation and a claim in
-- one, so only on its first attempt, with a worker and a start time, nothing finished, and
-- only while PENDING -> RUNNING is legal (the lease itself is required by
-- jobs_running_has_lease). Every other state at creation is refused.
CREATE FUNCTION evora.job_creation_check() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'PENDING' OR (
        NEW.state = 'RUNNING' AND NEW.attempt = 1
        AND NEW.worker_id IS NOT NULL AND NEW.started_at IS NOT NULL
        AND NEW.finished_at IS NULL AND NEW.result IS NULL
        AND EXISTS (
            SELECT 1 FROM evora.job_state_transitions
            WHERE from_state = 'PENDING' AND to_state = 'RUNNING'
        )
    ) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'evora: a job must be created PENDING (or RUNNING on its first attempt, handed to a worker and not finished), not % on attempt %',
        NEW.state, NEW.attempt
        USING ERRCODE = 'check_violation';
END
$$;

-- The WHEN clause keeps ordinary PENDING inserts off the trigger.
CREATE TRIGGER jobs_state_transition_insert
    BEFORE INSERT ON evora.jobs
    FOR EACH ROW WHEN (NEW.state <> 'PENDING')
    EXECUTE FUNCTION evora.job_creation_check();

-- ---------------------------------------------------------------------------------------
-- Retries
-- ---------------------------------------------------------------------------------------

-- Retry delay in seconds before attempt `attempt + 1`, given the attempt that just failed
-- (1-based) and a uniform random number r in [0, 1) for jitter. Jitter spreads the delay
-- over [d * (1 - jitter), d * (1 + jitter)]; the cap bounds the result after jitter.
CREATE FUNCTION evora.backoff_seconds(
    kind evora.backoff_kind,
    base_seconds double precision,
    cap_seconds double precision,
    jitter double precision,
    attempt integer,
    r double precision
) RETURNS double precision
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT least(
        cap_seconds,
        (CASE kind
            WHEN 'exponential' THEN base_seconds * power(2::double precision, least(greatest(attempt, 1) - 1, 60))
            WHEN 'linear' THEN base_seconds * greatest(attempt, 1)
            ELSE base_seconds
         END) * (1 + jitter * (2 * r - 1))
    )
$$;

-- Where a RUNNING job goes when its worker fails it or its lease expires: CANCELLED if an
-- operator asked for that, back to PENDING while attempts are left and the failure is
-- retryable, else the dead-letter queue. One definition for the worker's fail path and
-- the sweeper's.
CREATE FUNCTION evora.job_state_after_failure(
    cancel_requested boolean,
    retryable boolean,
    attempt integer,
    max_attempts integer
) RETURNS evora.job_state
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN cancel_requested THEN 'CANCELLED'::evora.job_state
        WHEN retryable AND attempt < max_attempts THEN 'PENDING'::evora.job_state
        ELSE 'DLQ'::evora.job_state
    END
$$;

-- ---------------------------------------------------------------------------------------
-- The outbox: job events for telemetry, written in the statement that changes the jobs
-- ---------------------------------------------------------------------------------------

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

-- The transactional outbox, packed: a statement that changes jobs writes one row holding
-- the events of all of them (element i of every array is the same event), in its own
-- transaction, so telemetry sees each change exactly once and never one that rolled back;
-- a claim of 1,000 jobs adds one row, not 1,000 rows, index entries and later deletes.
-- The projector (src/maintenance/projector.ts) applies rows to the telemetry store in
-- batches and then deletes them; no row is ever updated. An event's id is its row's id *
-- 2^20 + its position in the row (from 1): unique, and in the order the events were written.
CREATE TABLE evora.job_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The writing transaction: a projector batch is every row with id <= hi_id and
    -- xid < horizon (see evora.projector_batches).
    xid         xid8 NOT NULL DEFAULT pg_current_xact_id(),
    -- When the statement's changes happened (one time for all of them).
    at          timestamptz NOT NULL,
    -- Number of events (the length of every array).
    n           integer NOT NULL CHECK (n >= 1),
    job_ids     uuid[] NOT NULL,
    queues      text[] NOT NULL,
    types       text[] NOT NULL,
    kinds       evora.job_event_kind[] NOT NULL,
    from_states evora.job_state[] NOT NULL,   -- NULL elements for 'submitted'
    to_states   evora.job_state[] NOT NULL,
    attempts    integer[] NOT NULL,
    worker_ids  text[] NOT NULL,
    wait_ms     double precision[] NOT NULL,  -- claimed: run_at -> claim; else NULL elements
    run_ms      double precision[] NOT NULL   -- completed / failed / expired: claim -> finish
);

-- The arrays are stored out of line without compression: a row of a 1,000-job statement
-- holds ~70 kB of arrays, which PostgreSQL would otherwise compress (pglz) on the hot path
-- for the projector to decompress a moment later (a claim of 1,000 jobs: ~37 -> ~29 ms).
ALTER TABLE evora.job_events
    ALTER COLUMN job_ids SET STORAGE EXTERNAL,
    ALTER COLUMN queues SET STORAGE EXTERNAL,
    ALTER COLUMN types SET STORAGE EXTERNAL,
    ALTER COLUMN kinds SET STORAGE EXTERNAL,
    ALTER COLUMN from_states SET STORAGE EXTERNAL,
    ALTER COLUMN to_states SET STORAGE EXTERNAL,
    ALTER COLUMN attempts SET STORAGE EXTERNAL,
    ALTER COLUMN worker_ids SET STORAGE EXTERNAL,
    ALTER COLUMN wait_ms SET STORAGE EXTERNAL,
    ALTER COLUMN run_ms SET STORAGE EXTERNAL;

-- Projector batches. A batch is opened by recording two numbers: horizon, the xmin of the
-- projector's snapshot (every transaction with a smaller id has ended, so no event with
-- xid < horizon can appear later), and hi_id, the largest event row taken. The batch is
-- every outbox row with id <= hi_id AND xid < horizon: a set that cannot change until the
-- batch is closed (its rows deleted), so a batch left open by a crash is applied again with
-- exactly the same events (docs/telemetry.md).
CREATE TABLE evora.projector_batches (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sink        text NOT NULL,
    opened_at   timestamptz NOT NULL DEFAULT now(),
    events      integer NOT NULL,
    hi_id       bigint NOT NULL,
    horizon     xid8 NOT NULL
);

-- ---------------------------------------------------------------------------------------
-- The embedded telemetry store (src/telemetry/pg-sink.ts)
-- ---------------------------------------------------------------------------------------

-- The same projection the MongoDB sink keeps, in tables of its own, used when MONGODB_URL
-- is not set (so `npm start` has stats with nothing else installed). Only the projector
-- writes here; the queue's hot path never reads it.

-- Batches already applied to these tables: applying one again is a no-op.
CREATE TABLE evora.telemetry_applied_batches (
    batch_id    bigint PRIMARY KEY,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- Current number of jobs per queue and state.
CREATE TABLE evora.telemetry_queue_counts (
    queue   text NOT NULL,
    state   evora.job_state NOT NULL,
    n       bigint NOT NULL,
    PRIMARY KEY (queue, state)
);

-- Per-minute buckets. Histograms are jsonb objects: latency bin -> count.
CREATE TABLE evora.telemetry_minutes (
    queue           text NOT NULL,
    minute          timestamptz NOT NULL,
    submitted       bigint NOT NULL DEFAULT 0,
    completed       bigint NOT NULL DEFAULT 0,
    failed          bigint NOT NULL DEFAULT 0,
    dead_lettered   bigint NOT NULL DEFAULT 0,
    wait_hist       jsonb NOT NULL DEFAULT '{}',
    run_hist        jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (queue, minute)
);

-- Recent job events, kept for a retention period (the projector deletes older ones): a
-- copy of each projected outbox row, made in SQL so the events never travel to the
-- projector and back.
CREATE TABLE evora.telemetry_recent_events (
    outbox_id   bigint PRIMARY KEY,
    at          timestamptz NOT NULL,
    n           integer NOT NULL,
    job_ids     uuid[] NOT NULL,
    queues      text[] NOT NULL,
    types       text[] NOT NULL,
    kinds       evora.job_event_kind[] NOT NULL,
    to_states   evora.job_state[] NOT NULL,
    attempts    integer[] NOT NULL,
    worker_ids  text[] NOT NULL
);

-- Stored without compression too: compressing ~70 kB of arrays per 1,000 events cost the
-- projector ~5 ms per batch, on the same CPU as the queue, to save little (job ids are
-- random bytes); the disk cost is bounded by the sink's retention (a day by default).
ALTER TABLE evora.telemetry_recent_events
    ALTER COLUMN job_ids SET STORAGE EXTERNAL,
    ALTER COLUMN queues SET STORAGE EXTERNAL,
    ALTER COLUMN types SET STORAGE EXTERNAL,
    ALTER COLUMN kinds SET STORAGE EXTERNAL,
    ALTER COLUMN to_states SET STORAGE EXTERNAL,
    ALTER COLUMN attempts SET STORAGE EXTERNAL,
    ALTER COLUMN worker_ids SET STORAGE EXTERNAL;

-- Recent events are looked up by time.
CREATE INDEX telemetry_recent_events_at_idx ON evora.telemetry_recent_events (at);

-- Sum of two histograms.
CREATE FUNCTION evora.histogram_add(a jsonb, b jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(jsonb_object_agg(k, n), '{}'::jsonb)
    FROM (
        SELECT k, sum(v::bigint) AS n
        FROM (SELECT * FROM jsonb_each_text(a) UNION ALL SELECT * FROM jsonb_each_text(b)) x(k, v)
        GROUP BY k
    ) s
$$;

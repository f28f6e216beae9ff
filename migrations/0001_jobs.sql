-- Evora's core schema: queues, jobs, and the state machine the database enforces.
-- Everything lives in the `evora` schema (created by the migration runner) so that
-- Evora can share a database with an application.

-- Job states. A PENDING job whose run_at is in the future is scheduled, not claimable.
CREATE TYPE evora.job_state AS ENUM ('PENDING', 'RUNNING', 'COMPLETED', 'DLQ', 'CANCELLED');

CREATE TYPE evora.backoff_kind AS ENUM ('exponential', 'linear', 'fixed');

-- Per-queue policy. A submit to an unknown queue creates its row with these defaults.
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

-- Job ids are UUIDv7 where the server has uuidv7() (PostgreSQL 18+), so the primary key
-- grows at its right edge and id order is creation order (used by keyset pagination);
-- older servers get an equivalent built from the clock and random bytes.
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

-- The claim path: only PENDING rows, in claim order. Finished jobs are not in it, so the
-- hot path does not grow with history.
CREATE INDEX jobs_claimable_idx ON evora.jobs (queue, priority, run_at) WHERE state = 'PENDING';
-- The sweeper's path: running leases by expiry.
CREATE INDEX jobs_running_lease_idx ON evora.jobs (locked_until) WHERE state = 'RUNNING';
-- One job per (queue, idempotency key).
CREATE UNIQUE INDEX jobs_idempotency_idx ON evora.jobs (queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- The legal state changes. The trigger below rejects every other change of state, from
-- any code path, including raw SQL.
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

CREATE FUNCTION evora.job_state_transition_check() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'PENDING' THEN
            RAISE EXCEPTION 'evora: a job must be created PENDING, not %', NEW.state
                USING ERRCODE = 'check_violation';
        END IF;
    ELSIF NOT EXISTS (
        SELECT 1 FROM evora.job_state_transitions
        WHERE from_state = OLD.state AND to_state = NEW.state
    ) THEN
        RAISE EXCEPTION 'evora: illegal job state transition % -> % (job %)', OLD.state, NEW.state, OLD.id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;

-- WHEN clauses keep the trigger off the path of updates that do not change state
-- (heartbeats) and of ordinary PENDING inserts.
CREATE TRIGGER jobs_state_transition_update
    BEFORE UPDATE OF state ON evora.jobs
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION evora.job_state_transition_check();

CREATE TRIGGER jobs_state_transition_insert
    BEFORE INSERT ON evora.jobs
    FOR EACH ROW WHEN (NEW.state <> 'PENDING')
    EXECUTE FUNCTION evora.job_state_transition_check();

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

-- The embedded telemetry store: the same projection the MongoDB sink keeps, in tables of
-- its own, used when MONGODB_URL is not set (so `npm start` has stats with nothing else
-- installed). Only the projector writes here; the queue's hot path never reads it.

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

-- Recent job events, kept for a retention period (the projector deletes older ones).
CREATE TABLE evora.telemetry_recent_events (
    id          bigint PRIMARY KEY,
    job_id      uuid NOT NULL,
    queue       text NOT NULL,
    type        text NOT NULL,
    kind        evora.job_event_kind NOT NULL,
    attempt     integer NOT NULL,
    worker_id   text,
    at          timestamptz NOT NULL
);
CREATE INDEX telemetry_recent_events_at_idx ON evora.telemetry_recent_events (at);
CREATE INDEX telemetry_recent_events_job_idx ON evora.telemetry_recent_events (job_id);

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

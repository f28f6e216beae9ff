-- The hot path writes less per job.
--
-- 1. The state-transition check no longer calls a function per updated row. The trigger's
--    WHEN clause now lists the legal (from, to) pairs as constants, generated here from
--    evora.job_state_transitions (the table stays the one place that says what is legal):
--    a legal change costs an expression, no query; an illegal one still fires the trigger,
--    which raises. A migration that changes the table must regenerate the trigger with
--    evora.job_state_transition_trigger_create().
--
-- 2. The outbox is packed: one row per statement (the events of a claim of 1,000 jobs are
--    one row of arrays, not 1,000 rows), so an event costs an array element instead of a
--    row, an index entry and a later DELETE. Events are still written by the statement that
--    changes the jobs, in its transaction. evora.job_events_flat shows one row per event.

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

-- The packed outbox. Element i of every array belongs to the same event.
ALTER TABLE evora.job_events RENAME TO job_events_unpacked;

CREATE TABLE evora.job_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The writing transaction (the projector's batches are defined by it; see 0005).
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

-- Events not yet projected move over as rows of one event each, keeping their ids and
-- transaction ids, so a projector batch that a crash left open still means the same events.
INSERT INTO evora.job_events
    (id, xid, at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
OVERRIDING SYSTEM VALUE
SELECT id, xid, at, 1, ARRAY[job_id], ARRAY[queue], ARRAY[type], ARRAY[kind], ARRAY[from_state], ARRAY[to_state],
       ARRAY[attempt], ARRAY[worker_id], ARRAY[wait_ms], ARRAY[run_ms]
FROM evora.job_events_unpacked;

-- New ids continue after the old ones, so event ids (below) never repeat an earlier one.
SELECT setval(pg_get_serial_sequence('evora.job_events', 'id'),
              greatest((SELECT max(id) FROM evora.job_events),
                       pg_sequence_last_value(pg_get_serial_sequence('evora.job_events_unpacked', 'id')::regclass),
                       1));

DROP TABLE evora.job_events_unpacked;

-- One row per event. An event's id is its row's id * 2^20 + its position (from 1): unique,
-- and ordered as the events were written.
CREATE VIEW evora.job_events_flat AS
SELECT e.id * 1048576 + u.ord AS id,
       e.id AS outbox_id,
       e.xid,
       u.job_id, u.queue, u.type, u.kind, u.from_state, u.to_state, u.attempt, u.worker_id,
       e.at, u.wait_ms, u.run_ms
FROM evora.job_events e
CROSS JOIN LATERAL unnest(e.job_ids, e.queues, e.types, e.kinds, e.from_states, e.to_states, e.attempts,
                          e.worker_ids, e.wait_ms, e.run_ms)
    WITH ORDINALITY AS u(job_id, queue, type, kind, from_state, to_state, attempt, worker_id, wait_ms, run_ms, ord);

-- The embedded telemetry sink keeps recent events packed too: a copy of each projected
-- outbox row (made in SQL, so the events never travel to the projector and back). The
-- old table's rows (a day of recent events, read by nothing yet) are dropped, not moved.
-- (evora.job_state_transition_allowed, from 0004, is no longer used by the trigger.)
DROP TABLE evora.telemetry_recent_events;

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

CREATE INDEX telemetry_recent_events_at_idx ON evora.telemetry_recent_events (at);

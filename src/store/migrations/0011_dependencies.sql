-- Job dependencies (docs/api.md "Dependencies"): a job may name parents (SubmitJobRequest
-- depends_on, or depends_on_refs inside one SubmitJobs call). A job with an unfinished
-- parent is WAITING; it becomes PENDING (and its queue is woken) when its last parent
-- COMPLETES; a parent that ends in DLQ or CANCELLED cancels its WAITING descendants, and a
-- retry of that parent puts back to WAITING the children it cancelled.
--
-- Must stay true: jobs without parents or children pay (close to) nothing. The parents are
-- kept on the child (parent_ids, NULL for most jobs; indexed only where set), the parent
-- only carries has_dependents, set by the submit that gave it a child (which locks it), and
-- the work happens in an AFTER UPDATE trigger whose WHEN clause is false for every job
-- without children: the claim and completion statements are unchanged but for one column
-- the claims read back (parent_ids: the server fetches the parents' results only when a
-- claimed job has some). Every change the trigger makes is in the transaction of the
-- parent's change, with its events in the outbox, so a crash leaves nothing half done.

-- New enum values cannot be used in the transaction that adds them: the migration runner
-- commits here (src/store/migrate.ts, the marker below) and applies the rest in a new
-- transaction. Everything above the marker must be safe to run again (IF NOT EXISTS).
ALTER TYPE evora.job_state ADD VALUE IF NOT EXISTS 'WAITING';
-- WAITING -> PENDING when the last parent completed.
ALTER TYPE evora.job_event_kind ADD VALUE IF NOT EXISTS 'released';
-- CANCELLED -> WAITING when the parent that cancelled the job is retried.
ALTER TYPE evora.job_event_kind ADD VALUE IF NOT EXISTS 'restored';

-- evora:commit

ALTER TABLE evora.jobs
    -- The job's parents (distinct ids); NULL = none.
    ADD COLUMN parent_ids uuid[] CHECK (parent_ids IS NULL OR cardinality(parent_ids) >= 1),
    -- True once some job names this one as a parent: only then does the trigger below run.
    ADD COLUMN has_dependents boolean NOT NULL DEFAULT false,
    -- The parent whose DLQ or CANCELLED end cancelled this job (while CANCELLED only): its
    -- retry puts this job back to WAITING.
    ADD COLUMN cancelled_by uuid;

-- A parent's children, found by the trigger (parent_ids @> ARRAY[parent]); only jobs with parents are in it.
CREATE INDEX jobs_parent_ids_idx ON evora.jobs USING gin (parent_ids) WHERE parent_ids IS NOT NULL;
-- The WAITING jobs, for the sweeper's repair pass.
CREATE INDEX jobs_waiting_idx ON evora.jobs (id) WHERE state = 'WAITING';

INSERT INTO evora.job_state_transitions (from_state, to_state) VALUES
    ('WAITING',   'PENDING'),    -- the last parent completed
    ('WAITING',   'CANCELLED'),  -- a parent ended DLQ or CANCELLED, or an operator cancel
    ('CANCELLED', 'WAITING');    -- the parent that cancelled it was retried, or a manual retry
SELECT evora.job_state_transition_trigger_create();

-- 0001's creation rule, plus: a job with parents may be created WAITING (never run, nothing
-- finished). The dependency submit creates it so when a parent is unfinished.
CREATE OR REPLACE FUNCTION evora.job_creation_check() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'PENDING' OR (
        NEW.state = 'WAITING' AND NEW.parent_ids IS NOT NULL AND NEW.attempt = 0
        AND NEW.started_at IS NULL AND NEW.finished_at IS NULL AND NEW.result IS NULL
    ) OR (
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
    RAISE EXCEPTION 'evora: a job must be created PENDING (WAITING with parents, or RUNNING on its first attempt, handed to a worker and not finished), not % on attempt %',
        NEW.state, NEW.attempt
        USING ERRCODE = 'check_violation';
END
$$;

-- What a parent's change of state does to its children (the trigger below):
--   COMPLETED: each WAITING child all of whose parents are COMPLETED becomes PENDING (run_at
--     no earlier than now), with a `released` event, and its queue is woken.
--   DLQ or CANCELLED: each WAITING child becomes CANCELLED with cancelled_by = the parent
--     and last_error "parent <id> ended <state>" (a descendant cancelled through its own
--     parent keeps the first reason, so it names the job that failed), with a `cancelled`
--     event; the children's own triggers carry it down.
--   Back from DLQ or CANCELLED (a retry): each child it cancelled becomes WAITING again
--     (`restored` event), unless another parent is still DLQ or CANCELLED: then that parent
--     is recorded as the one that cancelled it.
-- Must stay true (a child must never be stuck WAITING): two parents of one child may complete
-- in concurrent transactions, each seeing the other still RUNNING in its snapshot. So the
-- children are locked first (in id order), and only then, in a statement with a fresh
-- snapshot (plpgsql, READ COMMITTED), are their parents read: the second transaction to
-- lock a child sees the first's commit. The submit locks the parents it names
-- (job-parents-lock.sql), so a child submitted while its parent completes is either seen
-- here or sees the parent COMPLETED. The sweeper's repair pass (job-waiting-repair.sql)
-- releases any WAITING job whose parents are all COMPLETED, should anything slip through.
CREATE FUNCTION evora.job_dependents_after_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    v_at timestamptz := CASE WHEN NEW.state IN ('COMPLETED', 'DLQ', 'CANCELLED') THEN coalesce(NEW.finished_at, now())
                             ELSE coalesce(NEW.run_at, now()) END;
    v_reason text;
    v_woken bigint;
BEGIN
    IF NEW.state = 'COMPLETED' THEN
        PERFORM 1 FROM evora.jobs c
        WHERE c.parent_ids @> ARRAY[NEW.id] AND c.parent_ids IS NOT NULL AND c.state = 'WAITING'
        ORDER BY c.id
        FOR NO KEY UPDATE;
        WITH released AS (
            UPDATE evora.jobs c
            SET state = 'PENDING', run_at = greatest(c.run_at, v_at)
            WHERE c.parent_ids @> ARRAY[NEW.id] AND c.parent_ids IS NOT NULL AND c.state = 'WAITING'
              AND NOT EXISTS (SELECT 1 FROM evora.jobs p WHERE p.id = ANY (c.parent_ids) AND p.state <> 'COMPLETED')
            RETURNING c.id, c.queue, c.type, c.attempt, c.run_at
        ),
        events AS (
            INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
            SELECT v_at, count(*), array_agg(id), array_agg(queue), array_agg(type),
                   array_agg('released'::evora.job_event_kind), array_agg('WAITING'::evora.job_state),
                   array_agg('PENDING'::evora.job_state), array_agg(attempt), array_agg(NULL::text),
                   array_agg(NULL::float8), array_agg(NULL::float8)
            FROM released
            HAVING count(*) > 0
        )
        SELECT count(*) INTO v_woken
        FROM (SELECT pg_notify('evora_job_available', d.queue)
              FROM (SELECT DISTINCT queue FROM released WHERE run_at <= v_at) d) w;
    ELSIF NEW.state IN ('DLQ', 'CANCELLED') THEN
        v_reason := CASE WHEN NEW.cancelled_by IS NOT NULL AND NEW.last_error IS NOT NULL THEN NEW.last_error
                         ELSE format('parent %s ended %s', NEW.id, NEW.state) END;
        WITH cancelled AS (
            UPDATE evora.jobs c
            SET state = 'CANCELLED', finished_at = v_at, last_error = v_reason, cancelled_by = NEW.id
            WHERE c.parent_ids @> ARRAY[NEW.id] AND c.parent_ids IS NOT NULL AND c.state = 'WAITING'
            RETURNING c.id, c.queue, c.type, c.attempt
        )
        INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
        SELECT v_at, count(*), array_agg(id), array_agg(queue), array_agg(type),
               array_agg('cancelled'::evora.job_event_kind), array_agg('WAITING'::evora.job_state),
               array_agg('CANCELLED'::evora.job_state), array_agg(attempt), array_agg(NULL::text),
               array_agg(NULL::float8), array_agg(NULL::float8)
        FROM cancelled
        HAVING count(*) > 0;
    ELSIF OLD.state IN ('DLQ', 'CANCELLED') AND NEW.state IN ('PENDING', 'WAITING') THEN
        PERFORM 1 FROM evora.jobs c
        WHERE c.parent_ids @> ARRAY[NEW.id] AND c.parent_ids IS NOT NULL AND c.state = 'CANCELLED' AND c.cancelled_by = NEW.id
        ORDER BY c.id
        FOR NO KEY UPDATE;
        -- Still held back by another parent: that one is now the parent whose retry restores it.
        WITH held AS (
            SELECT c.id AS child, o.id AS parent, o.state
            FROM evora.jobs c
            CROSS JOIN LATERAL (SELECT p.id, p.state FROM evora.jobs p
                                WHERE p.id = ANY (c.parent_ids) AND p.id <> NEW.id AND p.state IN ('DLQ', 'CANCELLED')
                                ORDER BY p.id LIMIT 1) o
            WHERE c.parent_ids @> ARRAY[NEW.id] AND c.parent_ids IS NOT NULL AND c.state = 'CANCELLED' AND c.cancelled_by = NEW.id
        )
        UPDATE evora.jobs c
        SET cancelled_by = h.parent, last_error = format('parent %s ended %s', h.parent, h.state)
        FROM held h
        WHERE c.id = h.child;
        WITH restored AS (
            UPDATE evora.jobs c
            SET state = 'WAITING', cancelled_by = NULL, last_error = NULL, finished_at = NULL
            WHERE c.parent_ids @> ARRAY[NEW.id] AND c.parent_ids IS NOT NULL AND c.state = 'CANCELLED' AND c.cancelled_by = NEW.id
            RETURNING c.id, c.queue, c.type, c.attempt
        )
        INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
        SELECT v_at, count(*), array_agg(id), array_agg(queue), array_agg(type),
               array_agg('restored'::evora.job_event_kind), array_agg('CANCELLED'::evora.job_state),
               array_agg('WAITING'::evora.job_state), array_agg(attempt), array_agg(NULL::text),
               array_agg(NULL::float8), array_agg(NULL::float8)
        FROM restored
        HAVING count(*) > 0;
    END IF;
    RETURN NULL;
END
$$;

-- Only parents (has_dependents) that change state: every other update skips it at the cost
-- of the WHEN expression.
CREATE TRIGGER jobs_dependents_after_change
    AFTER UPDATE ON evora.jobs
    FOR EACH ROW
    WHEN (NEW.has_dependents AND NEW.state IS DISTINCT FROM OLD.state)
    EXECUTE FUNCTION evora.job_dependents_after_change();

-- The submitted fields, as 0009's, plus the parents: `policy` -> 'depends_on' is
-- {"ids": [sorted parent ids], "refs": [sorted depends_on_refs]} or null (src/store/jobs-submit.ts,
-- policyJson). A job submitted before this migration recorded none: not compared for it.
CREATE OR REPLACE FUNCTION evora.job_submitted_fields(priority integer, run_at timestamptz, max_attempts integer, policy jsonb DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object(
        'priority', priority,
        'run_at', extract(epoch FROM run_at),
        'max_attempts', nullif(max_attempts, 0),
        'backoff', policy -> 'backoff',
        'timeout', policy -> 'timeout',
        'concurrency_key', policy -> 'concurrency_key',
        'depends_on', policy -> 'depends_on'
    )
$$;

-- 0009's rule with depends_on added to the compared fields, in the API's order.
CREATE OR REPLACE FUNCTION evora.job_submit_difference(
    job_type text, job_payload jsonb, job_submitted jsonb,
    type text, payload jsonb, submitted jsonb
) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT f
    FROM unnest(ARRAY['type', 'payload', 'priority', 'run_at', 'max_attempts', 'backoff', 'timeout', 'concurrency_key',
                      'depends_on']) WITH ORDINALITY AS t(f, n),
         LATERAL (SELECT jsonb_build_object('type', job_type, 'payload', job_payload) || coalesce(job_submitted, '{}'::jsonb) AS held,
                         jsonb_build_object('type', type, 'payload', payload) || coalesce(submitted, '{}'::jsonb) AS sent) v
    WHERE v.held ? f AND (v.held -> f) IS DISTINCT FROM (v.sent -> f)
    ORDER BY n
    LIMIT 1
$$;

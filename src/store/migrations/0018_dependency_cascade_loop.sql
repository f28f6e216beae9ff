-- A parent's end (DLQ or CANCELLED) and its retry reached its descendants through the
-- children's own triggers, one trigger level per generation: a chain of a few hundred jobs
-- exceeded PostgreSQL's stack depth ("stack depth limit exceeded"), so the parent's cancel,
-- its dead-lettering by a worker's failure report, or its retry failed, and kept failing.
--
-- Now the trigger of the job that changed walks its descendants itself, one generation per
-- statement in a loop, with the same rules as 0011_dependencies.sql (cancelled_by: the
-- parent of the previous generation; last_error: the job that failed; a descendant held back
-- by another DLQ or CANCELLED parent stays CANCELLED, naming it). While it walks, the
-- triggers of the rows it changes do nothing (evora.dependents_walk is 'on', transaction
-- local): the walk is theirs. Must stay true: the nesting depth no longer grows with the
-- graph's depth; every change and its events are in the transaction of the parent's change.
CREATE OR REPLACE FUNCTION evora.job_dependents_after_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    v_at timestamptz := CASE WHEN NEW.state IN ('COMPLETED', 'DLQ', 'CANCELLED') THEN coalesce(NEW.finished_at, now())
                             ELSE coalesce(NEW.run_at, now()) END;
    v_reason text;
    v_woken bigint;
    v_frontier uuid[];
BEGIN
    IF current_setting('evora.dependents_walk', true) = 'on' THEN
        RETURN NULL;
    END IF;
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
        RETURN NULL;
    END IF;

    PERFORM set_config('evora.dependents_walk', 'on', true);
    v_frontier := ARRAY[NEW.id];
    IF NEW.state IN ('DLQ', 'CANCELLED') THEN
        v_reason := CASE WHEN NEW.cancelled_by IS NOT NULL AND NEW.last_error IS NOT NULL THEN NEW.last_error
                         ELSE format('parent %s ended %s', NEW.id, NEW.state) END;
        LOOP
            WITH cancelled AS (
                UPDATE evora.jobs c
                SET state = 'CANCELLED', finished_at = v_at, last_error = v_reason,
                    cancelled_by = (SELECT p FROM unnest(c.parent_ids) p WHERE p = ANY (v_frontier) ORDER BY p LIMIT 1)
                WHERE c.parent_ids && v_frontier AND c.parent_ids IS NOT NULL AND c.state = 'WAITING'
                RETURNING c.id, c.queue, c.type, c.attempt, c.has_dependents
            ),
            events AS (
                INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
                SELECT v_at, count(*), array_agg(id), array_agg(queue), array_agg(type),
                       array_agg('cancelled'::evora.job_event_kind), array_agg('WAITING'::evora.job_state),
                       array_agg('CANCELLED'::evora.job_state), array_agg(attempt), array_agg(NULL::text),
                       array_agg(NULL::float8), array_agg(NULL::float8)
                FROM cancelled
                HAVING count(*) > 0
            )
            SELECT array_agg(id) FILTER (WHERE has_dependents) INTO v_frontier FROM cancelled;
            EXIT WHEN v_frontier IS NULL;
        END LOOP;
    ELSIF OLD.state IN ('DLQ', 'CANCELLED') AND NEW.state IN ('PENDING', 'WAITING') THEN
        LOOP
            PERFORM 1 FROM evora.jobs c
            WHERE c.parent_ids && v_frontier AND c.parent_ids IS NOT NULL AND c.cancelled_by = ANY (v_frontier) AND c.state = 'CANCELLED'
            ORDER BY c.id
            FOR NO KEY UPDATE;
            -- Still held back by another parent: that one is now the parent whose retry restores it.
            WITH held AS (
                SELECT c.id AS child, o.id AS parent, o.state
                FROM evora.jobs c
                CROSS JOIN LATERAL (SELECT p.id, p.state FROM evora.jobs p
                                    WHERE p.id = ANY (c.parent_ids) AND p.id <> c.cancelled_by AND p.state IN ('DLQ', 'CANCELLED')
                                    ORDER BY p.id LIMIT 1) o
                WHERE c.parent_ids && v_frontier AND c.parent_ids IS NOT NULL AND c.cancelled_by = ANY (v_frontier) AND c.state = 'CANCELLED'
            )
            UPDATE evora.jobs c
            SET cancelled_by = h.parent, last_error = format('parent %s ended %s', h.parent, h.state)
            FROM held h
            WHERE c.id = h.child;
            WITH restored AS (
                UPDATE evora.jobs c
                SET state = 'WAITING', cancelled_by = NULL, last_error = NULL, finished_at = NULL
                WHERE c.parent_ids && v_frontier AND c.parent_ids IS NOT NULL AND c.cancelled_by = ANY (v_frontier) AND c.state = 'CANCELLED'
                RETURNING c.id, c.queue, c.type, c.attempt, c.has_dependents
            ),
            events AS (
                INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
                SELECT v_at, count(*), array_agg(id), array_agg(queue), array_agg(type),
                       array_agg('restored'::evora.job_event_kind), array_agg('CANCELLED'::evora.job_state),
                       array_agg('WAITING'::evora.job_state), array_agg(attempt), array_agg(NULL::text),
                       array_agg(NULL::float8), array_agg(NULL::float8)
                FROM restored
                HAVING count(*) > 0
            )
            SELECT array_agg(id) FILTER (WHERE has_dependents) INTO v_frontier FROM restored;
            EXIT WHEN v_frontier IS NULL;
        END LOOP;
    END IF;
    PERFORM set_config('evora.dependents_walk', 'off', true);
    RETURN NULL;
END
$$;

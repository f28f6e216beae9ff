-- DeleteQueue (QueueService; sql/queue-delete.sql): its audit action `queue.delete`, and the
-- lock every job insert now takes (evora.queues_ensure) so that a queue deleted while a job is
-- submitted into it does not leave that job without its queue row (a job without one is never
-- claimed: job-claim.sql joins evora.queues).
--
-- The action list is a CHECK of evora.audit_events (0013_tokens_audit.sql, last grown by
-- 0024), so a new action is a new list; the existing rows all pass it (it only grows). The
-- previous release writes none of the new action, so it runs unchanged on this schema.
--
-- evora.queues_ensure(names) makes the rows of the queues a submit inserts into: it takes
-- each distinct queue's advisory lock (class 7301847, hashtext of the name), shared, held until
-- the caller's transaction ends (sql/queue-delete-lock.sql takes it exclusively), then
-- inserts the rows missing in a fresh snapshot (a VOLATILE function's statements each take
-- one), so a submit that waited for a delete makes the row again; the rows that exist are
-- not touched, so a submit never waits for a transaction updating one. The server's job
-- inserts call it (sql/job-insert-many.sql and its siblings); the previous release's do not
-- and run unchanged.
--
-- evora.submit_job is 0021's, its queue row made by evora.queues_ensure instead of its own
-- INSERT ... ON CONFLICT. The signature is unchanged.
--
-- Locks: the audit table for the constraint's swap (a scan of its rows to check the new
-- CHECK, under an ACCESS EXCLUSIVE lock: milliseconds per 100,000 events).
ALTER TABLE evora.audit_events DROP CONSTRAINT audit_events_action_check;
ALTER TABLE evora.audit_events ADD CONSTRAINT audit_events_action_check CHECK (action IN (
    'queue.upsert', 'queue.pause', 'queue.resume', 'queue.delete',
    'job.cancel', 'job.retry', 'jobs.retry', 'jobs.purge', 'jobs.cancel',
    'schedule.upsert', 'schedule.delete', 'schedule.pause', 'schedule.resume', 'schedule.trigger',
    'token.create', 'token.revoke'));

CREATE FUNCTION evora.queues_ensure(names text[]) RETURNS TABLE (name text, max_attempts integer)
    LANGUAGE sql VOLATILE AS $$
    -- In the names' order: two submits into the same queues, each waiting behind a delete of
    -- one of them, take the locks in one order and cannot deadlock each other.
    SELECT pg_advisory_xact_lock_shared(7301847, hashtext(d.n))
    FROM (SELECT DISTINCT u.n FROM unnest(names) AS u(n) ORDER BY u.n) d
    ORDER BY d.n;
    INSERT INTO evora.queues AS q (name)
    SELECT DISTINCT u.n FROM unnest(names) AS u(n)
    WHERE NOT EXISTS (SELECT 1 FROM evora.queues e WHERE e.name = u.n)
    ON CONFLICT (name) DO NOTHING
    RETURNING q.name, q.max_attempts;
$$;

CREATE OR REPLACE FUNCTION evora.submit_job(
    queue text,
    type text,
    payload jsonb DEFAULT '{}'::jsonb,
    priority integer DEFAULT 0,
    run_at timestamptz DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    idempotency_key text DEFAULT NULL,
    backoff_kind evora.backoff_kind DEFAULT NULL,
    backoff_base interval DEFAULT NULL,
    backoff_cap interval DEFAULT NULL,
    backoff_jitter double precision DEFAULT NULL,
    timeout interval DEFAULT NULL,
    concurrency_key text DEFAULT NULL,
    OUT job_id uuid,
    OUT created boolean
)
    LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_queue text := submit_job.queue;
    v_type text := submit_job.type;
    v_payload jsonb := coalesce(submit_job.payload, '{}'::jsonb);
    v_priority integer := coalesce(submit_job.priority, 0);
    v_run_at timestamptz := submit_job.run_at;
    v_max integer := nullif(submit_job.max_attempts, 0);
    v_key text := nullif(submit_job.idempotency_key, '');
    v_base double precision := extract(epoch FROM submit_job.backoff_base);
    v_cap double precision := extract(epoch FROM submit_job.backoff_cap);
    v_jitter double precision := submit_job.backoff_jitter;
    v_timeout double precision := extract(epoch FROM submit_job.timeout);
    v_ckey text := nullif(submit_job.concurrency_key, '');
    v_policy jsonb;
    v_submitted jsonb;
    v_job evora.jobs;
    v_diff text;
    v_name text;
    v_value text;
BEGIN
    -- The API's checks (src/domain/validate.ts), one line naming the field.
    FOREACH v_name IN ARRAY ARRAY['queue', 'type'] LOOP
        v_value := CASE v_name WHEN 'queue' THEN v_queue ELSE v_type END;
        IF v_value IS NULL OR v_value = '' THEN
            RAISE EXCEPTION 'evora: % is required', v_name USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF length(v_value) > 128 THEN
            RAISE EXCEPTION 'evora: % is longer than 128 characters', v_name USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_value !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]*$' THEN
            RAISE EXCEPTION 'evora: % "%" may contain only letters, digits and _ . : / - (starting with a letter or digit)', v_name, v_value
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    IF jsonb_typeof(v_payload) <> 'object' THEN
        RAISE EXCEPTION 'evora: payload must be a JSON object, got %', jsonb_typeof(v_payload) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_priority NOT BETWEEN -1000 AND 1000 THEN
        RAISE EXCEPTION 'evora: priority must be an integer from -1000 to 1000, got %', v_priority USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_max IS NOT NULL AND v_max NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'evora: max_attempts must be from 0 (queue default) to 1000, got %', v_max USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF length(v_key) > 255 THEN
        RAISE EXCEPTION 'evora: idempotency_key is longer than 255 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(v_ckey) > 255 THEN
        RAISE EXCEPTION 'evora: concurrency_key is longer than 255 bytes (got %)', octet_length(v_ckey) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_run_at IN ('infinity', '-infinity') THEN
        RAISE EXCEPTION 'evora: run_at is not a valid time' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_run_at < '0001-01-01T00:00:00Z' OR v_run_at >= '10000-01-01T00:00:00Z' THEN
        RAISE EXCEPTION 'evora: run_at must lie in 0001-01-01T00:00:00Z..9999-12-31T23:59:59Z, got %', v_run_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF evora.json_too_deep(v_payload, 24) THEN
        RAISE EXCEPTION 'evora: payload nests objects and arrays more than 24 levels deep' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_jitter IS NOT NULL AND NOT (v_jitter BETWEEN 0 AND 1) THEN
        RAISE EXCEPTION 'evora: backoff.jitter must be from 0 to 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_base < 0 OR v_cap < 0 THEN
        RAISE EXCEPTION 'evora: backoff durations must not be negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_base > 365 * 86400 THEN
        RAISE EXCEPTION 'evora: backoff.base must be at most 365 days, got % s', v_base USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_cap > 365 * 86400 THEN
        RAISE EXCEPTION 'evora: backoff.cap must be at most 365 days, got % s', v_cap USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_base > v_cap THEN
        RAISE EXCEPTION 'evora: backoff.base (% s) is longer than backoff.cap (% s): every delay would be the cap', v_base, v_cap
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_timeout <= 0 THEN
        RAISE EXCEPTION 'evora: timeout must be positive, got % s', v_timeout USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_timeout > 365.25 * 86400 THEN
        RAISE EXCEPTION 'evora: timeout must be at most one year, got % s', v_timeout USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The job's own policy as the server's submit passes it (src/store/jobs-submit.ts,
    -- policyJson): a backoff given in part has jitter 0 unless given, as on the API; the
    -- concurrency key rides in it too (0009).
    IF num_nonnulls(submit_job.backoff_kind, v_base, v_cap, v_jitter, v_timeout, v_ckey) > 0 THEN
        v_policy := jsonb_build_object(
            'backoff', CASE WHEN num_nonnulls(submit_job.backoff_kind, v_base, v_cap, v_jitter) > 0
                            THEN jsonb_build_object('kind', submit_job.backoff_kind, 'base', v_base, 'cap', v_cap,
                                                    'jitter', coalesce(v_jitter, 0)) END,
            'timeout', v_timeout,
            'concurrency_key', v_ckey);
    END IF;

    v_submitted := CASE WHEN v_key IS NOT NULL THEN evora.job_submitted_fields(v_priority, v_run_at, v_max, v_policy) END;
    -- The queue row under the queue's shared lock, as the server's submits make it
    -- (evora.queues_ensure): DeleteQueue takes the lock exclusively, so the row is there
    -- when the job is.
    PERFORM evora.queues_ensure(ARRAY[v_queue]);
    LOOP
        INSERT INTO evora.jobs (queue, type, payload, priority, run_at, idempotency_key, max_attempts, submitted, created_at,
                                backoff_kind, backoff_base_seconds, backoff_cap_seconds, backoff_jitter, timeout_seconds,
                                concurrency_key)
        SELECT v_queue, v_type, v_payload, v_priority, coalesce(v_run_at, now()), v_key,
               coalesce(v_max, q.max_attempts), v_submitted, now(),
               submit_job.backoff_kind, v_base, v_cap,
               CASE WHEN v_policy -> 'backoff' <> 'null'::jsonb THEN coalesce(v_jitter, 0) END,
               coalesce(v_timeout, q.attempt_timeout_seconds),
               v_ckey
        FROM evora.queues q WHERE q.name = v_queue
        ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING * INTO v_job;
        IF v_job.id IS NOT NULL THEN
            INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
            VALUES (v_job.created_at, 1, ARRAY[v_job.id], ARRAY[v_job.queue], ARRAY[v_job.type],
                    ARRAY['submitted'::evora.job_event_kind], ARRAY[NULL::evora.job_state], ARRAY[v_job.state],
                    ARRAY[v_job.attempt], ARRAY[NULL::text], ARRAY[NULL::float8], ARRAY[NULL::float8]);
            IF v_job.run_at <= now() THEN
                PERFORM pg_notify('evora_job_available', v_job.queue);
            END IF;
            job_id := v_job.id;
            created := true;
            RETURN;
        END IF;
        -- A replay: the row that holds the key, in this statement's fresh snapshot.
        SELECT * INTO v_job FROM evora.jobs j WHERE j.queue = v_queue AND j.idempotency_key = v_key;
        IF v_job.id IS NOT NULL THEN
            v_diff := evora.job_submit_difference(v_job.type, v_job.payload, v_job.submitted, v_type, v_payload, v_submitted);
            IF v_diff IS NOT NULL THEN
                RAISE EXCEPTION 'evora: idempotency key "%" in queue "%" already names job %, submitted with a different %',
                    v_key, v_queue, v_job.id, v_diff
                    USING ERRCODE = 'unique_violation';
            END IF;
            job_id := v_job.id;
            created := false;
            RETURN;
        END IF;
        -- The holder was deleted (pruned or rolled back) between the two statements: insert again.
    END LOOP;
END
$$;

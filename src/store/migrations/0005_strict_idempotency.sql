-- Strict idempotency, and evora.submit_job: a submit an application makes in its own
-- transaction.
--
-- A replay of an idempotency key must match what the first submit SAID, field by field,
-- not what the server resolved it to (max_attempts 0 = the queue's default, run_at unset =
-- now). The row keeps type and payload as submitted; the other submitted fields are kept
-- in jobs.submitted (only for a job with a key: no other job is ever compared). A row
-- created before this migration has submitted = NULL: only its type and payload are
-- compared, as before (docs/api.md, "Idempotency").
ALTER TABLE evora.jobs ADD COLUMN submitted jsonb;

-- The submitted fields a job row does not keep as submitted, as jobs.submitted holds them.
-- Unset stays null (a field unset on both submits is identical); run_at as epoch seconds
-- (a number, so the session's time zone never enters the comparison). A new submit field
-- is one more pair here and one more name in evora.job_submit_difference's list.
CREATE FUNCTION evora.job_submitted_fields(priority integer, run_at timestamptz, max_attempts integer)
    RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object(
        'priority', priority,
        'run_at', extract(epoch FROM run_at),
        'max_attempts', nullif(max_attempts, 0)
    )
$$;

-- The first submitted field (in the API's order) in which a replay differs from the job
-- that holds its key, or NULL when it is identical. A field the job did not record (a row
-- older than the field, or than this migration) is not compared. The one definition of the
-- rule: the server's submit statements and evora.submit_job both call it.
CREATE FUNCTION evora.job_submit_difference(
    job_type text, job_payload jsonb, job_submitted jsonb,
    type text, payload jsonb, submitted jsonb
) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT f
    FROM unnest(ARRAY['type', 'payload', 'priority', 'run_at', 'max_attempts']) WITH ORDINALITY AS t(f, n),
         LATERAL (SELECT jsonb_build_object('type', job_type, 'payload', job_payload) || coalesce(job_submitted, '{}'::jsonb) AS held,
                         jsonb_build_object('type', type, 'payload', payload) || coalesce(submitted, '{}'::jsonb) AS sent) v
    WHERE v.held ? f AND (v.held -> f) IS DISTINCT FROM (v.sent -> f)
    ORDER BY n
    LIMIT 1
$$;

-- Submits one job inside the caller's transaction: the job, its `submitted` event (the
-- outbox telemetry reads) and the wake-up of idle workers (pg_notify, delivered at COMMIT)
-- are committed or rolled back with the application's own writes. Does what the server's
-- submit does (src/store/sql/job-insert-many.sql): the same checks as the API (an error
-- with SQLSTATE 22023 naming the field, nothing changed), an unknown queue created with
-- the defaults, max_attempts NULL or 0 = the queue's, run_at NULL = now() (the
-- transaction's start). A replay of (queue, idempotency_key) returns the existing job with
-- created = false, or raises unique_violation (23505) naming the first field that differs.
-- Not checked here: the server's payload size limit (EVORA_MAX_PAYLOAD_BYTES), which the
-- database does not know. test/grpc/submit-sql.test.ts checks that this function and the
-- API agree.
CREATE FUNCTION evora.submit_job(
    queue text,
    type text,
    payload jsonb DEFAULT '{}'::jsonb,
    priority integer DEFAULT 0,
    run_at timestamptz DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    idempotency_key text DEFAULT NULL,
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
    IF v_run_at IN ('infinity', '-infinity') THEN
        RAISE EXCEPTION 'evora: run_at is not a valid time' USING ERRCODE = 'invalid_parameter_value';
    END IF;

    v_submitted := CASE WHEN v_key IS NOT NULL THEN evora.job_submitted_fields(v_priority, v_run_at, v_max) END;
    INSERT INTO evora.queues (name) VALUES (v_queue) ON CONFLICT (name) DO NOTHING;
    LOOP
        INSERT INTO evora.jobs (queue, type, payload, priority, run_at, idempotency_key, max_attempts, submitted, created_at)
        SELECT v_queue, v_type, v_payload, v_priority, coalesce(v_run_at, now()), v_key,
               coalesce(v_max, q.max_attempts), v_submitted, now()
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

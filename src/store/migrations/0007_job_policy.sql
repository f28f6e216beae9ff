-- Per-job retry policy: a job's own backoff and attempt timeout (SubmitJobRequest.backoff,
-- SubmitJobRequest.timeout; docs/api.md "Per-job backoff and timeout").
--
-- Backoff: each column NULL = the queue's value at the time of the failure (the fail and
-- sweep statements coalesce job over queue), so a job submitted with only a kind keeps the
-- queue's base, cap and jitter.
-- Timeout: the longest one attempt may run, heartbeats or not; NULL = no limit. The
-- attempt's deadline is started_at + timeout_seconds; the leader's sweeper fails a RUNNING
-- job past it (job-sweep-timed-out.sql). The few RUNNING jobs with a timeout are found by
-- jobs_running_timeout_idx. A queue's attempt_timeout_seconds is the default of the jobs
-- submitted to it without a timeout, resolved at submit time as max_attempts is (a change
-- applies to jobs submitted after it).
ALTER TABLE evora.queues ADD COLUMN attempt_timeout_seconds double precision CHECK (attempt_timeout_seconds > 0);

ALTER TABLE evora.jobs
    ADD COLUMN backoff_kind evora.backoff_kind,
    ADD COLUMN backoff_base_seconds double precision CHECK (backoff_base_seconds >= 0),
    ADD COLUMN backoff_cap_seconds double precision CHECK (backoff_cap_seconds >= 0),
    ADD COLUMN backoff_jitter double precision CHECK (backoff_jitter BETWEEN 0 AND 1),
    ADD COLUMN timeout_seconds double precision CHECK (timeout_seconds > 0);

CREATE INDEX jobs_running_timeout_idx ON evora.jobs (started_at)
    WHERE state = 'RUNNING' AND timeout_seconds IS NOT NULL;

-- The submitted fields, as 0005's, plus the job's policy: `policy` is the jsonb the server
-- passes to its submit statements ({"backoff": {kind, base, cap, jitter} | null,
-- "timeout": seconds | null}, NULL = neither). Replaces 0005's three-argument function: its
-- one caller besides the submit statements, evora.submit_job, is replaced below.
DROP FUNCTION evora.job_submitted_fields(integer, timestamptz, integer);
CREATE FUNCTION evora.job_submitted_fields(priority integer, run_at timestamptz, max_attempts integer, policy jsonb DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object(
        'priority', priority,
        'run_at', extract(epoch FROM run_at),
        'max_attempts', nullif(max_attempts, 0),
        'backoff', policy -> 'backoff',
        'timeout', policy -> 'timeout'
    )
$$;

-- 0005's rule with backoff and timeout added to the compared fields, in the API's order.
-- A job submitted before this migration recorded neither: they are not compared for it.
CREATE OR REPLACE FUNCTION evora.job_submit_difference(
    job_type text, job_payload jsonb, job_submitted jsonb,
    type text, payload jsonb, submitted jsonb
) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT f
    FROM unnest(ARRAY['type', 'payload', 'priority', 'run_at', 'max_attempts', 'backoff', 'timeout']) WITH ORDINALITY AS t(f, n),
         LATERAL (SELECT jsonb_build_object('type', job_type, 'payload', job_payload) || coalesce(job_submitted, '{}'::jsonb) AS held,
                         jsonb_build_object('type', type, 'payload', payload) || coalesce(submitted, '{}'::jsonb) AS sent) v
    WHERE v.held ? f AND (v.held -> f) IS DISTINCT FROM (v.sent -> f)
    ORDER BY n
    LIMIT 1
$$;

-- evora.submit_job with the job's own policy: backoff_kind, backoff_base, backoff_cap,
-- backoff_jitter (each NULL = the queue's; jitter 0 when any other backoff part is given,
-- as on the API) and timeout (NULL = the queue's attempt_timeout_seconds, or none), checked
-- and compared on a replay as SubmitJob does. The new parameters come after 0005's, so
-- calls by name or by position written for 0005 mean what they meant.
DROP FUNCTION evora.submit_job(text, text, jsonb, integer, timestamptz, integer, text);
CREATE FUNCTION evora.submit_job(
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
    IF v_run_at IN ('infinity', '-infinity') THEN
        RAISE EXCEPTION 'evora: run_at is not a valid time' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_jitter IS NOT NULL AND NOT (v_jitter BETWEEN 0 AND 1) THEN
        RAISE EXCEPTION 'evora: backoff.jitter must be from 0 to 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_base < 0 OR v_cap < 0 THEN
        RAISE EXCEPTION 'evora: backoff durations must not be negative' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_timeout <= 0 THEN
        RAISE EXCEPTION 'evora: timeout must be positive, got % s', v_timeout USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_timeout > 365.25 * 86400 THEN
        RAISE EXCEPTION 'evora: timeout must be at most one year, got % s', v_timeout USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The job's own policy as the server's submit passes it (src/store/jobs-submit.ts,
    -- policyJson): a backoff given in part has jitter 0 unless given, as on the API.
    IF num_nonnulls(submit_job.backoff_kind, v_base, v_cap, v_jitter, v_timeout) > 0 THEN
        v_policy := jsonb_build_object(
            'backoff', CASE WHEN num_nonnulls(submit_job.backoff_kind, v_base, v_cap, v_jitter) > 0
                            THEN jsonb_build_object('kind', submit_job.backoff_kind, 'base', v_base, 'cap', v_cap,
                                                    'jitter', coalesce(v_jitter, 0)) END,
            'timeout', v_timeout);
    END IF;

    v_submitted := CASE WHEN v_key IS NOT NULL THEN evora.job_submitted_fields(v_priority, v_run_at, v_max, v_policy) END;
    INSERT INTO evora.queues (name) VALUES (v_queue) ON CONFLICT (name) DO NOTHING;
    LOOP
        INSERT INTO evora.jobs (queue, type, payload, priority, run_at, idempotency_key, max_attempts, submitted, created_at,
                                backoff_kind, backoff_base_seconds, backoff_cap_seconds, backoff_jitter, timeout_seconds)
        SELECT v_queue, v_type, v_payload, v_priority, coalesce(v_run_at, now()), v_key,
               coalesce(v_max, q.max_attempts), v_submitted, now(),
               submit_job.backoff_kind, v_base, v_cap,
               CASE WHEN v_policy -> 'backoff' <> 'null'::jsonb THEN coalesce(v_jitter, 0) END,
               coalesce(v_timeout, q.attempt_timeout_seconds)
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

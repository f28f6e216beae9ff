-- Concurrency keys (SubmitJobRequest.concurrency_key, Queue.max_concurrency_per_key;
-- docs/api.md "Concurrency keys").
--
-- A job's concurrency_key (e.g. a tenant id; NULL = none, at most 255 bytes) groups it with
-- the other jobs of its queue that have the same key. A queue's max_concurrency_per_key
-- (NULL = none) caps the RUNNING jobs of each key, and its claims rotate across keys
-- (evora.queue_pick_by_key). Jobs without a key are not limited per key.
-- Must stay true: only queues with max_concurrency_per_key set take the new path; the two
-- indexes below are partial on concurrency_key IS NOT NULL so jobs without a key (all jobs of
-- queues that do not use keys) do not pay for them.
ALTER TABLE evora.jobs ADD COLUMN concurrency_key text CHECK (octet_length(concurrency_key) BETWEEN 1 AND 255);
ALTER TABLE evora.queues ADD COLUMN max_concurrency_per_key integer CHECK (max_concurrency_per_key >= 1);

-- A key's waiting jobs, best first (the round-robin's per-key scan), and the distinct keys.
CREATE INDEX jobs_key_claimable_idx ON evora.jobs (queue, concurrency_key, priority, run_at, id)
    WHERE state = 'PENDING' AND concurrency_key IS NOT NULL;
-- A key's RUNNING jobs, counted by the claim under the queue's lock.
CREATE INDEX jobs_key_running_idx ON evora.jobs (queue, concurrency_key)
    WHERE state = 'RUNNING' AND concurrency_key IS NOT NULL;

-- The submitted fields, as 0007's, plus the concurrency key. The submit statements pass the
-- key inside `policy` ({"backoff", "timeout", "concurrency_key"}; src/store/jobs-submit.ts,
-- policyJson), so the signature and its callers stay as they are.
CREATE OR REPLACE FUNCTION evora.job_submitted_fields(priority integer, run_at timestamptz, max_attempts integer, policy jsonb DEFAULT NULL)
    RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object(
        'priority', priority,
        'run_at', extract(epoch FROM run_at),
        'max_attempts', nullif(max_attempts, 0),
        'backoff', policy -> 'backoff',
        'timeout', policy -> 'timeout',
        'concurrency_key', policy -> 'concurrency_key'
    )
$$;

-- 0007's rule with concurrency_key added to the compared fields, in the API's order. A job
-- submitted before this migration recorded no key: it is not compared for it.
CREATE OR REPLACE FUNCTION evora.job_submit_difference(
    job_type text, job_payload jsonb, job_submitted jsonb,
    type text, payload jsonb, submitted jsonb
) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT f
    FROM unnest(ARRAY['type', 'payload', 'priority', 'run_at', 'max_attempts', 'backoff', 'timeout', 'concurrency_key']) WITH ORDINALITY AS t(f, n),
         LATERAL (SELECT jsonb_build_object('type', job_type, 'payload', job_payload) || coalesce(job_submitted, '{}'::jsonb) AS held,
                         jsonb_build_object('type', type, 'payload', payload) || coalesce(submitted, '{}'::jsonb) AS sent) v
    WHERE v.held ? f AND (v.held -> f) IS DISTINCT FROM (v.sent -> f)
    ORDER BY n
    LIMIT 1
$$;

-- The jobs a claim of a queue with max_concurrency_per_key may start now: at most `room`,
-- round-robin across keys. The ordering rule (docs/dispatcher.md "concurrency keys"):
--   * each key with due PENDING jobs offers its best (per_key - RUNNING of that key) jobs,
--     in (priority, run_at, id) order; the jobs without a key form one more group that
--     offers its best `room` jobs (no per-key limit);
--   * every offered job gets its rank in its group (1 = the group's best);
--   * the claim takes them in (rank, priority, run_at, id) order, at most `room`.
-- So a key's n-th job starts before any key's (n+1)-th in the same claim, and a key that
-- arrives behind another's backlog gets its turn at the next claim.
-- Must stay true: it runs in the claim's transaction after evora.queue_limit took the
-- queue's advisory lock (taken again here: re-entrant), and as a plpgsql function its
-- statements take fresh snapshots, so the RUNNING counts include every committed claim of
-- any server (migration 0004 says why). Rows another transaction holds are skipped (SKIP
-- LOCKED), which only ever under-admits. The keys are found by a loose scan of
-- jobs_key_claimable_idx (one probe per distinct waiting key), not by reading every job.
-- Known cost: the key-less jobs have no index of their own (every queue's jobs would pay
-- for it), so their branch walks jobs_claimable_idx past the queue's keyed waiting jobs: it
-- grows with the queue's backlog (docs/dispatcher.md "Concurrency keys" has the numbers).
CREATE FUNCTION evora.queue_pick_by_key(queue_name text, per_key integer, room bigint, at timestamptz, types text[])
    RETURNS TABLE (id uuid, priority integer, run_at timestamptz)
    -- Every statement here has an index to walk; for the key-less jobs' filtered walk of
    -- jobs_claimable_idx the planner otherwise took a sequential scan of the whole table
    -- (all queues, all finished jobs) as it estimates key-less jobs rare. Only while it runs.
    SET enable_seqscan = off
    LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_ids uuid[];
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('evora.queue_room:' || queue_name));
    WITH RECURSIVE keys AS (
        (SELECT j.concurrency_key AS k FROM evora.jobs j
         WHERE j.queue = queue_name AND j.state = 'PENDING' AND j.concurrency_key IS NOT NULL
         ORDER BY j.concurrency_key LIMIT 1)
        UNION ALL
        SELECT (SELECT j.concurrency_key FROM evora.jobs j
                WHERE j.queue = queue_name AND j.state = 'PENDING' AND j.concurrency_key IS NOT NULL
                  AND j.concurrency_key > keys.k
                ORDER BY j.concurrency_key LIMIT 1)
        FROM keys WHERE keys.k IS NOT NULL
    ),
    offered AS (
        SELECT o.id, o.priority, o.run_at, o.rank
        FROM keys
        CROSS JOIN LATERAL (
            SELECT greatest(per_key - (SELECT count(*) FROM evora.jobs r
                                       WHERE r.queue = queue_name AND r.concurrency_key = keys.k AND r.state = 'RUNNING'), 0) AS free
        ) f
        CROSS JOIN LATERAL (
            SELECT j.id, j.priority, j.run_at, row_number() OVER (ORDER BY j.priority, j.run_at, j.id) AS rank
            FROM (SELECT j.id, j.priority, j.run_at FROM evora.jobs j
                  WHERE j.queue = queue_name AND j.concurrency_key = keys.k AND j.state = 'PENDING' AND j.run_at <= at
                    AND (types IS NULL OR array_position(types, j.type) IS NOT NULL)
                  ORDER BY j.priority, j.run_at, j.id
                  LIMIT least(f.free, room)) j
        ) o
        WHERE keys.k IS NOT NULL
        UNION ALL
        SELECT j.id, j.priority, j.run_at, row_number() OVER (ORDER BY j.priority, j.run_at, j.id)
        FROM (SELECT j.id, j.priority, j.run_at FROM evora.jobs j
              WHERE j.queue = queue_name AND j.state = 'PENDING' AND j.concurrency_key IS NULL AND j.run_at <= at
                AND (types IS NULL OR array_position(types, j.type) IS NOT NULL)
              ORDER BY j.priority, j.run_at, j.id
              LIMIT room) j
    )
    SELECT array_agg(o.id ORDER BY o.rank, o.priority, o.run_at, o.id) INTO v_ids
    FROM (SELECT * FROM offered ORDER BY rank, priority, run_at, id LIMIT room) o;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT j.id, j.priority, j.run_at FROM evora.jobs j
        WHERE j.id = ANY (v_ids) AND j.state = 'PENDING'
        FOR UPDATE SKIP LOCKED;
END
$$;

-- evora.submit_job with the job's concurrency key (NULL or '' = none; at most 255 bytes),
-- checked and compared on a replay as SubmitJob does. The new parameter comes after 0007's,
-- so calls by name or by position written for 0007 mean what they meant.
DROP FUNCTION evora.submit_job(text, text, jsonb, integer, timestamptz, integer, text,
                               evora.backoff_kind, interval, interval, double precision, interval);
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
    INSERT INTO evora.queues (name) VALUES (v_queue) ON CONFLICT (name) DO NOTHING;
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

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
CREATE FUNCTION evora.queue_pick_by_key(queue_name text, per_key integer, room bigint, at timestamptz, types text[])
    RETURNS TABLE (id uuid, priority integer, run_at timestamptz)
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

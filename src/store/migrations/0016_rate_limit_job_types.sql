-- A claim for some job types only (job-type routing: hello.job_types, ClaimJobsRequest.job_types)
-- takes rate-limit tokens only for the due jobs it may start. evora.queue_limit (0008) counted
-- the due jobs of every type, so a worker of type x on a queue whose waiting jobs are all of
-- type y took the tokens (up to the burst) and started nothing with them, and was told
-- next_token_at and woke to take the next token too: the y jobs started at a fraction of the
-- rate. Now the claim passes its types (NULL = any), and the count of due jobs reads only
-- those, as the claim's own scan does.
--
-- Must stay true (0008): only this function reads or writes the bucket, under the queue's
-- advisory lock held until the claim commits; tokens taken = min(room, whole tokens, due jobs
-- the claim may take), so a claim never takes a token for a job it could not start (but for a
-- row another transaction holds, skipped by SKIP LOCKED: that only under-admits).
CREATE FUNCTION evora.queue_limit(queue_name text, max_concurrency integer, rate double precision, burst integer,
                                  requested bigint, at timestamptz, types text[]) RETURNS evora.queue_limit_result
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    room bigint;
    next_token_at timestamptz;
    running bigint;
    due bigint;
    tokens double precision;
    refilled timestamptz;
    usable double precision;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('evora.queue_room:' || queue_name));
    room := requested;
    IF max_concurrency IS NOT NULL THEN
        SELECT count(*) INTO running FROM evora.jobs WHERE state = 'RUNNING' AND queue = queue_name;
        room := least(room, greatest(max_concurrency - running, 0));
    END IF;
    IF rate IS NULL OR room <= 0 THEN
        RETURN (room, NULL)::evora.queue_limit_result;
    END IF;
    SELECT q.rate_tokens, q.rate_refilled_at INTO tokens, refilled FROM evora.queues q WHERE q.name = queue_name;
    IF tokens IS NULL OR refilled IS NULL THEN
        tokens := burst;
        refilled := at;
    END IF;
    IF at >= refilled THEN
        tokens := least(burst::double precision, tokens + extract(epoch FROM at - refilled) * rate);
        refilled := at;
        usable := tokens;
    ELSE
        tokens := least(burst::double precision, tokens);
        usable := tokens - extract(epoch FROM refilled - at) * rate;
    END IF;
    -- The jobs the claim may take: array_position, not `= ANY`, as in the claim (job-claim.sql
    -- says why: the scan stays on jobs_claimable_idx).
    SELECT count(*) INTO due FROM (
        SELECT 1 FROM evora.jobs j
        WHERE j.state = 'PENDING' AND j.queue = queue_name AND j.run_at <= at
          AND (types IS NULL OR array_position(types, j.type) IS NOT NULL)
        ORDER BY j.priority, j.run_at, j.id
        LIMIT room
    ) d;
    room := least(room, due, greatest(floor(usable), 0)::bigint);
    tokens := tokens - room;
    UPDATE evora.queues SET rate_tokens = tokens, rate_refilled_at = refilled WHERE name = queue_name;
    IF room < due THEN
        -- Jobs wait for tokens (not for max_concurrency): the next whole token is due then.
        next_token_at := refilled + make_interval(secs => greatest(1 - tokens, 0) / rate);
    END IF;
    RETURN (room, next_token_at)::evora.queue_limit_result;
END
$$;

DROP FUNCTION evora.queue_limit(text, integer, double precision, integer, bigint, timestamptz);

-- Rate limits: job starts per second of a queue, across all servers (a token bucket).
--
-- A queue's rate limit is rate_per_second (NULL = none) and rate_burst (the bucket's size;
-- set exactly when rate_per_second is). The bucket's state is rate_tokens (tokens left at
-- rate_refilled_at; NULL = full, as a new or changed limit starts) and rate_refilled_at.
-- Only evora.queue_limit below reads or writes the bucket state, always under the queue's
-- advisory lock (the same key as evora.queue_room), so the claims of one limited queue, on
-- any server, see each other's takes (migration 0004 says why a plpgsql function is needed
-- for that: its statements take fresh snapshots after the lock is held).
ALTER TABLE evora.queues
    ADD COLUMN rate_per_second  double precision CHECK (rate_per_second IS NULL OR (rate_per_second > 0 AND rate_per_second < 'Infinity')),
    ADD COLUMN rate_burst       integer CHECK (rate_burst IS NULL OR rate_burst >= 1),
    ADD COLUMN rate_tokens      double precision,
    ADD COLUMN rate_refilled_at timestamptz,
    ADD CONSTRAINT queues_rate_burst_with_rate CHECK ((rate_per_second IS NULL) = (rate_burst IS NULL));

-- How many jobs a claim of a limited queue (max_concurrency and/or a rate limit) may start
-- now, at most `requested`, and, when the rate limit held jobs back, when its next token is
-- due (the dispatcher wakes the queue's claimer then: no polling while the bucket is empty).
--
-- room = least(requested, max_concurrency - RUNNING jobs, whole tokens, due PENDING jobs).
-- The tokens taken are that room: the due PENDING jobs are counted (at most `requested`,
-- along jobs_claimable_idx) so a claim does not burn tokens for jobs that are not there.
-- The claim's own scan may still find fewer (a row another transaction holds is skipped):
-- then a token is lost, which only ever under-admits.
--
-- `at` is the claim's time, the one it stamps on started_at. Claims on several servers may
-- take the lock out of order of their times: a claim whose `at` is before the last refill
-- may only take tokens the bucket already held at `at` (its tokens less what accrued since),
-- so in every window of started_at the starts never exceed burst + rate × window.
-- Must stay true: the claim calls this only for queues with a limit (an unlimited queue
-- takes no lock); it runs inside the claim's transaction, whose commit releases the lock
-- after its jobs are RUNNING; the hand-off never happens for a limited queue.
-- A named type: the claim reads the fields of a value computed in a CASE (an anonymous record
-- there has no known type).
CREATE TYPE evora.queue_limit_result AS (room bigint, next_token_at timestamptz);
CREATE FUNCTION evora.queue_limit(queue_name text, max_concurrency integer, rate double precision, burst integer,
                                  requested bigint, at timestamptz) RETURNS evora.queue_limit_result
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
    SELECT count(*) INTO due FROM (
        SELECT 1 FROM evora.jobs j
        WHERE j.state = 'PENDING' AND j.queue = queue_name AND j.run_at <= at
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

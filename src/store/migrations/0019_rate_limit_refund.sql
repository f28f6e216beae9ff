-- A claim gives back the rate-limit tokens it took but did not use. evora.queue_limit (0016)
-- takes tokens for a queue's due jobs before the claim picks them, and the claim may then
-- start fewer: a claim of several queues (ClaimJobs with several queues) keeps only its
-- best :limit jobs across them, so a rate-limited queue whose jobs lost to better ones
-- elsewhere paid tokens for nothing (a worker polling it with a busier queue starved it far
-- below its rate); a per-key queue's picks stop at each key's free slots; a row another
-- transaction holds is skipped. job-claim-limited.sql now calls this function with
-- (tokens taken − jobs started) for each rate-limited queue, in the same statement, after
-- its jobs are claimed.
--
-- Must stay true (0008): the bucket is written only under the queue's advisory lock, which
-- the claim took in evora.queue_limit and holds until it commits (taken again here:
-- re-entrant); giving back tokens that started nothing leaves the bucket as it would be had
-- they not been taken (capped at burst, as a refill is), so starts stay within
-- burst + rate × window.
CREATE FUNCTION evora.queue_rate_refund(queue_name text, unused bigint) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF unused IS NULL OR unused <= 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('evora.queue_room:' || queue_name));
    UPDATE evora.queues q
    SET rate_tokens = least(q.rate_burst::double precision, q.rate_tokens + unused)
    WHERE q.name = queue_name AND q.rate_per_second IS NOT NULL AND q.rate_tokens IS NOT NULL;
END
$$;

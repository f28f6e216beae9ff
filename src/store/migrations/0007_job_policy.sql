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
-- callers (evora.submit_job) resolve to this one through the default, and record
-- backoff and timeout as unset: evora.submit_job takes the queue's policy.
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

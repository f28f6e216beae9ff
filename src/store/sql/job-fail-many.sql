-- name: jobFailMany
-- Fails the jobs whose leases are current. Retryable with attempts left: back to PENDING at
-- :retryAts[i], or after the queue's backoff; otherwise DLQ with the error kept; a job an
-- operator asked to cancel becomes CANCELLED (evora.job_state_after_failure decides, as
-- for the sweeper). One event per job by where it went (failed_retrying, dead_lettered,
-- cancelled) with its run time; wakes each queue that has a job due now again.
-- Must stay true: the leased rows are locked first (FOR UPDATE returns their latest
-- version), each next state is decided from that version, then written. One report per
-- lease (DISTINCT ON); "RUNNING" as a CASE (see job-heartbeat-many.sql). Each failed attempt
-- leaves its history row (evora.job_attempts, 0012_progress_attempts.sql) in the same statement.
WITH input AS (
  SELECT DISTINCT ON (id, token) *
  FROM unnest(:ids::uuid[], :tokens::uuid[], :errors::text[], :retryables::bool[], :retryAts::timestamptz[])
    AS f(id, token, error, retryable, retry_at)
),
locked AS (
  SELECT j.id, f.error, f.retry_at,
         evora.job_state_after_failure(j.cancel_requested_at IS NOT NULL, f.retryable, j.attempt, j.max_attempts) AS next_state,
         -- The job's own backoff (0007_job_policy.sql), field by field over its queue's.
         evora.backoff_seconds(coalesce(j.backoff_kind, q.backoff_kind), coalesce(j.backoff_base_seconds, q.backoff_base_seconds),
                               coalesce(j.backoff_cap_seconds, q.backoff_cap_seconds), coalesce(j.backoff_jitter, q.backoff_jitter),
                               j.attempt, random()) AS backoff
  FROM input f
  JOIN evora.jobs j ON j.id = f.id
  JOIN evora.queues q ON q.name = j.queue
  WHERE j.lease_token = f.token AND (CASE WHEN j.state = 'RUNNING' THEN true END)
  FOR UPDATE OF j
),
updated AS (
  UPDATE evora.jobs j
  SET state = l.next_state,
      run_at = CASE WHEN l.next_state = 'PENDING'
                    THEN coalesce(l.retry_at, coalesce(:now::timestamptz, now()) + make_interval(secs => l.backoff))
                    ELSE j.run_at END,
      last_error = l.error,
      locked_until = NULL,
      finished_at = CASE WHEN l.next_state = 'PENDING' THEN NULL ELSE coalesce(:now::timestamptz, now()) END
  FROM locked l
  WHERE j.id = l.id
  RETURNING j.*
),
attempts AS (
  -- The attempt's history row (evora.job_attempts): CANCELLED when an operator's cancel
  -- ended it, else FAILED, with the worker's error.
  INSERT INTO evora.job_attempts (job_id, attempt, worker_id, started_at, finished_at, outcome, error)
  SELECT id, attempt, worker_id, started_at, coalesce(:now::timestamptz, now()),
         (CASE WHEN state = 'CANCELLED' THEN 'CANCELLED' ELSE 'FAILED' END)::evora.attempt_outcome, last_error
  FROM updated
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(coalesce(:now::timestamptz, now())), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg((CASE state
                      WHEN 'PENDING' THEN 'failed_retrying'
                      WHEN 'DLQ' THEN 'dead_lettered'
                      ELSE 'cancelled' END)::evora.job_event_kind),
         array_agg('RUNNING'::evora.job_state), array_agg(state),
         array_agg(attempt), array_agg(worker_id),
         array_agg(NULL::float8), array_agg((extract(epoch FROM coalesce(:now::timestamptz, now()) - started_at) * 1000)::float8)
  FROM updated
  HAVING count(*) > 0
),
woken AS (
  -- A queue with a job claimable now, or a limited queue (max_concurrency) one of whose
  -- RUNNING jobs left: its claimers, idle while it was full, claim the freed room.
  SELECT pg_notify('evora_job_available', d.queue)
  FROM (SELECT queue, bool_or(state = 'PENDING' AND run_at <= coalesce(:now::timestamptz, now())) AS due
        FROM updated GROUP BY queue) d
  WHERE d.due OR EXISTS (SELECT 1 FROM evora.queues q WHERE q.name = d.queue
                                 AND (q.max_concurrency IS NOT NULL OR q.max_concurrency_per_key IS NOT NULL))
)
SELECT * FROM updated WHERE (SELECT count(*) FROM woken) >= 0

-- name: jobSweepTimedOut
-- One batch of the timeout sweep: up to :limit RUNNING jobs whose attempt ran past its
-- deadline (started_at + the job's timeout_seconds, 0007_job_policy.sql), oldest start
-- first, fail as a retryable failure does: back to PENDING after the job's (or queue's)
-- backoff, to DLQ when their attempts are used up, or to CANCELLED when an operator asked
-- for that, with last_error "attempt timed out after <timeout>". The events are a failure's
-- (failed_retrying, dead_lettered, cancelled) with the run time; wakes each queue that has a
-- job due now again; tells the holder's server on evora_job_cancel with the payload
-- "<id> timeout" (Dispatcher.notifyCancel), which pushes ServerCancel code TIMEOUT.
-- Must stay true: heartbeats do not move the deadline (it is computed from started_at);
-- SKIP LOCKED lets a worker's concurrent report win the row; the attempt was already
-- counted at claim time; the lease token is left as it is, but the job is no longer
-- RUNNING under it, so any later report is answered lease_lost. The scan walks
-- jobs_running_timeout_idx (only RUNNING jobs that have a timeout).
WITH timed_out AS (
  SELECT j.id, j.timeout_seconds,
         evora.job_state_after_failure(j.cancel_requested_at IS NOT NULL, true, j.attempt, j.max_attempts) AS next_state,
         evora.backoff_seconds(coalesce(j.backoff_kind, q.backoff_kind), coalesce(j.backoff_base_seconds, q.backoff_base_seconds),
                               coalesce(j.backoff_cap_seconds, q.backoff_cap_seconds), coalesce(j.backoff_jitter, q.backoff_jitter),
                               j.attempt, random()) AS backoff
  FROM evora.jobs j
  JOIN evora.queues q ON q.name = j.queue
  WHERE j.state = 'RUNNING' AND j.timeout_seconds IS NOT NULL
    AND j.started_at + make_interval(secs => j.timeout_seconds) <= coalesce(:now::timestamptz, now())
  ORDER BY j.started_at
  LIMIT :limit
  FOR UPDATE OF j SKIP LOCKED
),
updated AS (
  UPDATE evora.jobs j
  SET state = t.next_state,
      run_at = CASE WHEN t.next_state = 'PENDING'
                    THEN coalesce(:now::timestamptz, now()) + make_interval(secs => t.backoff)
                    ELSE j.run_at END,
      last_error = 'attempt timed out after ' || t.timeout_seconds::numeric::text || 's',
      locked_until = NULL,
      finished_at = CASE WHEN t.next_state = 'PENDING' THEN NULL ELSE coalesce(:now::timestamptz, now()) END
  FROM timed_out t
  WHERE j.id = t.id
  RETURNING j.*
),
attempts AS (
  -- The attempt's history row (evora.job_attempts): TIMED_OUT, or CANCELLED when an operator
  -- had asked for that, with last_error as its error.
  INSERT INTO evora.job_attempts (job_id, attempt, worker_id, started_at, finished_at, outcome, error)
  SELECT id, attempt, worker_id, started_at, coalesce(:now::timestamptz, now()),
         (CASE WHEN state = 'CANCELLED' THEN 'CANCELLED' ELSE 'TIMED_OUT' END)::evora.attempt_outcome, last_error
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
  -- As job-sweep-expired.sql: a queue with a job due now, or a limited queue that has room again.
  SELECT pg_notify('evora_job_available', d.queue)
  FROM (SELECT queue, bool_or(state = 'PENDING' AND run_at <= coalesce(:now::timestamptz, now())) AS due
        FROM updated GROUP BY queue) d
  WHERE d.due OR EXISTS (SELECT 1 FROM evora.queues q WHERE q.name = d.queue
                                 AND (q.max_concurrency IS NOT NULL OR q.max_concurrency_per_key IS NOT NULL))
),
told AS (
  SELECT pg_notify('evora_job_cancel', u.id::text || ' timeout') FROM updated u
)
SELECT * FROM updated WHERE (SELECT count(*) FROM woken) + (SELECT count(*) FROM told) >= 0

-- name: jobSweepExpired
-- One batch of the visibility sweep: up to :limit RUNNING jobs whose lease expired, oldest
-- expiry first, go back to PENDING after their queue's backoff, to DLQ when their attempts
-- are used up, or to CANCELLED when an operator asked for that. One event per job
-- (lease_expired, dead_lettered, cancelled) with its run time; wakes each queue that has a
-- job due now again.
-- Must stay true: SKIP LOCKED lets a worker's concurrent complete win the row; the attempt
-- was already counted at claim time. The scan walks jobs_running_lease_idx by expiry.
-- :reachableSince is since when the sweeper has reached the database without a break, and
-- :tickAt when it last did, both by this database's clock (NULL: no bound). A lease is swept
-- only once that run covers its queue's lease length: after an outage (or a new leader, or
-- a stalled one) every lease gets one lease length for its worker to renew it, as a
-- worker's heartbeat during the outage could not. A statement that starts more than
-- :maxGapSeconds after :tickAt waited through a break (a frozen database, a stalled
-- connection) and sweeps nothing. The rows held back are read past, not locked, and do not
-- count toward :limit.
WITH expired AS (
  SELECT j.id,
         evora.job_state_after_failure(j.cancel_requested_at IS NOT NULL, true, j.attempt, j.max_attempts) AS next_state,
         -- The job's own backoff (0007_job_policy.sql), field by field over its queue's.
         evora.backoff_seconds(coalesce(j.backoff_kind, q.backoff_kind), coalesce(j.backoff_base_seconds, q.backoff_base_seconds),
                               coalesce(j.backoff_cap_seconds, q.backoff_cap_seconds), coalesce(j.backoff_jitter, q.backoff_jitter),
                               j.attempt, random()) AS backoff
  FROM evora.jobs j
  JOIN evora.queues q ON q.name = j.queue
  WHERE j.state = 'RUNNING' AND j.locked_until < coalesce(:now::timestamptz, now())
    AND (:reachableSince::timestamptz IS NULL
         OR (coalesce(:now::timestamptz, now()) - :reachableSince::timestamptz >= make_interval(secs => q.lease_seconds)
             AND coalesce(:now::timestamptz, now()) - :tickAt::timestamptz <= make_interval(secs => :maxGapSeconds::float8)))
  ORDER BY j.locked_until
  LIMIT :limit
  FOR UPDATE OF j SKIP LOCKED
),
updated AS (
  UPDATE evora.jobs j
  SET state = e.next_state,
      run_at = CASE WHEN e.next_state = 'PENDING'
                    THEN coalesce(:now::timestamptz, now()) + make_interval(secs => e.backoff)
                    ELSE j.run_at END,
      last_error = 'lease expired (worker ' || coalesce(j.worker_id, 'unknown') || ')',
      locked_until = NULL,
      finished_at = CASE WHEN e.next_state = 'PENDING' THEN NULL ELSE coalesce(:now::timestamptz, now()) END
  FROM expired e
  WHERE j.id = e.id
  RETURNING j.*
),
attempts AS (
  -- The attempt's history row (evora.job_attempts): LEASE_EXPIRED, or CANCELLED when an operator
  -- had asked for that, with last_error as its error.
  INSERT INTO evora.job_attempts (job_id, attempt, worker_id, started_at, finished_at, outcome, error)
  SELECT id, attempt, worker_id, started_at, coalesce(:now::timestamptz, now()),
         (CASE WHEN state = 'CANCELLED' THEN 'CANCELLED' ELSE 'LEASE_EXPIRED' END)::evora.attempt_outcome, last_error
  FROM updated
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(coalesce(:now::timestamptz, now())), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg((CASE state
                      WHEN 'PENDING' THEN 'lease_expired'
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

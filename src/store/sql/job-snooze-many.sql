-- name: jobSnoozeMany
-- Puts leased jobs back to PENDING at :runAts[i] (NULL: now, by the database's clock, so the
-- job is claimable at once and its queue is woken) without using up an attempt: the job did
-- not fail, it asked to run later. A job an operator asked to cancel becomes CANCELLED
-- instead. One event per job (snoozed or cancelled) with its run time; wakes each queue
-- that has a job due now again.
-- Must stay true: locked first, then decided and written (as job-fail-many.sql); one
-- report per lease (DISTINCT ON); "RUNNING" as a CASE (see job-heartbeat-many.sql). Each
-- snoozed attempt leaves its history row (evora.job_attempts) in the same statement.
WITH input AS (
  SELECT DISTINCT ON (id, token) * FROM unnest(:ids::uuid[], :tokens::uuid[], :runAts::timestamptz[]) AS s(id, token, run_at)
),
locked AS (
  SELECT j.id, j.attempt AS ran_attempt, coalesce(s.run_at, coalesce(:now::timestamptz, now())) AS run_at,
         CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'CANCELLED'::evora.job_state
              ELSE 'PENDING'::evora.job_state END AS next_state
  FROM input s JOIN evora.jobs j ON j.id = s.id
  WHERE j.lease_token = s.token AND (CASE WHEN j.state = 'RUNNING' THEN true END)
  FOR UPDATE OF j
),
updated AS (
  UPDATE evora.jobs j
  SET state = l.next_state,
      run_at = CASE WHEN l.next_state = 'PENDING' THEN l.run_at ELSE j.run_at END,
      attempt = CASE WHEN l.next_state = 'PENDING' THEN greatest(j.attempt - 1, 0) ELSE j.attempt END,
      locked_until = NULL,
      finished_at = CASE WHEN l.next_state = 'PENDING' THEN NULL ELSE coalesce(:now::timestamptz, now()) END
  FROM locked l
  WHERE j.id = l.id
  RETURNING j.*
),
attempts AS (
  -- The attempt's history row: SNOOZED (or CANCELLED), numbered as it ran (the snooze gives
  -- the attempt back, so the next attempt has the same number).
  INSERT INTO evora.job_attempts (job_id, attempt, worker_id, started_at, finished_at, outcome, error)
  SELECT u.id, l.ran_attempt, u.worker_id, u.started_at, coalesce(:now::timestamptz, now()),
         (CASE WHEN u.state = 'CANCELLED' THEN 'CANCELLED' ELSE 'SNOOZED' END)::evora.attempt_outcome, NULL
  FROM updated u JOIN locked l ON l.id = u.id
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(coalesce(:now::timestamptz, now())), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg((CASE state WHEN 'PENDING' THEN 'snoozed' ELSE 'cancelled' END)::evora.job_event_kind),
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

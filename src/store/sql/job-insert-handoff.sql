-- name: jobInsertHandoff
-- Submits one job and, when a claim would pick it now, hands it straight to
-- :handoffWorkerId (a worker of the submitting server with a free slot) in this statement:
-- its queue exists, is not paused and has no max_concurrency nor rate limit (a limited queue's jobs are
-- claimed: only the claim counts RUNNING jobs under the queue's lock), it is due, and no
-- claimable job waits in the queue.
-- Such a job is created RUNNING under a fresh lease (the schema allows that only as a
-- claim leaves a job: attempt 1, a worker, a start time), records two events, submitted
-- then claimed, and wakes no one; otherwise it is inserted PENDING as jobInsertMany does.
-- Must stay true: the job comes as scalars, not arrays. Over arrays the plan cache never
-- settled on a generic plan (it costs an `unnest` of a parameter at ten rows) and planned
-- every submit again, 1.2 ms of a 2 ms statement (test/store/plans.test.ts checks it
-- settles). The "first job a claim would take" probe walks the claimable index like a
-- claim: an EXISTS gets planned as a scan of every queue's waiting jobs once there are many.
-- new_queues: the queue rows of the submit, made when missing (evora.queues_ensure, 0025):
-- it takes the shared advisory lock of each distinct queue (class 7301847, the name's
-- hashtext) until the transaction ends, which DeleteQueue takes exclusively
-- (queue-delete-lock.sql), and then looks for the rows in a snapshot of its own, taken after
-- the locks: a submit that waited for a delete makes the row again (a NOT EXISTS on this
-- statement's snapshot would still see the deleted row, and a job without its queue row is
-- never claimed: job-claim.sql joins evora.queues). Only a missing row is inserted, so a
-- submit never waits for a transaction that updates the row (a rate-limited claim, an
-- upsert), as an ON CONFLICT check would. A queue whose row this submit made takes that
-- row's defaults (the join on `q` skips it), not the settings of a row this statement's
-- snapshot still shows (one a delete removed while the submit waited for its lock).
-- (Here in the header, not beside the CTE: comments in the body are sent with the statement,
-- and pg_stat_activity shows only its first 1,024 characters.)
WITH input AS (
  SELECT :id::uuid AS id, :queue::text AS queue, :type::text AS type, :payload::jsonb AS payload, :priority::int AS priority,
         :runAt::timestamptz AS run_at, :idempotencyKey::text AS idempotency_key, :maxAttempts::int AS max_attempts,
         :policy::jsonb AS policy
),
new_queues AS MATERIALIZED (
  SELECT e.name, e.max_attempts FROM evora.queues_ensure(ARRAY(SELECT DISTINCT i.queue FROM input i)) e
),
inserted AS (
  INSERT INTO evora.jobs (id, queue, type, payload, priority, run_at, idempotency_key, max_attempts, submitted, created_at,
                          backoff_kind, backoff_base_seconds, backoff_cap_seconds, backoff_jitter, timeout_seconds, concurrency_key,
                          state, attempt, lease_token, locked_until, worker_id, started_at)
  SELECT i.id, i.queue, i.type, i.payload, i.priority,
         coalesce(i.run_at, coalesce(:now::timestamptz, now())),
         i.idempotency_key,
         coalesce(i.max_attempts, nq.max_attempts, q.max_attempts),
         CASE WHEN i.idempotency_key IS NOT NULL THEN evora.job_submitted_fields(i.priority, i.run_at, i.max_attempts, i.policy) END,
         coalesce(:now::timestamptz, now()),
         (i.policy -> 'backoff' ->> 'kind')::evora.backoff_kind,
         (i.policy -> 'backoff' ->> 'base')::float8,
         (i.policy -> 'backoff' ->> 'cap')::float8,
         (i.policy -> 'backoff' ->> 'jitter')::float8,
         coalesce((i.policy ->> 'timeout')::float8, q.attempt_timeout_seconds),
         i.policy ->> 'concurrency_key',
         (CASE WHEN h.lease_seconds IS NULL THEN 'PENDING' ELSE 'RUNNING' END)::evora.job_state,
         CASE WHEN h.lease_seconds IS NULL THEN 0 ELSE 1 END,
         CASE WHEN h.lease_seconds IS NOT NULL THEN gen_random_uuid() END,
         coalesce(:now::timestamptz, now()) + make_interval(secs => h.lease_seconds),
         CASE WHEN h.lease_seconds IS NOT NULL THEN :handoffWorkerId::text END,
         CASE WHEN h.lease_seconds IS NOT NULL THEN coalesce(:now::timestamptz, now()) END
  FROM input i
  LEFT JOIN new_queues nq ON nq.name = i.queue
  LEFT JOIN evora.queues q ON q.name = i.queue AND nq.name IS NULL
  -- The hand-off's conditions, on the queue row the insert already joined (none for a new queue).
  LEFT JOIN LATERAL (
    SELECT q.lease_seconds
    WHERE NOT q.paused
      -- A limited queue's jobs go through the claim, which counts its RUNNING jobs under a lock.
      AND q.max_concurrency IS NULL
      AND q.rate_per_second IS NULL -- a rate-limited queue's starts are counted by the claim only
      AND q.max_concurrency_per_key IS NULL -- per-key limits are counted by the claim only (0009)
      AND coalesce(i.run_at, coalesce(:now::timestamptz, now())) <= coalesce(:now::timestamptz, now())
      AND (
        -- The first job a claim would take, looked up the way a claim walks the index.
        SELECT j.id FROM evora.jobs j
        WHERE j.state = 'PENDING' AND j.queue = i.queue AND j.run_at <= coalesce(:now::timestamptz, now())
        ORDER BY j.priority, j.run_at, j.id
        LIMIT 1
      ) IS NULL
  ) h ON true
  ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
  RETURNING *
),
changes AS (
  SELECT id, queue, type, 'submitted'::evora.job_event_kind AS kind, NULL::evora.job_state AS from_state,
         'PENDING'::evora.job_state AS state, 0 AS attempt, NULL::text AS worker_id, created_at AS at,
         NULL::float8 AS wait_ms
  FROM inserted
  UNION ALL
  SELECT id, queue, type, 'claimed', 'PENDING', state, attempt, worker_id, started_at,
         extract(epoch FROM started_at - run_at) * 1000
  FROM inserted WHERE state = 'RUNNING'
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(at), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg(kind::evora.job_event_kind), array_agg(from_state::evora.job_state), array_agg(state),
         array_agg(attempt), array_agg(worker_id),
         array_agg(wait_ms::float8), array_agg(NULL::float8)
  FROM changes
  HAVING count(*) > 0
),
woken AS (
  SELECT pg_notify('evora_job_available', d.queue)
  FROM (SELECT DISTINCT queue FROM inserted WHERE state = 'PENDING' AND run_at <= coalesce(:now::timestamptz, now())) d
)
SELECT * FROM inserted WHERE (SELECT count(*) FROM woken) >= 0

-- name: jobInsertGraph
-- Submits jobs with dependencies (0011_dependencies.sql), as jobInsertMany does (arrays, one
-- element per job; a `submitted` event each; new queues created; a job whose (queue,
-- idempotency key) exists is skipped and not returned), plus each job's parents
-- (:parentIds, a JSON array of ids or NULL), its first state (:states: WAITING while a
-- parent is unfinished, else PENDING; the store decides from job-parents-lock.sql's answer
-- in the same transaction) and whether a job of the batch names it as a parent
-- (:hasDependents). Only PENDING jobs due now wake their queue.
-- Must stay true: used only for batches with dependencies, in the transaction that locked
-- the existing parents; jobs without dependencies keep jobInsertMany and its plan.
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
  SELECT *
  FROM unnest(:ids::uuid[], :queues::text[], :types::text[], :payloads::jsonb[], :priorities::int[],
              :runAts::timestamptz[], :idempotencyKeys::text[], :maxAttempts::int[], :policies::jsonb[],
              :states::evora.job_state[], :parentIds::jsonb[], :hasDependents::bool[])
    AS i(id, queue, type, payload, priority, run_at, idempotency_key, max_attempts, policy, state, parents, has_dependents)
),
new_queues AS MATERIALIZED (
  SELECT e.name, e.max_attempts FROM evora.queues_ensure(ARRAY(SELECT DISTINCT i.queue FROM input i)) e
),
inserted AS (
  INSERT INTO evora.jobs (id, queue, type, payload, priority, run_at, idempotency_key, max_attempts, submitted, created_at,
                          backoff_kind, backoff_base_seconds, backoff_cap_seconds, backoff_jitter, timeout_seconds, concurrency_key,
                          state, parent_ids, has_dependents)
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
         i.state,
         CASE WHEN i.parents IS NOT NULL THEN ARRAY(SELECT jsonb_array_elements_text(i.parents)::uuid) END,
         i.has_dependents
  FROM input i
  LEFT JOIN new_queues nq ON nq.name = i.queue
  LEFT JOIN evora.queues q ON q.name = i.queue AND nq.name IS NULL
  ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
  RETURNING *
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(created_at), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg('submitted'::evora.job_event_kind), array_agg(NULL::evora.job_state), array_agg(state),
         array_agg(attempt), array_agg(worker_id),
         array_agg(NULL::float8), array_agg(NULL::float8)
  FROM inserted
  HAVING count(*) > 0
),
woken AS (
  SELECT pg_notify('evora_job_available', d.queue)
  FROM (SELECT DISTINCT queue FROM inserted WHERE state = 'PENDING' AND run_at <= coalesce(:now::timestamptz, now())) d
)
SELECT * FROM inserted WHERE (SELECT count(*) FROM woken) >= 0

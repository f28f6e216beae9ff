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
WITH input AS (
  SELECT *
  FROM unnest(:ids::uuid[], :queues::text[], :types::text[], :payloads::jsonb[], :priorities::int[],
              :runAts::timestamptz[], :idempotencyKeys::text[], :maxAttempts::int[], :policies::jsonb[],
              :states::evora.job_state[], :parentIds::jsonb[], :hasDependents::bool[])
    AS i(id, queue, type, payload, priority, run_at, idempotency_key, max_attempts, policy, state, parents, has_dependents)
),
-- Each queue of the submit under a shared advisory lock (class 7301847, the queue's hashtext),
-- one per distinct queue, held until the transaction ends: DeleteQueue takes it exclusively
-- (queue-delete-lock.sql), so it either waits for this submit to commit and then finds its
-- jobs, or this submit waits for the delete to commit and makes the row again here. So the
-- row is inserted after the lock and checked by ON CONFLICT alone, which sees rows committed
-- since this statement's snapshot: a NOT EXISTS on that snapshot would still see the row
-- the delete removed and leave the jobs without one (a job without its queue row is never
-- claimed: job-claim.sql joins evora.queues).
locked AS MATERIALIZED (
  SELECT d.queue, pg_advisory_xact_lock_shared(7301847, hashtext(d.queue))::text AS locked
  FROM (SELECT DISTINCT i.queue FROM input i) d
),
new_queues AS (
  INSERT INTO evora.queues (name)
  SELECT l.queue FROM locked l
  ON CONFLICT (name) DO NOTHING
  RETURNING name, max_attempts
),
inserted AS (
  INSERT INTO evora.jobs (id, queue, type, payload, priority, run_at, idempotency_key, max_attempts, submitted, created_at,
                          backoff_kind, backoff_base_seconds, backoff_cap_seconds, backoff_jitter, timeout_seconds, concurrency_key,
                          state, parent_ids, has_dependents)
  SELECT i.id, i.queue, i.type, i.payload, i.priority,
         coalesce(i.run_at, coalesce(:now::timestamptz, now())),
         i.idempotency_key,
         coalesce(i.max_attempts, q.max_attempts, nq.max_attempts),
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
  LEFT JOIN evora.queues q ON q.name = i.queue
  LEFT JOIN new_queues nq ON nq.name = i.queue
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

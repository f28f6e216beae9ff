-- name: jobWaitingRepair
-- The sweeper's repair pass for dependencies (0011_dependencies.sql): up to :limit WAITING
-- jobs none of whose parents is unfinished (all COMPLETED, or pruned since) become PENDING,
-- due no earlier than now, with a `released` event each, and their queues are woken. The
-- parents' trigger does this as the last parent completes; this pass only catches a job that
-- slipped through (none is expected), so nothing stays WAITING for ever.
-- Must stay true: COMPLETED is final, so a parent seen COMPLETED in this statement's snapshot
-- stays so; rows another transaction holds are skipped (the next tick sees them).
WITH candidates AS (
  SELECT c.id
  FROM evora.jobs c
  WHERE c.state = 'WAITING'
    AND NOT EXISTS (SELECT 1 FROM evora.jobs p WHERE p.id = ANY (c.parent_ids) AND p.state <> 'COMPLETED')
  ORDER BY c.id
  LIMIT :limit
  FOR NO KEY UPDATE SKIP LOCKED
),
released AS (
  UPDATE evora.jobs j
  SET state = 'PENDING', run_at = greatest(j.run_at, coalesce(:now::timestamptz, now()))
  FROM candidates c
  WHERE j.id = c.id AND j.state = 'WAITING'
  RETURNING j.id, j.queue, j.type, j.attempt, j.run_at
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT coalesce(:now::timestamptz, now()), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg('released'::evora.job_event_kind), array_agg('WAITING'::evora.job_state), array_agg('PENDING'::evora.job_state),
         array_agg(attempt), array_agg(NULL::text), array_agg(NULL::float8), array_agg(NULL::float8)
  FROM released
  HAVING count(*) > 0
),
woken AS (
  SELECT pg_notify('evora_job_available', d.queue)
  FROM (SELECT DISTINCT queue FROM released WHERE run_at <= coalesce(:now::timestamptz, now())) d
)
SELECT id FROM released WHERE (SELECT count(*) FROM woken) >= 0

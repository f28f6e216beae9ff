-- name: jobCompleteMany
-- Completes the jobs whose leases are current (token matches, RUNNING), storing each
-- result; one `completed` event per job with its run time. Returns the columns a
-- JobWritten needs, and the token, so the caller can tell which input was accepted.
-- Must stay true: one report per lease (DISTINCT ON (id, token)): a stale and a fresh
-- report of one job in the same batch are both kept, and only the fresh token matches.
-- A completed job has no error: last_error is cleared here (earlier attempts' errors are in
-- evora.job_attempts); the completion writes nothing else (no history row).
-- "RUNNING" is written as a CASE so the rows are found by primary key (see
-- job-heartbeat-many.sql; test/store/plans.test.ts).
-- No NOTIFY here: a completion of a limited queue's job frees room, and the store wakes
-- that queue's claimers with queue-wake.sql after this commits (jobs-lease.ts), so queues
-- without limits pay nothing for it.
WITH input AS (
  SELECT * FROM unnest(:ids::uuid[], :tokens::uuid[], :results::jsonb[]) AS c(id, token, result)
),
updated AS (
  UPDATE evora.jobs j
  SET state = 'COMPLETED',
      result = c.result,
      last_error = NULL,
      locked_until = NULL,
      finished_at = coalesce(:now::timestamptz, now())
  FROM input c
  WHERE j.id = c.id AND j.lease_token = c.token AND (CASE WHEN j.state = 'RUNNING' THEN true END)
  RETURNING j.id, j.lease_token, j.queue, j.type, j.state, j.attempt, j.worker_id, j.last_error, j.started_at, j.finished_at
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(finished_at), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg('completed'::evora.job_event_kind), array_agg('RUNNING'::evora.job_state), array_agg(state),
         array_agg(attempt), array_agg(worker_id),
         array_agg(NULL::float8), array_agg((extract(epoch FROM finished_at - started_at) * 1000)::float8)
  FROM updated
  HAVING count(*) > 0
)
SELECT id, lease_token, queue, type, state, attempt, worker_id, last_error FROM updated

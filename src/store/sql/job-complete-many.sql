-- name: jobCompleteMany
-- Completes the jobs whose leases are current (token matches, RUNNING), storing each
-- result; one `completed` event per job with its run time. Returns what a JobWritten needs
-- but its state (COMPLETED) and last_error (NULL), and the token, so the caller can tell
-- which input was accepted.
-- Must stay true: one report per lease (DISTINCT ON (id, token)): a stale and a fresh
-- report of one job in the same batch are both kept, and only the fresh token matches.
-- A completed job has no error: last_error is cleared here (earlier attempts' errors are in
-- evora.job_attempts); the completion writes nothing else (no history row).
-- "RUNNING" is written as a CASE so the rows are found by primary key (see
-- job-heartbeat-many.sql; test/store/plans.test.ts).
-- A job of a queue with delete_on_complete (0015) and no dependents is deleted instead of
-- updated, with its attempt history; its event and its row here are the same as an updated
-- job's (its state in the event is COMPLETED).
-- Must stay true for the deletion:
-- - the deletes run first and to the end (the update's input leaves out their ids, read
--   whole into a hash before the first row), so no row is both deleted and updated;
-- - a job that gained a dependent while this statement waited for its row is updated, not
--   deleted: the delete rechecks has_dependents on the row's newest version and skips it,
--   and the update's filter does not read has_dependents, so it rechecks and takes it;
-- - a queue without the setting costs a look at the queues that delete (a partial index of
--   evora.queues, empty when none does; 0015), and an empty `deleting` gates the delete's
--   scan off.
-- No NOTIFY here: a completion of a limited queue's job frees room, and the store wakes
-- that queue's claimers with queue-wake.sql after this commits (jobs-lease.ts), so queues
-- without limits pay nothing for it.
WITH input AS (
  SELECT DISTINCT ON (id, token) * FROM unnest(:ids::uuid[], :tokens::uuid[], :results::jsonb[]) AS c(id, token, result)
),
deleting AS (
  SELECT name FROM evora.queues WHERE delete_on_complete
),
deleted AS (
  DELETE FROM evora.jobs j
  USING input c
  WHERE EXISTS (SELECT 1 FROM deleting)
    AND j.id = c.id AND j.lease_token = c.token AND (CASE WHEN j.state = 'RUNNING' THEN true END)
    AND j.queue = ANY (ARRAY(SELECT name FROM deleting)) AND NOT j.has_dependents
  RETURNING j.id, j.lease_token, j.queue, j.type, 'COMPLETED'::evora.job_state AS state, j.attempt, j.worker_id,
            j.started_at, coalesce(:now::timestamptz, now()) AS finished_at
),
attempts_deleted AS (
  -- Their attempt history (evora.job_attempts has no foreign key: see 0012_progress_attempts.sql;
  -- a snoozed attempt leaves a row without using up an attempt, so any job may have one).
  DELETE FROM evora.job_attempts a
  WHERE a.job_id = ANY (ARRAY(SELECT id FROM deleted))
),
kept AS (
  -- The input the deletes did not take (a hashed anti-join over their ids).
  SELECT * FROM input c WHERE c.id NOT IN (SELECT id FROM deleted)
),
updated AS (
  UPDATE evora.jobs j
  SET state = 'COMPLETED',
      result = c.result,
      last_error = NULL,
      locked_until = NULL,
      finished_at = coalesce(:now::timestamptz, now())
  FROM kept c
  WHERE j.id = c.id AND j.lease_token = c.token AND (CASE WHEN j.state = 'RUNNING' THEN true END)
  RETURNING j.id, j.lease_token, j.queue, j.type, j.state, j.attempt, j.worker_id, j.started_at, j.finished_at
),
completed AS (
  SELECT * FROM deleted
  UNION ALL
  SELECT * FROM updated
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(finished_at), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg('completed'::evora.job_event_kind), array_agg('RUNNING'::evora.job_state), array_agg(state),
         array_agg(attempt), array_agg(worker_id),
         array_agg(NULL::float8), array_agg((extract(epoch FROM finished_at - started_at) * 1000)::float8)
  FROM completed
  HAVING count(*) > 0
)
SELECT id, lease_token, queue, type, attempt, worker_id FROM completed

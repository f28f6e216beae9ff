-- name: jobRetry
-- An operator's manual retry: a DLQ or CANCELLED job goes back to PENDING, due now, with
-- its attempts reset and its last run forgotten (lease, worker, result, times; the last
-- error stays). One `retried_manually` event; wakes its queue. No row for any other state.
WITH previous AS (
  SELECT id, state FROM evora.jobs WHERE id = :id AND state IN ('DLQ', 'CANCELLED') FOR UPDATE
),
updated AS (
  UPDATE evora.jobs j
  SET state = 'PENDING',
      attempt = 0,
      run_at = coalesce(:now::timestamptz, now()),
      lease_token = NULL,
      locked_until = NULL,
      worker_id = NULL,
      result = NULL,
      cancel_requested_at = NULL,
      started_at = NULL,
      finished_at = NULL
  FROM previous p
  WHERE j.id = p.id
  RETURNING j.*, p.state AS previous_state
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(run_at), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg('retried_manually'::evora.job_event_kind), array_agg(previous_state::evora.job_state), array_agg(state),
         array_agg(attempt), array_agg(worker_id),
         array_agg(NULL::float8), array_agg(NULL::float8)
  FROM updated
  HAVING count(*) > 0
),
woken AS (
  SELECT pg_notify('evora_job_available', d.queue) FROM (SELECT DISTINCT queue FROM updated) d
)
SELECT * FROM updated WHERE (SELECT count(*) FROM woken) >= 0

-- full: Evora's completion as the store ran it at 98f3af8 (Store.jobCompleteMany; with the
-- store's SQL in files, the store's own completion statement file is the original: keep this
-- copy in step with it). $1 job ids, $2 lease tokens, $3 results, $4 now (NULL: now()).
WITH input AS (
  SELECT DISTINCT ON (id, token) * FROM unnest($1::uuid[], $2::uuid[], $3::jsonb[]) AS c(id, token, result)
),
updated AS (
  UPDATE evora.jobs j
  SET state = 'COMPLETED',
      result = c.result,
      locked_until = NULL,
      finished_at = coalesce($4::timestamptz, now())
  FROM input c
  WHERE j.id = c.id AND j.lease_token = c.token AND (CASE WHEN j.state = 'RUNNING' THEN true END)
  RETURNING j.id, j.lease_token, j.queue, j.type, j.state, j.attempt, j.worker_id, j.last_error, j.started_at, j.finished_at
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(finished_at), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg(('completed')::evora.job_event_kind), array_agg(('RUNNING')::evora.job_state), array_agg(state),
         array_agg(attempt), array_agg(worker_id),
         array_agg((NULL)::float8), array_agg((extract(epoch FROM (finished_at) - (started_at)) * 1000)::float8)
  FROM updated
  HAVING count(*) > 0
)
SELECT id, lease_token, queue, type, state, attempt, worker_id, last_error FROM updated

-- name: workerSessionList
-- Live worker sessions of every server: rows seen within :staleSeconds of now (an older row
-- is a dead server's, ignored here and deleted by sql/worker-session-prune.sql), those that
-- take one of :queues when given (null: all), by worker id. The table holds one row per
-- connected stream: no index is needed beyond its primary key.
SELECT w.session_id, w.worker_id, w.server_id, w.server_address, w.queues, w.job_types,
       w.slots, w.held_jobs, w.free_slots, w.connected_at, w.last_seen_at
FROM evora.worker_sessions w
WHERE w.last_seen_at >= coalesce(:now::timestamptz, now()) - make_interval(secs => :staleSeconds::float8)
  AND (:queues::text[] IS NULL OR w.queues && :queues::text[])
ORDER BY w.worker_id, w.session_id

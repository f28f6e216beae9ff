-- name: workerSessionDelete
-- Forgets sessions that closed (a stream ended, or the server stops): by session id.
DELETE FROM evora.worker_sessions WHERE session_id = ANY (:sessionIds::uuid[])

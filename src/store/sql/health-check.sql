-- name: healthCheck
-- The database answers on this connection (/healthz; the leader's "still connected").
SELECT 1 AS ok

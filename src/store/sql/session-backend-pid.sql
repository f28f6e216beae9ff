-- name: sessionBackendPid
-- The process id of the PostgreSQL backend that runs this statement. A connection straight to
-- PostgreSQL is told the same id when it connects (BackendKeyData); through a pooler such as
-- pgbouncer, which makes up the key it hands its clients, the two differ (connections.ts).
SELECT pg_backend_pid() AS pid

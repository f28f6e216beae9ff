-- name: leaderLockTry
-- Tries to take the session-level advisory lock of the election :name (class :lockClass);
-- true when this session holds it. Must stay true: session-level, on a dedicated
-- connection, so PostgreSQL releases it when the process or its connection dies.
SELECT pg_try_advisory_lock(:lockClass, hashtext(:name)) AS ok

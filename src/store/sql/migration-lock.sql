-- name: migrationLock
-- Serialises migration runs across every process on the database: a transaction-level
-- advisory lock, released when the migration transaction ends.
SELECT pg_advisory_xact_lock(:key) AS locked

-- name: leaderLockRelease
-- Releases the election's advisory lock held by this session (leader-lock-try.sql).
SELECT pg_advisory_unlock(:lockClass, hashtext(:name)) AS released

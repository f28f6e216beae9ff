-- name: migrationBlockers
-- The sessions the backend :pid waits for (pg_blocking_pids: the holders of a lock it asked
-- for, or those queued before it), as a waiting migration tells them: who, from where, in
-- which state since when, and the start of what they run. Read on a connection of its own
-- while the migration's waits. Needs no privilege beyond the app's: a session of another
-- role shows its query as '<insufficient privilege>', its other columns as they are.
SELECT a.pid, a.application_name, a.usename::text AS usename, a.state, a.xact_start,
       left(a.query, 200) AS query
FROM pg_stat_activity a
WHERE a.pid = ANY (pg_blocking_pids(:pid::int))
ORDER BY a.pid

-- name: dbNow
-- The database's clock: the time every statement's now() reads. For services that measure
-- spans on the same clock as the rows they judge (the sweeper's run of reachable ticks), so
-- that neither a server clock apart from the database's nor a step of it moves them.
SELECT now() AS now

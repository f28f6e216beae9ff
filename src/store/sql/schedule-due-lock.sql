-- name: scheduleDueLock
-- The scheduler's batch: up to :limit schedules that are not paused and whose next_run_at
-- has come, locked for this transaction (rows another scheduler holds are skipped), with
-- the clock the fire plan uses (`clock`: :now or the database's).
-- Must stay true: FOR UPDATE re-checks next_run_at on the row's newest version, so a row
-- another transaction has just advanced is not fired twice.
SELECT s.*, coalesce(:now::timestamptz, now()) AS clock
FROM evora.schedules s
WHERE NOT s.paused AND s.next_run_at <= coalesce(:now::timestamptz, now())
ORDER BY s.next_run_at
LIMIT :limit::int
FOR UPDATE SKIP LOCKED

-- name: scheduleNextDue
-- The earliest next_run_at of the schedules that are not paused (null: none), and the
-- clock it is compared with, so the scheduler can sleep until then by the database's time.
SELECT (SELECT min(next_run_at) FROM evora.schedules WHERE NOT paused) AS next_run_at,
       coalesce(:now::timestamptz, now()) AS clock

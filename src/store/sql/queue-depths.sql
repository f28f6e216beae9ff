-- name: queueDepths
-- PENDING jobs claimable now, per queue (a scrape-time gauge; read from the claimable index).
SELECT queue, count(*)::int AS depth FROM evora.jobs
WHERE state = 'PENDING' AND run_at <= coalesce(:now::timestamptz, now())
GROUP BY queue ORDER BY queue

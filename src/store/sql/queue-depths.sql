-- name: queueDepths
-- PENDING jobs claimable now, for every known queue: a drained queue reads 0 rather than
-- having no row, so its gauge series stays at 0 instead of disappearing (a scrape-time
-- gauge; each count is read from the claimable index).
SELECT q.name AS queue,
       (SELECT count(*)::int FROM evora.jobs j
         WHERE j.queue = q.name AND j.state = 'PENDING' AND j.run_at <= coalesce(:now::timestamptz, now())) AS depth
FROM evora.queues q
ORDER BY q.name

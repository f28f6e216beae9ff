-- name: queueLimitedRead
-- Which of the given queues have a concurrency limit (max_concurrency or
-- max_concurrency_per_key): read by a completion for queues this store has not seen lately
-- (jobs-lease.ts), so a completion through a server that never claimed from a limited queue
-- still wakes the claimers of every server. A queue that does not exist has no row.
SELECT name, (max_concurrency IS NOT NULL OR max_concurrency_per_key IS NOT NULL) AS limited
FROM evora.queues WHERE name = ANY(:queues::text[])

-- name: jobQueuesRead
-- The queue of each job of :ids that exists (unknown ids give no row): how a token limited
-- to queues is checked against the parents a submit's depends_on names. One primary-key
-- probe per id.
SELECT j.id, j.queue
FROM evora.jobs j
WHERE j.id = ANY(:ids::uuid[])

-- name: jobDependentsList
-- The ids of a job's direct children (jobs naming it in parent_ids), oldest first, at most
-- :limit, each with its queue (GetJob answers a token limited to queues only those in its
-- queues): one probe of the GIN index jobs_parent_ids_idx (0011_dependencies.sql).
SELECT j.id, j.queue
FROM evora.jobs j
WHERE j.parent_ids @> ARRAY[:id::uuid] AND j.parent_ids IS NOT NULL
ORDER BY j.id
LIMIT :limit

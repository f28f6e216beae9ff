-- name: queueList
-- Every queue, by name.
SELECT * FROM evora.queues ORDER BY name

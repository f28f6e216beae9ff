-- name: queueGet
-- One queue by name (no row when it does not exist).
SELECT * FROM evora.queues WHERE name = :name

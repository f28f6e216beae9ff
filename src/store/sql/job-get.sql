-- name: jobGet
-- One job by id (no row when there is none).
SELECT * FROM evora.jobs WHERE id = :id

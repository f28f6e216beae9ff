-- name: scheduleGet
-- One schedule by name (no row when it does not exist).
SELECT * FROM evora.schedules WHERE name = :name

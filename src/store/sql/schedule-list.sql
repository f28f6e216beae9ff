-- name: scheduleList
-- Every schedule, by name.
SELECT * FROM evora.schedules ORDER BY name

-- name: scheduleDelete
-- Deletes a schedule (no row when it did not exist). Its jobs stay; a schedule created
-- later under the same name starts afresh.
DELETE FROM evora.schedules WHERE name = :name RETURNING name

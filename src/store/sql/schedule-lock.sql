-- name: scheduleLock
-- One schedule locked for this transaction (TriggerSchedule), waiting for a scheduler
-- that holds it; no row when it does not exist.
SELECT s.* FROM evora.schedules s WHERE s.name = :name FOR UPDATE

-- name: scheduleDelete
-- Deletes a schedule (no row when it did not exist). Its jobs stay; a schedule created
-- later under the same name starts afresh. Writes the audit event `schedule.delete`
-- (target: the schedule) in this statement, only when a schedule was deleted.
WITH deleted AS (
  DELETE FROM evora.schedules WHERE name = :name RETURNING name
),
audited AS (
  INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
  SELECT coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName, 'schedule.delete', d.name, '{}'::jsonb
  FROM deleted d
)
SELECT name FROM deleted

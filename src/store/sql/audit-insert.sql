-- name: auditInsert
-- One audit event, for an action made of several statements: run in that action's
-- transaction, after its change succeeded, so the event commits (or rolls back) with it.
-- Must stay true: the log is append-only; nothing ever updates or deletes an event.
INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
VALUES (coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName, :action, :target, :change::jsonb)
RETURNING id

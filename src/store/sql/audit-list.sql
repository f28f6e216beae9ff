-- name: auditList
-- A page of the audit log, newest first (keyset on id: events with an id below
-- :beforeId). Filters, null when not filtered on: :actions (any of), :target (exact),
-- :token (the token's id or its name, as the event recorded them). Asks :limit rows (the
-- caller asks one more than a page to know whether another follows).
SELECT id, at, actor_kind, token_id, token_name, action, target, change
FROM evora.audit_events
WHERE (:actions::text[] IS NULL OR action = ANY (:actions::text[]))
  AND (:target::text IS NULL OR target = :target::text)
  AND (:token::text IS NULL OR token_id::text = lower(:token::text) OR token_name = :token::text)
  AND (:beforeId::int8 IS NULL OR id < :beforeId::int8)
ORDER BY id DESC
LIMIT :limit

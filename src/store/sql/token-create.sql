-- name: tokenCreate
-- Makes an API token: its row (the secret's SHA-256 only, given as hex), the audit event
-- `token.create` (target: the id; change: name, role, queues, expires_at) and the NOTIFY
-- on evora_tokens_changed that makes every server's token cache read the table again.
-- A name already taken: no row, and nothing written (the caller answers ALREADY_EXISTS).
-- Must stay true:
-- - the row, its event and the NOTIFY are this one statement: all or nothing;
-- - the secret itself never reaches the database, and the event never holds the hash.
WITH inserted AS (
  INSERT INTO evora.api_tokens (id, name, role, queues, secret_sha256, created_at, expires_at, created_by)
  VALUES (:id::uuid, :name, :role, :queues::text[], decode(:secretHashHex, 'hex'),
          coalesce(:now::timestamptz, now()), :expiresAt::timestamptz, :createdBy)
  ON CONFLICT (name) DO NOTHING
  RETURNING id, name, role, queues, created_at, expires_at, revoked_at, created_by
),
audited AS (
  INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
  SELECT coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName, 'token.create', i.id::text,
         jsonb_build_object('name', i.name, 'role', i.role, 'queues', to_jsonb(i.queues), 'expires_at', i.expires_at)
  FROM inserted i
),
told AS (
  SELECT pg_notify('evora_tokens_changed', id::text) FROM inserted
)
SELECT * FROM inserted WHERE (SELECT count(*) FROM told) >= 0

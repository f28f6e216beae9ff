-- name: tokenBootstrapEnsure
-- EVORA_BOOTSTRAP_ADMIN_TOKEN at startup: keeps the token whose hash is :secretHash, whatever
-- its name and state (a revoked one stays revoked), or else creates an admin token of every
-- queue named "bootstrap" ("bootstrap-" and the hash's first 8 hex digits when that name is
-- another token's), created by '' (the database), with its audit event (token.create) and
-- the cache's NOTIFY (evora_tokens_changed) in this statement. `created` says which. Two
-- servers starting at once: the loser's insert does nothing and returns no row (the caller
-- runs the statement again and finds the winner's).
WITH existing AS (
  SELECT * FROM evora.api_tokens WHERE secret_sha256 = :secretHash::bytea
),
inserted AS (
  INSERT INTO evora.api_tokens AS t (id, name, role, queues, secret_sha256, created_at, created_by)
  SELECT :id::uuid,
         CASE WHEN EXISTS (SELECT 1 FROM evora.api_tokens WHERE name = 'bootstrap')
              THEN 'bootstrap-' || left(encode(:secretHash::bytea, 'hex'), 8)
              ELSE 'bootstrap' END,
         'admin', '{}', :secretHash::bytea, coalesce(:now::timestamptz, now()), ''
  WHERE NOT EXISTS (SELECT 1 FROM existing)
  ON CONFLICT DO NOTHING
  RETURNING t.*
),
audited AS (
  INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
  SELECT i.created_at, 'database', NULL, 'bootstrap (EVORA_BOOTSTRAP_ADMIN_TOKEN)', 'token.create', i.id::text,
         jsonb_build_object('name', i.name, 'role', i.role, 'queues', to_jsonb(i.queues), 'expires_at', NULL)
  FROM inserted i
  RETURNING id
),
notified AS (
  SELECT pg_notify('evora_tokens_changed', id::text) FROM inserted
)
SELECT id, name, role, queues, created_at, expires_at, revoked_at, created_by, true AS created
FROM inserted
WHERE (SELECT count(*) FROM audited) >= 0 AND (SELECT count(*) FROM notified) >= 0
UNION ALL
SELECT id, name, role, queues, created_at, expires_at, revoked_at, created_by, false AS created
FROM existing

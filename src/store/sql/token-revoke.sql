-- name: tokenRevoke
-- Revokes the token named by :token, its id or its name (an id match wins). No row when
-- there is none. Revoking a revoked token changes nothing and writes no event (its row
-- comes back as it is); otherwise revoked_at is set, with the audit event `token.revoke`
-- (target: the id; change: its name) and the NOTIFY on evora_tokens_changed, in this one
-- statement. Must stay true: the hash is never returned.
WITH target AS (
  SELECT t.id
  FROM evora.api_tokens t
  WHERE t.id::text = lower(:token) OR t.name = :token
  ORDER BY (t.id::text = lower(:token)) DESC
  LIMIT 1
  FOR UPDATE
),
revoked AS (
  UPDATE evora.api_tokens t
  SET revoked_at = coalesce(:now::timestamptz, now())
  FROM target g
  WHERE t.id = g.id AND t.revoked_at IS NULL
  RETURNING t.id, t.name
),
audited AS (
  INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
  SELECT coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName, 'token.revoke', r.id::text,
         jsonb_build_object('name', r.name)
  FROM revoked r
),
told AS (
  SELECT pg_notify('evora_tokens_changed', id::text) FROM revoked
)
SELECT t.id, t.name, t.role, t.queues, t.created_at, t.expires_at,
       coalesce(t.revoked_at, (SELECT coalesce(:now::timestamptz, now()) FROM revoked)) AS revoked_at, t.created_by
FROM evora.api_tokens t JOIN target g ON g.id = t.id
WHERE (SELECT count(*) FROM told) >= 0

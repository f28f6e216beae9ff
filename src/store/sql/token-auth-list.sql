-- name: tokenAuthList
-- Every API token with its secret's hash, revoked and expired ones too: what each server's
-- token cache (src/auth/) holds. Auth is on while this returns any row.
SELECT id, name, role, queues, created_at, expires_at, revoked_at, created_by, secret_sha256
FROM evora.api_tokens
ORDER BY created_at, id

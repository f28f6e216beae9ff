-- name: tokenList
-- API tokens, newest first; revoked ones only when :includeRevoked. Must stay true: the
-- secret's hash is never selected here (the list goes to operators and clients).
SELECT id, name, role, queues, created_at, expires_at, revoked_at, created_by
FROM evora.api_tokens
WHERE :includeRevoked::bool OR revoked_at IS NULL
ORDER BY created_at DESC, id DESC

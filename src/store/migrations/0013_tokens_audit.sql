-- API tokens and the audit log (docs/security.md "API tokens" and "Audit log").
--
-- api_tokens holds one row per token ever made: a revoked token keeps its row (for the list
-- and the log), and auth is on while the table has any row. The secret is never stored:
-- secret_sha256 is its SHA-256 (src/domain/auth.ts says why a fast hash suffices). Every
-- server caches the whole table (src/auth/) and reads it again at least every 2 seconds,
-- and at once on NOTIFY evora_tokens_changed, which every write here sends.
-- queues: patterns (a name, or a prefix ending in *); empty means every queue.
CREATE TABLE evora.api_tokens (
    id             uuid PRIMARY KEY,
    name           text NOT NULL UNIQUE,
    role           text NOT NULL CHECK (role IN ('producer', 'worker', 'viewer', 'admin')),
    queues         text[] NOT NULL DEFAULT '{}',
    secret_sha256  bytea NOT NULL UNIQUE CHECK (length(secret_sha256) = 32),
    created_at     timestamptz NOT NULL,
    expires_at     timestamptz,
    revoked_at     timestamptz,
    -- Name of the token that created it; '' for direct database access or the bootstrap.
    created_by     text NOT NULL DEFAULT '',
    CHECK (expires_at IS NULL OR expires_at > created_at)
);

-- audit_events: every administrative change, inserted by the statement (or in the
-- transaction) that makes the change, so the log holds exactly what committed. Append-only
-- for the application role: it may INSERT and SELECT, never UPDATE or DELETE (the grants
-- below, and db-role-ensure.sql for roles set up later). token_id is not a foreign key:
-- the log outlives anything it names.
CREATE TABLE evora.audit_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL,
    actor_kind  text NOT NULL CHECK (actor_kind IN ('token', 'anonymous', 'database')),
    token_id    uuid,
    token_name  text NOT NULL DEFAULT '',
    action      text NOT NULL CHECK (action IN (
                    'queue.upsert', 'queue.pause', 'queue.resume',
                    'job.cancel', 'job.retry', 'jobs.retry', 'jobs.purge',
                    'schedule.upsert', 'schedule.delete', 'schedule.pause', 'schedule.resume', 'schedule.trigger',
                    'token.create', 'token.revoke')),
    target      text NOT NULL,
    change      jsonb NOT NULL DEFAULT '{}',
    CHECK ((actor_kind = 'token') = (token_id IS NOT NULL))
);

-- The reads of `evora audit` / ListAuditEvents: newest first, by target or by token.
CREATE INDEX audit_events_target_idx ON evora.audit_events (target, id);
CREATE INDEX audit_events_token_idx ON evora.audit_events (token_id, id) WHERE token_id IS NOT NULL;

-- Roles that got write grants on the new table through default privileges (the
-- application role of `evora db create-role`) keep INSERT and SELECT only.
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT DISTINCT grantee FROM information_schema.role_table_grants
        WHERE table_schema = 'evora' AND table_name = 'audit_events'
          AND privilege_type IN ('UPDATE', 'DELETE', 'TRUNCATE')
          AND grantee <> (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'evora.audit_events'::regclass)
    LOOP
        EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON evora.audit_events FROM %I', g.grantee);
    END LOOP;
END $$;

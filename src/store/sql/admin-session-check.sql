-- name: adminSessionCheck
-- Who this session is (current_user, for the audit log's "role (user)" of direct database
-- access) and whether the schema has the token and audit tables (migration 0013), so that
-- `evora token|audit --database-url` can refuse an unmigrated database in one line instead
-- of failing on a missing table. Reads nothing else; changes nothing.
SELECT current_user::text AS role,
       (to_regclass('evora.api_tokens') IS NOT NULL AND to_regclass('evora.audit_events') IS NOT NULL) AS migrated

-- name: migrationOwnerBecome
-- Makes the migration transaction act as the owner of the evora schema when the connecting
-- role is someone else who may (a superuser, or a member of the owner role): objects that
-- migrations create belong to the owner role (docs/security.md, "Database role"). Also
-- says what exists, so that the runner creates the schema and its bookkeeping table only
-- when they are missing. `role` is the role now acting (null: unchanged).
-- Must stay true: SET LOCAL only (set_config(..., true)): the role ends with the transaction.
SELECT
  (SELECT set_config('role', r.rolname, true)
     FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner
    WHERE n.nspname = 'evora' AND r.rolname <> current_user AND pg_has_role(r.oid, 'MEMBER')) AS role,
  to_regnamespace('evora') IS NOT NULL AS schema_exists,
  to_regclass('evora.schema_migrations') IS NOT NULL AS bookkept

-- name: migrationBookkeepingCreate
-- The table that records which migrations ran (src/store/migrate.ts).
-- Must stay true: idempotent; it runs in the migration transaction, only while the table
-- is missing (CREATE ... IF NOT EXISTS still needs CREATE on the schema, which the
-- application role lacks: docs/security.md).
CREATE TABLE IF NOT EXISTS evora.schema_migrations (
  version integer PRIMARY KEY,
  name text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);

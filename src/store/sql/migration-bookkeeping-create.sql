-- name: migrationBookkeepingCreate
-- The schema and the table that record which migrations ran (src/store/migrate.ts).
-- Must stay true: idempotent; it runs before every migration run, in its transaction.
CREATE SCHEMA IF NOT EXISTS evora;
CREATE TABLE IF NOT EXISTS evora.schema_migrations (
  version integer PRIMARY KEY,
  name text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);

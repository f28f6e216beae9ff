-- name: migrationSchemaCreate
-- The evora schema, on a database that has none yet (src/store/migrate.ts). Run only while
-- it is missing: CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the
-- schema exists, which neither the owner role nor the application role has.
CREATE SCHEMA IF NOT EXISTS evora;

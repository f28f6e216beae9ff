-- name: migrationAppliedList
-- The migrations recorded as applied, in order.
SELECT version, name FROM evora.schema_migrations ORDER BY version

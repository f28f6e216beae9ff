-- name: migrationRecord
-- Records a migration as applied (in the transaction that applied it).
INSERT INTO evora.schema_migrations (version, name) VALUES (:version, :name)

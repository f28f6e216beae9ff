-- name: migrationDatabaseEncoding
-- The database's character set (server_encoding), checked before a migration is applied:
-- the schema, names and JSON payloads are UTF-8, which a database in another set (LATIN1)
-- cannot hold.
SELECT current_setting('server_encoding') AS encoding

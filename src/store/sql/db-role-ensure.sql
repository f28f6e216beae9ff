-- name: dbRoleEnsure
-- Creates or updates Evora's two database roles (docs/security.md, "Database role"), from
-- the settings db-role-settings.sql put in this transaction:
--  * the owner role (NOLOGIN) owns the evora schema and every object in it (moved here
--    with ALTER ... OWNER TO, one object at a time: REASSIGN OWNED would also take what the
--    old owner holds outside the schema); migrations act as it (migration-owner-become.sql);
--  * the application role (LOGIN) is NOT the owner and not a member of it: it has USAGE on
--    the schema, SELECT/INSERT/UPDATE/DELETE on the tables (SELECT only on the ones that
--    define the rules: job_state_transitions, schema_migrations; SELECT and INSERT only on
--    the append-only audit_events), sequences, EXECUTE; so it
--    cannot ALTER TABLE ... DISABLE TRIGGER, drop or replace the trigger or its function,
--    or add a legal transition; and no SUPERUSER, CREATEDB, CREATEROLE, REPLICATION,
--    BYPASSRLS (session_replication_role is refused to it).
-- Must stay true: idempotent (run at every embedded start and by `evora db create-role`);
-- run by a role that may create roles and act as the owner role (a superuser).
DO $$
DECLARE
    app text := nullif(current_setting('evora.role_app', true), '');
    owner_role text := nullif(current_setting('evora.role_owner', true), '');
    verifier text := nullif(current_setting('evora.role_verifier', true), '');
    obj record;
BEGIN
    -- Without its settings (run alone, as the statement test does) it does nothing.
    IF app IS NULL OR owner_role IS NULL THEN
        RETURN;
    END IF;
    IF app = owner_role THEN
        RAISE EXCEPTION 'the application role and the owner role must differ (both %)', app USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = owner_role) THEN
        EXECUTE format('CREATE ROLE %I NOLOGIN', owner_role);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = owner_role
               AND (rolcanlogin OR rolsuper OR rolcreatedb OR rolcreaterole OR rolreplication OR rolbypassrls)) THEN
        EXECUTE format('ALTER ROLE %I NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', owner_role);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = app) THEN
        EXECUTE format('CREATE ROLE %I LOGIN', app);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = app
               AND (NOT rolcanlogin OR rolsuper OR rolcreatedb OR rolcreaterole OR rolreplication OR rolbypassrls)) THEN
        EXECUTE format('ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', app);
    END IF;
    IF verifier IS NOT NULL THEN
        EXECUTE format('ALTER ROLE %I PASSWORD %L', app, verifier);
    END IF;
    -- A direct grant of the owner role to the application role is taken back; an indirect
    -- one (through a third role) is refused, not untangled.
    IF EXISTS (SELECT 1 FROM pg_auth_members m
               WHERE m.roleid = (SELECT oid FROM pg_roles WHERE rolname = owner_role)
                 AND m.member = (SELECT oid FROM pg_roles WHERE rolname = app)) THEN
        EXECUTE format('REVOKE %I FROM %I', owner_role, app);
    END IF;
    IF pg_has_role(app, owner_role, 'MEMBER') THEN
        RAISE EXCEPTION 'role % is a member of % through another role: it could act as the owner', app, owner_role
            USING ERRCODE = 'invalid_grant_operation';
    END IF;

    IF to_regnamespace('evora') IS NULL THEN
        EXECUTE format('CREATE SCHEMA evora AUTHORIZATION %I', owner_role);
    ELSE
        EXECUTE format('ALTER SCHEMA evora OWNER TO %I', owner_role);
    END IF;
    FOR obj IN
        SELECT format('ALTER %s %s OWNER TO %I', kind, ident, owner_role) AS stmt
        FROM (
            SELECT CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END AS kind,
                   c.oid::regclass::text AS ident, c.relowner AS own
            FROM pg_class c
            WHERE c.relnamespace = 'evora'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
              -- A table's own sequences (serial, identity) follow the table.
              AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i'))
            UNION ALL
            SELECT CASE p.prokind WHEN 'a' THEN 'AGGREGATE' WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END,
                   p.oid::regprocedure::text, p.proowner
            FROM pg_proc p WHERE p.pronamespace = 'evora'::regnamespace
            UNION ALL
            SELECT CASE t.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END, t.oid::regtype::text, t.typowner
            FROM pg_type t WHERE t.typnamespace = 'evora'::regnamespace
              AND (t.typtype IN ('e', 'd', 'r') OR (t.typtype = 'c' AND (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c'))
        ) o
        WHERE o.own <> (SELECT oid FROM pg_roles WHERE rolname = owner_role)
    LOOP
        EXECUTE obj.stmt;
    END LOOP;

    EXECUTE format('GRANT USAGE ON SCHEMA evora TO %I', app);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA evora TO %I', app);
    EXECUTE format('GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA evora TO %I', app);
    EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA evora TO %I', app);
    FOR obj IN
        SELECT c.oid::regclass::text AS ident FROM pg_class c
        WHERE c.relnamespace = 'evora'::regnamespace AND c.relname IN ('job_state_transitions', 'schema_migrations')
    LOOP
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON %s FROM %I', obj.ident, app);
    END LOOP;
    -- The audit log is append-only for the application role.
    IF to_regclass('evora.audit_events') IS NOT NULL THEN
        EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON evora.audit_events FROM %I', app);
    END IF;
    -- What later migrations create (acting as the owner role) is usable by the application
    -- role too; a migration that adds a rules table revokes the writes itself.
    EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA evora GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I', owner_role, app);
    EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA evora GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO %I', owner_role, app);
    EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA evora GRANT EXECUTE ON FUNCTIONS TO %I', owner_role, app);
END
$$;

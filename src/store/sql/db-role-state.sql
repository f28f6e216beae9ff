-- name: dbRoleState
-- Before dbRoleEnsure: which of the two roles exist, and how many objects of the evora
-- schema (the schema itself included) the owner role does not own yet.
SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :app::text) AS app_exists,
       EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :owner::text) AS owner_exists,
       (SELECT count(*)::int FROM (
          SELECT nspowner AS own FROM pg_namespace WHERE nspname = 'evora'
          UNION ALL
          SELECT c.relowner FROM pg_class c WHERE c.relnamespace = to_regnamespace('evora') AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
          UNION ALL
          SELECT p.proowner FROM pg_proc p WHERE p.pronamespace = to_regnamespace('evora')
          UNION ALL
          SELECT t.typowner FROM pg_type t WHERE t.typnamespace = to_regnamespace('evora') AND (t.typtype IN ('e', 'd', 'r') OR (t.typtype = 'c' AND (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c'))
        ) o WHERE o.own IS DISTINCT FROM (SELECT oid FROM pg_roles WHERE rolname = :owner::text)) AS foreign_owned

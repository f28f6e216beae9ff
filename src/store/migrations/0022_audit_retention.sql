-- Audit retention (docs/security.md "Audit log"): evora.audit_events grew forever. The
-- leader's pruner (src/maintenance/pruner.ts) now deletes events older than
-- EVORA_AUDIT_RETENTION_DAYS (365 by default; 0 keeps them forever), in short batches, by
-- calling evora.audit_events_prune (sql/audit-prune.sql).
--
-- The log stays append-only for the application role: it still has no DELETE, UPDATE or
-- TRUNCATE on the table (0013, db-role-ensure.sql). The function is the only way it can
-- delete an event; it runs as its owner (SECURITY DEFINER, the schema's owner: migrations
-- act as it) and deletes only events older than the cut-off it is given AND older than 30
-- days by the database's own clock. So whoever holds the application role's credentials can
-- never erase the last 30 days of the log, whatever they pass (a cut-off in the future
-- included), and no other role may call it (EXECUTE revoked from PUBLIC; the application
-- role gets it from `evora db create-role`'s grants and default privileges).
--
-- Must stay true: at most max_events rows per call (oldest first, by the index below), so
-- one call is one short statement; the 30-day floor is the function's, not the caller's;
-- search_path is fixed (a SECURITY DEFINER function must not resolve names through the
-- caller's path).

-- Events by time: the function's oldest-first walk reads only what it deletes (one more
-- index entry per audit event, written by administrative changes only).
CREATE INDEX audit_events_at_idx ON evora.audit_events (at);

CREATE FUNCTION evora.audit_events_prune(cut_off timestamptz, max_events integer) RETURNS integer
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH old AS (
        SELECT e.id FROM evora.audit_events e
        WHERE e.at < least(cut_off, now() - interval '30 days')
        ORDER BY e.at
        LIMIT greatest(max_events, 0)
    ),
    deleted AS (
        DELETE FROM evora.audit_events e USING old o WHERE e.id = o.id
        RETURNING 1
    )
    SELECT count(*)::integer FROM deleted
$$;

REVOKE EXECUTE ON FUNCTION evora.audit_events_prune(timestamptz, integer) FROM PUBLIC;

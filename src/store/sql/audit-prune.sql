-- name: auditPrune
-- One batch of audit retention (the pruner's, src/maintenance/pruner.ts): deletes up to
-- :limit audit events older than :retentionDays days before :now (the database's clock when
-- null), oldest first, and returns how many. The delete is evora.audit_events_prune's
-- (0022_audit_retention.sql), the application role's only way to delete an event: it never
-- deletes one younger than 30 days by the database's clock, whatever :now says.
SELECT evora.audit_events_prune(coalesce(:now::timestamptz, now()) - make_interval(days => :retentionDays::int), :limit::int) AS events

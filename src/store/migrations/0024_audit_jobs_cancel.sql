-- The audit action of a bulk cancel (CancelJobs; sql/job-cancel-many.sql): `jobs.cancel`,
-- one event per batch that changed jobs, as `jobs.retry` and `jobs.purge` are written.
-- The action list is a CHECK of evora.audit_events (0013_tokens_audit.sql), so a new action
-- is a new list; the existing rows all pass it (it only grows).
ALTER TABLE evora.audit_events DROP CONSTRAINT audit_events_action_check;
ALTER TABLE evora.audit_events ADD CONSTRAINT audit_events_action_check CHECK (action IN (
    'queue.upsert', 'queue.pause', 'queue.resume',
    'job.cancel', 'job.retry', 'jobs.retry', 'jobs.purge', 'jobs.cancel',
    'schedule.upsert', 'schedule.delete', 'schedule.pause', 'schedule.resume', 'schedule.trigger',
    'token.create', 'token.revoke'));

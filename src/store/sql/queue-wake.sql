-- name: queueWake
-- Wakes the claimers of the given queues on every server (NOTIFY evora_job_available, one
-- per queue, sent at this statement's commit). Sent by the store after completions of
-- limited queues' jobs commit (jobs-lease.ts): the freed room is claimed at once.
SELECT pg_notify('evora_job_available', q) FROM unnest(:queues::text[]) AS q

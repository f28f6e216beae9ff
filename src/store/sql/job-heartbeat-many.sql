-- name: jobHeartbeatMany
-- Extends the leases whose tokens still match a RUNNING job by their queue's
-- lease_seconds from now (a job flagged for cancel: see below); returns each extended lease (job id and token), its new expiry
-- and whether an operator asked to cancel the job. A lease not returned is lost: a worker
-- may name two leases of one job (a stale one whose report awaits its ack, and the current
-- one), so a lease is the pair (id, lease_token), never the id alone.
-- Must stay true: "the job is RUNNING" is written `(CASE WHEN j.state = 'RUNNING' THEN true
-- END)` so the planner cannot use it to pick the partial jobs_running_lease_idx: a write by
-- lease finds its rows by primary key. With `j.state = 'RUNNING'` the planner, trusting
-- statistics taken while few jobs ran, walked the whole lease index: with 55,000 jobs
-- running, completing one took ~60 ms (docs/store.md). The same holds for every write by
-- lease (complete, fail, snooze).
-- Rows are locked in id order, as by every batch write by lease (their DISTINCT ON sorts
-- by id, and that sorted input drives the primary-key loop): a heartbeat batch and a
-- completion batch naming the same jobs, run at once, lock them in the same order and
-- cannot deadlock (unsorted, they did under the fault suite).
-- A job an operator asked to cancel gets one lease length from the request to stop: its lease
-- is extended at most to cancel_requested_at + lease_seconds, and once that has passed it is
-- not extended at all (lost), so the sweeper makes the job CANCELLED. Without the bound a
-- handler that ignored the cancel while its worker kept heartbeating held the job RUNNING
-- (cancel requested) for ever, and on-call's only lever was killing the worker process.
-- LEAST ignores the NULL of a job nobody asked to cancel.
UPDATE evora.jobs j
SET locked_until = least(coalesce(:now::timestamptz, now()) + make_interval(secs => q.lease_seconds),
                         j.cancel_requested_at + make_interval(secs => q.lease_seconds))
FROM (SELECT DISTINCT ON (id, token) * FROM unnest(:ids::uuid[], :tokens::uuid[]) AS u(id, token)) l, evora.queues q
WHERE j.id = l.id AND j.lease_token = l.token AND (CASE WHEN j.state = 'RUNNING' THEN true END) AND q.name = j.queue
  AND (j.cancel_requested_at IS NULL
       OR j.cancel_requested_at + make_interval(secs => q.lease_seconds) > coalesce(:now::timestamptz, now()))
RETURNING j.id, j.lease_token, j.locked_until, j.cancel_requested_at

-- name: jobBulkLock
-- Runs the batches of the bulk actions whose changes cascade through dependents (CancelJobs,
-- RetryJobs: the dependents trigger, 0018_dependency_cascade_loop.sql, locks the descendants
-- it reaches and waits for them) one at a time across every server: a transaction-level
-- advisory lock, taken first in a batch's transaction and released when it ends. Two runs
-- over one queue at once pick interleaved rows (SKIP LOCKED), one holding p and d of a chain
-- p -> c -> d and the other c, so each one's cascade waited for the other's rows: a deadlock
-- in most batches, the calls failing. Batches are short (500 rows), so a run waits at most
-- for the other runs' batch under way.
SELECT pg_advisory_xact_lock(:key) AS locked

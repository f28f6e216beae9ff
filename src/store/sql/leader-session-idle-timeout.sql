-- name: leaderSessionIdleTimeout
-- Sets idle_session_timeout (:timeoutMs, in ms) on the leader lock's own session, before it
-- tries the lock: a leader process that is frozen (SIGSTOP, a VM paused) keeps its TCP
-- connection alive, so without this PostgreSQL never ended its session and the lock (and
-- with it the sweeps of expired leases, on which every max_concurrency queue waits) stayed
-- with a process that did nothing. A live leader confirms the lock every election interval,
-- well within the timeout. PostgreSQL before 14 has no such setting: the caller goes on without it.
SELECT set_config('idle_session_timeout', (:timeoutMs::int)::text, false) AS value

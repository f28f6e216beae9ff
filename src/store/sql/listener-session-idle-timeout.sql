-- name: listenerSessionIdleTimeout
-- Turns idle_session_timeout off on the LISTEN connection's own session. A LISTEN session
-- only waits (its probe runs every 30 s), so a database or role whose idle_session_timeout
-- is shorter ended it again and again: each time the server logged "database unavailable:
-- terminating connection due to idle-session timeout" and "available again", and missed the
-- notifications sent until it was back. The pool's connections are left to the setting (it
-- may reap them; the pool makes new ones), and the leader's lock session sets its own.
-- PostgreSQL before 14 has no such setting: the caller goes on without it.
SELECT set_config('idle_session_timeout', '0', false) AS value

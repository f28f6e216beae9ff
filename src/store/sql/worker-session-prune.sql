-- name: workerSessionPrune
-- Deletes the sessions of servers that died (not seen for :staleSeconds), run by the leader's
-- pruner. Returns how many.
WITH deleted AS (
  DELETE FROM evora.worker_sessions w
  WHERE w.last_seen_at < coalesce(:now::timestamptz, now()) - make_interval(secs => :staleSeconds::float8)
  RETURNING 1
)
SELECT count(*)::int AS sessions FROM deleted

-- name: outboxLag
-- How far telemetry is behind: outbox events not yet projected, and the age in seconds of
-- the oldest (null when there is none).
SELECT coalesce(sum(n), 0)::int AS n, extract(epoch FROM coalesce(:now::timestamptz, now()) - min(at))::float8 AS age
FROM evora.job_events

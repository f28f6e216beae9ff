-- name: outboxLag
-- How far telemetry is behind: outbox events not yet projected, whether that number is an
-- estimate, and the age in seconds of the oldest event (null when there is none).
-- Must stay true: it costs the same at any outbox size (every /metrics scrape and stats call
-- runs it, and the outbox is large exactly when an operator looks: the telemetry store is
-- down). The first :exactRows rows by id are counted exactly (a primary-key range scan);
-- when that is the whole outbox (max(id) is among them) the count is exact and `estimated`
-- false. Beyond them it is an estimate: the rows with a larger id, taken as max(id) minus
-- the last id counted (ids are given in insert order and the projector deletes from the
-- low end, so the ids above are rows or the gaps of rolled-back inserts: never fewer rows),
-- times the mean events per row of the rows counted. max(id) and min(at) are index probes
-- (the primary key; job_events_at_idx, migration 0023).
WITH head AS (
  SELECT e.id, e.n FROM evora.job_events e ORDER BY e.id LIMIT :exactRows
), counted AS (
  SELECT count(*) AS rows, coalesce(sum(h.n), 0) AS events, max(h.id) AS last_id FROM head h
), ends AS (
  SELECT max(e.id) AS max_id, min(e.at) AS oldest FROM evora.job_events e
)
SELECT
  CASE WHEN x.max_id > c.last_id
    THEN c.events + round((x.max_id - c.last_id) * (c.events::float8 / c.rows))
    ELSE c.events
  END::float8 AS n,
  coalesce(x.max_id > c.last_id, false) AS estimated,
  extract(epoch FROM coalesce(:now::timestamptz, now()) - x.oldest)::float8 AS age
FROM counted c, ends x

-- name: jobProgressMany
-- Stores the latest progress report of each lease (the server coalesces a worker's reports
-- and flushes them together, about once a second): Job.progress becomes
-- {percent | done,total, message, attempt, reported_at}, and Job.checkpoint the report's
-- checkpoint when it carries one (NULL keeps the one stored). Returns the leases it matched.
-- Must stay true: fenced like every worker write: only a RUNNING job whose lease_token is the
-- report's is changed, so a stale report never touches a finished or re-leased job; only the
-- progress columns are written (no state, no event); one report per lease (DISTINCT ON);
-- rows found by primary key ("RUNNING" as a CASE, see job-heartbeat-many.sql).
WITH input AS (
  SELECT DISTINCT ON (id, token) *
  FROM unnest(:ids::uuid[], :tokens::uuid[], :percents::float8[], :dones::int8[], :totals::int8[],
              :messages::text[], :checkpoints::jsonb[], :reportedAts::timestamptz[])
    AS p(id, token, percent, done, total, message, checkpoint, reported_at)
)
UPDATE evora.jobs j
SET progress = jsonb_strip_nulls(jsonb_build_object(
      'percent', p.percent, 'done', p.done, 'total', p.total, 'message', p.message, 'attempt', j.attempt,
      'reported_at', to_char(coalesce(p.reported_at, :now::timestamptz, now()) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))),
    checkpoint = coalesce(p.checkpoint, j.checkpoint)
FROM input p
WHERE j.id = p.id AND j.lease_token = p.token AND (CASE WHEN j.state = 'RUNNING' THEN true END)
RETURNING j.id, j.lease_token

-- name: queueContents
-- What keeps a queue from being deleted (DeleteQueue's refusal): its jobs by state and the
-- names of the schedules that submit into it, one row per state that has jobs (`schedules`
-- is the same on every row) or one row with a NULL state when it has none. Read outside
-- the delete's lock: the counts may walk many finished jobs, and submits must not wait for them.
WITH counts AS (
  SELECT j.state, count(*)::int8 AS n FROM evora.jobs j WHERE j.queue = :name AND j.state = 'PENDING' GROUP BY j.state
  UNION ALL
  SELECT j.state, count(*)::int8 FROM evora.jobs j WHERE j.queue = :name AND j.state = 'RUNNING' GROUP BY j.state
  UNION ALL
  SELECT j.state, count(*)::int8 FROM evora.jobs j WHERE j.queue = :name AND j.state = 'WAITING' GROUP BY j.state
  UNION ALL
  SELECT j.state, count(*)::int8 FROM evora.jobs j WHERE j.queue = :name AND j.state IN ('COMPLETED', 'CANCELLED', 'DLQ') GROUP BY j.state
),
scheduled AS (
  SELECT coalesce(array_agg(s.name ORDER BY s.name), '{}') AS names FROM evora.schedules s WHERE s.queue = :name
)
SELECT c.state, coalesce(c.n, 0)::int8 AS n, s.names AS schedules
FROM scheduled s LEFT JOIN counts c ON true

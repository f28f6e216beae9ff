-- submit: $2 PENDING no-op jobs in queue $1. Not Evora's submit (no event, no queue row):
-- the experiment times only the completions, and needs nothing but jobs to claim.
INSERT INTO evora.jobs (queue, type, payload, max_attempts)
SELECT $1, 'noop', '{"a": 1, "b": "x"}'::jsonb, 5
FROM generate_series(1, $2::int)

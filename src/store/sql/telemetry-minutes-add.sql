-- name: telemetryMinutesAdd
-- Adds a batch's per-minute counters and latency histograms (jsonb: bin -> count) to each
-- (queue, minute) bucket.
INSERT INTO evora.telemetry_minutes AS m
  (queue, minute, submitted, completed, failed, dead_lettered, wait_hist, run_hist)
SELECT * FROM unnest(:queues::text[], :minutes::timestamptz[], :submitted::bigint[], :completed::bigint[], :failed::bigint[],
                     :deadLettered::bigint[], :waitHists::jsonb[], :runHists::jsonb[])
ON CONFLICT (queue, minute) DO UPDATE SET
  submitted = m.submitted + EXCLUDED.submitted,
  completed = m.completed + EXCLUDED.completed,
  failed = m.failed + EXCLUDED.failed,
  dead_lettered = m.dead_lettered + EXCLUDED.dead_lettered,
  wait_hist = evora.histogram_add(m.wait_hist, EXCLUDED.wait_hist),
  run_hist = evora.histogram_add(m.run_hist, EXCLUDED.run_hist)

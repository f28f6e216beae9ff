-- name: jobQueuesDue
-- Which of the given queues (not paused) have a PENDING job due now: the dispatcher's
-- fallback poll asks it for the queues whose workers are all busy, and only those are
-- claimed at the next freed slot; asking each queue by a claim cost one statement per queue
-- per tick (with 500 idle queues beside a busy one, the busy one ran at a quarter of its rate).
-- Must stay true: one probe of jobs_claimable_idx per queue, stopped at the first due job
-- (PostgreSQL 18 skips over future jobs of a better priority; older versions read through
-- them, as the claim does: docs/dispatcher.md "Delayed jobs").
SELECT q.name AS queue
FROM evora.queues q
WHERE q.name = ANY(:queues::text[]) AND NOT q.paused
  AND EXISTS (
    SELECT 1 FROM evora.jobs j
    WHERE j.queue = q.name AND j.state = 'PENDING' AND j.run_at <= coalesce(:now::timestamptz, now())
  )

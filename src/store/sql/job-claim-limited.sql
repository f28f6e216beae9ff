-- name: jobClaimLimited
-- The claim of queues with a limit (max_concurrency, rate_limit or max_concurrency_per_key):
-- job-claim.sql's rules (best first, SKIP LOCKED, RUNNING with attempt + 1, a fresh token
-- and lease, one `claimed` event per job, job i to worker :workerIds[:slotWorkers[i]], only
-- :types when not NULL), within each queue's room. The store sends a queue here once
-- job-claim.sql has said it is limited, and back when a row here says it is not.
-- A queue with max_concurrency set takes at most its room: max_concurrency minus its RUNNING
-- jobs, counted by evora.queue_limit under a per-queue advisory lock held until this claim
-- commits (migration 0004 says why that is exact across servers). A rate-limited queue's
-- room is also at most its bucket's whole tokens (migration 0008), taken only for due jobs of
-- :types (0016) and given back for those the claim did not start (0018), and a queue whose jobs wait
-- for a token sends back one row without a job (id NULL) saying when the next one is due.
-- Queues are taken in name order so two claims of several limited queues lock them in the
-- same order. An asked queue that has no limit (any more) is claimed as job-claim.sql would,
-- and its row without a job says queue_limited false.
-- Concurrency keys: a queue with max_concurrency_per_key takes its jobs from
-- evora.queue_pick_by_key (migration 0009; round-robin across keys, each key at most its
-- free slots) instead of the index scan; its lock is taken by evora.queue_limit here first.
WITH limits AS (
  -- Rate limits (migration 0008): a rate-limited queue also takes at most its whole tokens,
  -- by the same function under the same lock; next_token_at says when jobs held back by the
  -- rate limit can start (the dispatcher wakes the queue then).
  SELECT name, lease_seconds, max_concurrency_per_key AS per_key, limited, rate_per_second,
         CASE WHEN limited
              THEN evora.queue_limit(name, max_concurrency, rate_per_second, rate_burst, :limit::int8,
                                     coalesce(:now::timestamptz, now()), :types::text[]) END AS lim
  -- Ordered below the call: a sort above it would order the rows after the calls were made.
  FROM (SELECT *, (max_concurrency IS NOT NULL OR rate_per_second IS NOT NULL OR max_concurrency_per_key IS NOT NULL) AS limited
        FROM evora.queues WHERE name = ANY(:queues::text[]) AND NOT paused ORDER BY name) ordered
),
claimable_queues AS (
  SELECT name, lease_seconds, coalesce((lim).room, :limit::int8) AS room, (lim).next_token_at, per_key, limited,
         -- What evora.queue_limit took from a rate-limited queue's bucket: one token per room.
         CASE WHEN rate_per_second IS NOT NULL THEN (lim).room END AS tokens_taken
  FROM limits
),
picked AS (
  SELECT c.id, c.priority, c.run_at
  FROM claimable_queues q
  CROSS JOIN LATERAL (
    SELECT j.id, j.priority, j.run_at
    FROM evora.jobs j
    WHERE j.state = 'PENDING' AND j.queue = q.name AND j.run_at <= coalesce(:now::timestamptz, now())
      -- Not `type = ANY(:types)`: for a type the statistics find rare the planner then chose a
      -- sequential scan of all jobs and a sort; array_position hides the selectivity, so the
      -- scan stays on jobs_claimable_idx (test/store/plans.test.ts).
      AND (:types::text[] IS NULL OR array_position(:types::text[], j.type) IS NOT NULL)
    ORDER BY j.priority, j.run_at, j.id
    LIMIT q.room
    FOR UPDATE SKIP LOCKED
  ) c
  WHERE q.per_key IS NULL
  UNION ALL
  -- Concurrency keys (migration 0009): a queue with max_concurrency_per_key picks round-robin
  -- across keys, in a function whose statements see every committed claim (after the lock).
  SELECT k.id, k.priority, k.run_at
  FROM claimable_queues q
  CROSS JOIN LATERAL evora.queue_pick_by_key(q.name, q.per_key, q.room, coalesce(:now::timestamptz, now()),
                                             :types::text[]) k
  WHERE q.per_key IS NOT NULL
  ORDER BY priority, run_at, id
  LIMIT :limit
),
slotted AS (
  -- The i-th best job goes to the i-th slot: the dispatcher hands out slots round-robin.
  -- Slot i belongs to worker workerIds[slotWorkers[i]]: the distinct worker ids and one
  -- small int per slot (an int array is read by offset; sending 2,000 copies of a worker id
  -- cost both sides).
  -- Numbered by unnest WITH ORDINALITY over an array, not row_number() over picked: the
  -- planner estimates such an unnest at 10 rows whatever the queue's statistics say, so the
  -- UPDATE below drives from it and fetches each job by primary key. With row_number(), when
  -- the statistics said next to no job was due (a queue of delayed jobs, analyzed while they
  -- were all in the future), the planner expected one pick and numbered the picks again for
  -- every job it updated: a claim of 1,000 took 0.4-1.7 s (test/store/plans.test.ts).
  SELECT s.id, s.slot, (:workerIds::text[])[(:slotWorkers::int[])[s.slot]] AS worker_id
  FROM unnest(ARRAY(SELECT id FROM picked ORDER BY priority, run_at, id)) WITH ORDINALITY AS s(id, slot)
),
claimed AS (
  UPDATE evora.jobs j
  SET state = 'RUNNING',
      attempt = j.attempt + 1,
      lease_token = gen_random_uuid(),
      locked_until = coalesce(:now::timestamptz, now()) + make_interval(secs => q.lease_seconds),
      worker_id = s.worker_id,
      started_at = coalesce(:now::timestamptz, now()),
      cancel_requested_at = NULL
  FROM slotted s, claimable_queues q
  WHERE j.id = s.id AND q.name = j.queue
  RETURNING j.id, j.queue, j.type, j.payload, j.state, j.priority, j.run_at, j.attempt, j.max_attempts,
            j.lease_token, j.locked_until, j.worker_id, j.idempotency_key, j.last_error, j.created_at,
            j.started_at, s.slot, j.parent_ids,
            j.checkpoint
),
events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(started_at), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg('claimed'::evora.job_event_kind), array_agg('PENDING'::evora.job_state), array_agg(state),
         array_agg(attempt), array_agg(worker_id),
         array_agg((extract(epoch FROM started_at - run_at) * 1000)::float8), array_agg(NULL::float8)
  FROM claimed
  HAVING count(*) > 0
),
refunded AS (
  -- Tokens taken for jobs this claim did not start go back to the bucket (migration 0018):
  -- the cut to :limit across queues, a per-key cut or a skipped row left them unused.
  SELECT evora.queue_rate_refund(q.name, q.tokens_taken - (SELECT count(*) FROM claimed c WHERE c.queue = q.name))
  FROM claimable_queues q
  WHERE q.tokens_taken > 0
)
-- What the store reads back: job-claim.sql's rows (see there), in claim order, and one row
-- without a job per asked queue with what its jobs share, whether it has a limit
-- (queue_limited false: the store claims it with job-claim.sql from now on) and, for a queue
-- whose jobs wait for a token (rate limits), when the next one is due (next_token_at).
SELECT id, queue, type, payload, priority, run_at, attempt, max_attempts, lease_token, idempotency_key, last_error,
       created_at, parent_ids, checkpoint, started_at, locked_until, next_token_at, queue_limited
FROM (
  SELECT id, queue, type, payload, priority, run_at, attempt, max_attempts, lease_token, idempotency_key, last_error,
         created_at, parent_ids, checkpoint, NULL::timestamptz AS started_at, NULL::timestamptz AS locked_until,
         NULL::timestamptz AS next_token_at, NULL::bool AS queue_limited, slot
  FROM claimed
  UNION ALL
  SELECT NULL::uuid, name, NULL::text, NULL::jsonb, NULL::int, NULL::timestamptz, NULL::int, NULL::int, NULL::uuid, NULL::text,
         NULL::text, NULL::timestamptz, NULL::uuid[], NULL::jsonb,
         coalesce(:now::timestamptz, now()), coalesce(:now::timestamptz, now()) + make_interval(secs => lease_seconds),
         next_token_at, limited, 0
  FROM claimable_queues
) r
WHERE (SELECT count(*) FROM refunded) >= 0
ORDER BY slot

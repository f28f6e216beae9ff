-- name: jobClaim
-- Claims up to :limit claimable jobs of the given queues, best first (priority, run_at,
-- id), skipping paused queues and rows another claimer holds (SKIP LOCKED: never waited
-- on). Each claimed job becomes RUNNING with attempt + 1, a fresh lease token, and a lease
-- of its queue's lease_seconds; one `claimed` event per job. Job i (in claim order, the
-- `slot` column) goes to worker :workerIds[:slotWorkers[i]].
-- Must stay true: per queue a LATERAL scan of jobs_claimable_idx in (priority, run_at, id)
-- order stops after :limit rows, so the cost is independent of how many jobs wait or have
-- finished; the UPDATE finds its rows by primary key (test/store/plans.test.ts).
-- Only queues without a limit (max_concurrency, rate_limit, max_concurrency_per_key) are
-- claimed here, so they pay nothing for the limits: no lock, no count, no bucket. An asked
-- queue that has one is answered with its row without a job saying queue_limited (below)
-- and the store claims it with job-claim-limited.sql instead. The check reads the queue's
-- row in this statement's snapshot, so a limit committed before the claim starts is obeyed.
-- Job-type routing: :types NULL = any type; else only jobs whose type is in :types: a filter
-- on the same index scan, which reads past the other types' rows (cheap when types are mixed;
-- when the wanted type is rare among many waiting jobs of other types, each claim reads those
-- rows: docs/dispatcher.md "job types").
WITH claimable_queues AS (
  SELECT name, lease_seconds,
         (max_concurrency IS NOT NULL OR rate_per_second IS NOT NULL OR max_concurrency_per_key IS NOT NULL) AS limited
  FROM evora.queues WHERE name = ANY(:queues::text[]) AND NOT paused
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
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
  ) c
  WHERE NOT q.limited
  ORDER BY c.priority, c.run_at, c.id
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
)
-- What the store reads back (as text, unparsed: jobs-lease.ts), in claim order (job i goes to
-- the caller's slot i): per job only what differs from job to job, and one row without a job
-- (id NULL) per asked queue saying what its claimed jobs share, started_at (this claim's time)
-- and locked_until (that time plus the queue's lease: the UPDATE's own expressions, on the
-- same row of claimable_queues), and whether it has a limit (queue_limited: then the store
-- claims it with job-claim.sql no more but with job-claim-limited.sql). Every value read back
-- costs the server; not sent back: state (RUNNING), worker_id (the caller named it), and
-- result, finished_at and cancel_requested_at (NULL after a claim).
-- parent_ids (0011_dependencies.sql): the store fetches the parents' results only when set;
-- checkpoint (0012_progress_attempts.sql): the next attempt resumes from it.
-- next_token_at is job-claim-limited.sql's (one row type for both).
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
         NULL::timestamptz, limited, 0
  FROM claimable_queues
) r
ORDER BY slot

-- name: workerSessionSync
-- One server's live Work-stream sessions, all at once (the dispatcher's session upkeep, every
-- few seconds): upserts one row per session given (the unnest arrays, in step), with
-- last_seen_at = now, and deletes this server's rows of sessions not given (closed ones
-- whose own delete raced with an earlier sync). connected_at is kept from the first write.
-- Must stay true: touches only rows of :serverId.
WITH given AS (
  SELECT *
  FROM unnest(:sessionIds::uuid[], :workerIds::text[], :queues::text[], :jobTypes::text[],
              :slots::int4[], :heldJobs::int4[], :freeSlots::int4[], :connectedAts::timestamptz[])
       AS g(session_id, worker_id, queues, job_types, slots, held_jobs, free_slots, connected_at)
),
gone AS (
  DELETE FROM evora.worker_sessions w
  WHERE w.server_id = :serverId::uuid AND w.session_id <> ALL (:sessionIds::uuid[])
)
INSERT INTO evora.worker_sessions AS w
  (session_id, worker_id, server_id, server_address, queues, job_types, slots, held_jobs, free_slots, connected_at, last_seen_at)
SELECT g.session_id, g.worker_id, :serverId::uuid, :serverAddress::text,
       -- queues and job types travel as one text per session (a comma-joined list): unnest
       -- cannot carry arrays of arrays of different lengths.
       string_to_array(g.queues, ','), coalesce(string_to_array(nullif(g.job_types, ''), ','), '{}'),
       g.slots, g.held_jobs, g.free_slots, g.connected_at, coalesce(:now::timestamptz, now())
FROM given g
ON CONFLICT (session_id) DO UPDATE
SET held_jobs = excluded.held_jobs,
    free_slots = excluded.free_slots,
    last_seen_at = excluded.last_seen_at

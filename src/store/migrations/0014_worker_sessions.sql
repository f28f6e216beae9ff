-- The dashboard's reads (issue 19): live worker sessions across servers, dead letters grouped
-- by error, and the indexes that keep those reads off a scan of evora.jobs.

-- Every server's live Work-stream sessions (ListWorkers, QueueStats.connected_workers and
-- free_slots). Each server writes its own rows: one batched upsert every few seconds that
-- also deletes its rows of sessions gone (sql/worker-session-sync.sql), a delete when a
-- session closes. A row whose last_seen_at is older than the staleness bound (30 s) belongs
-- to a server that died: every read ignores it and the leader's pruner deletes it. Long-poll
-- ClaimJobs callers are not sessions and have no row. Not a log: a row lives as long as its
-- stream.
CREATE TABLE evora.worker_sessions (
    session_id      uuid PRIMARY KEY,
    worker_id       text NOT NULL,
    -- The server process holding the stream (a UUID made at its start) and its gRPC address.
    server_id       uuid NOT NULL,
    server_address  text NOT NULL,
    queues          text[] NOT NULL,
    -- The job types it runs; empty = any type.
    job_types       text[] NOT NULL DEFAULT '{}',
    slots           integer NOT NULL CHECK (slots >= 0),
    held_jobs       integer NOT NULL CHECK (held_jobs >= 0),
    free_slots      integer NOT NULL CHECK (free_slots >= 0),
    connected_at    timestamptz NOT NULL,
    last_seen_at    timestamptz NOT NULL
);
-- A server's own rows (its sync deletes the ones of closed sessions).
CREATE INDEX worker_sessions_server_idx ON evora.worker_sessions (server_id);

-- The error group of a dead-lettered job (ListDeadLetterGroups, JobFilter.error_group): the
-- first line of last_error, at most 200 characters; '' when there is none. One definition,
-- called by every statement that groups or matches on it, so the group a list shows is the
-- group a bulk retry or purge takes.
CREATE FUNCTION evora.error_group(last_error text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN coalesce(left(split_part(last_error, E'\n', 1), 200), '');

-- Dead letters, the dashboard's most read filter, in id order (creation order: the page order
-- of ListJobs). Only DLQ rows are in these: a job pays for them when it is dead-lettered, not
-- before. ListJobs of DLQ jobs walks jobs_dlq_idx (every queue) or jobs_dlq_queue_idx (one
-- queue) instead of the primary key through every job; ListDeadLetterGroups walks the same
-- ones for its newest 10,000.
CREATE INDEX jobs_dlq_idx ON evora.jobs (id) WHERE state = 'DLQ';
CREATE INDEX jobs_dlq_queue_idx ON evora.jobs (queue, id) WHERE state = 'DLQ';

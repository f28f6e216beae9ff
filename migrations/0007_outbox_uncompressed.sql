-- A packed outbox row of a 1,000-job statement holds ~70 kB of arrays: past the TOAST
-- threshold, so PostgreSQL compressed each array (pglz) on the hot path, then the
-- projector decompressed it a moment later. Stored out of line without compression, the
-- claim of 1,000 jobs ran ~37 -> ~29 ms (EXPLAIN ANALYZE, scripts/explain-claim.ts).
ALTER TABLE evora.job_events
    ALTER COLUMN job_ids SET STORAGE EXTERNAL,
    ALTER COLUMN queues SET STORAGE EXTERNAL,
    ALTER COLUMN types SET STORAGE EXTERNAL,
    ALTER COLUMN kinds SET STORAGE EXTERNAL,
    ALTER COLUMN from_states SET STORAGE EXTERNAL,
    ALTER COLUMN to_states SET STORAGE EXTERNAL,
    ALTER COLUMN attempts SET STORAGE EXTERNAL,
    ALTER COLUMN worker_ids SET STORAGE EXTERNAL,
    ALTER COLUMN wait_ms SET STORAGE EXTERNAL,
    ALTER COLUMN run_ms SET STORAGE EXTERNAL;

-- evora.telemetry_recent_events keeps compression: its copies stay for a day (disk
-- matters more there), and they are written by the projector, off the hot path.

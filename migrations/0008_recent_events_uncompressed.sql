-- Second thoughts on 0007's last comment: the embedded sink's recent events are stored
-- without compression too. Compressing ~70 kB of arrays per 1,000 events cost the
-- projector ~5 ms per batch, on the same CPU as the queue, to save little (job ids are
-- random bytes); the disk cost is bounded by the sink's retention (a day by default).
ALTER TABLE evora.telemetry_recent_events
    ALTER COLUMN job_ids SET STORAGE EXTERNAL,
    ALTER COLUMN queues SET STORAGE EXTERNAL,
    ALTER COLUMN types SET STORAGE EXTERNAL,
    ALTER COLUMN kinds SET STORAGE EXTERNAL,
    ALTER COLUMN to_states SET STORAGE EXTERNAL,
    ALTER COLUMN attempts SET STORAGE EXTERNAL,
    ALTER COLUMN worker_ids SET STORAGE EXTERNAL;

-- The embedded telemetry sink's minute buckets are deleted once older than every read
-- (src/store/sql/telemetry-minutes-prune.sql, run by the projector): they grew forever. The
-- primary key leads with the queue, so finding the oldest minutes of every queue needs an
-- index by minute; with it a retention pass that finds nothing to delete reads one index
-- entry, and one that does reads only the rows it deletes.
CREATE INDEX telemetry_minutes_minute_idx ON evora.telemetry_minutes (minute);

-- A queue may delete its jobs at completion instead of keeping them as COMPLETED
-- (Queue.delete_on_complete; docs/api.md "Deleting jobs at completion"), as graphile-worker
-- does and BullMQ's removeOnComplete: the completion statement (sql/job-complete-many.sql)
-- deletes such a job in place of its second UPDATE: about 5 of the ~27 µs of backend CPU
-- a job's claim and completion cost, and a third of their WAL (docs/benchmarks.md). Its `completed` event is written all the same, so
-- stats, series and the telemetry sink count it; its result is not kept.
--
-- Must stay true: off by default (a queue keeps its jobs, results and idempotency keys as
-- before); a job with dependents is kept whatever the setting (its children read its
-- result), and so is a job that gains one while its completion waits for its row.
ALTER TABLE evora.queues ADD COLUMN delete_on_complete boolean NOT NULL DEFAULT false;

-- Every completion statement reads which queues delete: with thousands of queues and none
-- deleting, this empty index is what it reads, not the table.
CREATE INDEX queues_delete_on_complete_idx ON evora.queues (name) WHERE delete_on_complete;

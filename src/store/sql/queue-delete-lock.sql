-- name: queueDeleteLock
-- Takes the queue's advisory lock (class 7301847, hashtext of the name) exclusively, first in
-- DeleteQueue's transaction and until it ends. Every statement that inserts jobs takes it
-- shared for each queue it inserts into (evora.queues_ensure, 0025, called by
-- job-insert-many.sql and its siblings and by evora.submit_job), so the delete waits for the
-- submits under way to commit and then sees their jobs (its emptiness check is the next
-- statement, a fresh snapshot), and a submit that comes during the delete waits for it and
-- then makes the queue row again.
SELECT pg_advisory_xact_lock(7301847, hashtext(:name)) AS locked

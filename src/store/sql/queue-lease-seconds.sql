-- name: queueLeaseSeconds
-- The lease length of each of the given queues that exists (a worker's hello: its welcome's
-- lease_seconds is the shortest of its queues'). Reads only those rows, by the primary key,
-- so a hello costs the same with 5 queues in the database or 50,000 (it read them all, and
-- a deploy's reconnecting workers held every pooled connection). A queue that does not
-- exist has no row.
SELECT name, lease_seconds FROM evora.queues WHERE name = ANY(:queues::text[])

-- Global max_concurrency: how a claim learns how many more jobs a limited queue may run.
--
-- evora.queue_room(queue, max_concurrency) is called by the claim (src/store/sql/job-claim.sql)
-- for each queue whose max_concurrency is set, and only for those: an unlimited queue's claim
-- never calls it, takes no lock and counts nothing. It returns max_concurrency minus the
-- queue's RUNNING jobs (never below 0) after taking a transaction-level advisory lock on the
-- queue, so the claims of one limited queue, on any server, run one after another.
--
-- Why a function and not a lock inside the claim statement: in READ COMMITTED a statement's
-- snapshot is taken when it starts, so a lock taken inside it does not make its count see the
-- jobs that a concurrent claim (which held the lock) has just committed RUNNING. A VOLATILE
-- plpgsql function takes a fresh snapshot for each statement it runs, so the count below runs
-- after the lock is held and sees every claim that released it. The claim's own scan of
-- PENDING jobs still reads its older snapshot; rows a concurrent claim took are skipped by
-- its FOR UPDATE SKIP LOCKED (re-checked as RUNNING), as they always were.
--
-- Must stay true: the only moves into RUNNING are the claim and a submit's hand-off, and the
-- hand-off never happens for a limited queue (src/store/sql/job-insert-handoff.sql). The lock
-- is released when the claim's transaction commits, after its jobs are RUNNING. A claim of
-- several limited queues locks them in name order (the claim orders its queues), so two claims
-- cannot deadlock. The count walks jobs_running_lease_idx (every RUNNING job of every queue):
-- no new index, so unlimited queues pay nothing; a limited claim costs one index entry visit
-- per RUNNING job in the database.
CREATE FUNCTION evora.queue_room(queue_name text, max_concurrency integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    running bigint;
BEGIN
    -- Key space: hashtext of a prefixed name; a collision only makes two queues' claims wait
    -- for each other, never over-admits.
    PERFORM pg_advisory_xact_lock(hashtext('evora.queue_room:' || queue_name));
    SELECT count(*) INTO running FROM evora.jobs WHERE state = 'RUNNING' AND queue = queue_name;
    RETURN greatest(max_concurrency - running, 0);
END
$$;

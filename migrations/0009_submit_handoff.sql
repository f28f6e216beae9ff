-- A submit may hand its job straight to a worker: when a worker connected to the submitting
-- server has a free slot and a claim would pick the job at once, the submit's own statement
-- inserts it RUNNING under a fresh lease (src/store/store.ts, SQL_JOB_INSERT_HANDOFF), which
-- saves the NOTIFY and the claim's round trip to the database.
--
-- Such an insert is a creation and a claim in one: PENDING, then PENDING -> RUNNING. So a
-- job may now be created RUNNING, on its first attempt, when that transition is legal
-- (evora.job_state_transitions stays the one place that says what is legal), and only as a
-- claim leaves a job: a worker and a start time, nothing finished (the lease itself is
-- required by jobs_running_has_lease as for every RUNNING job). Every other state at
-- creation is still refused. Creations get a check of their own; the INSERT branch of
-- evora.job_state_transition_check() is no longer called.

CREATE FUNCTION evora.job_creation_check() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'PENDING' OR (
        NEW.state = 'RUNNING' AND NEW.attempt = 1
        AND NEW.worker_id IS NOT NULL AND NEW.started_at IS NOT NULL
        AND NEW.finished_at IS NULL AND NEW.result IS NULL
        AND EXISTS (
            SELECT 1 FROM evora.job_state_transitions
            WHERE from_state = 'PENDING' AND to_state = 'RUNNING'
        )
    ) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'evora: a job must be created PENDING (or RUNNING on its first attempt, handed to a worker and not finished), not % on attempt %',
        NEW.state, NEW.attempt
        USING ERRCODE = 'check_violation';
END
$$;

DROP TRIGGER jobs_state_transition_insert ON evora.jobs;

CREATE TRIGGER jobs_state_transition_insert
    BEFORE INSERT ON evora.jobs
    FOR EACH ROW WHEN (NEW.state <> 'PENDING')
    EXECUTE FUNCTION evora.job_creation_check();

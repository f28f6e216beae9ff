-- name: queueDelete
-- Deletes the queue :name with its settings when it is empty: no job of any state in it and
-- no schedule that submits into it; writes the audit event `queue.delete` (target: the
-- queue) in this statement. Answers one row: `found` (the queue exists) and `deleted`; a
-- queue found but not deleted is not empty (queue-contents.sql then says what is in it).
-- Must stay true: runs after queue-delete-lock.sql in the same transaction, so no submit
-- into the queue is under way. Each EXISTS walks an index that leads with the queue or holds
-- only its state's few rows (jobs_claimable_idx, jobs_finished_idx, the RUNNING lease and
-- WAITING indexes): a job table of millions is never scanned.
WITH target AS (
  SELECT q.name,
         NOT (EXISTS (SELECT 1 FROM evora.jobs j WHERE j.state = 'PENDING' AND j.queue = q.name)
           OR EXISTS (SELECT 1 FROM evora.jobs j WHERE j.state = 'RUNNING' AND j.queue = q.name)
           OR EXISTS (SELECT 1 FROM evora.jobs j WHERE j.state = 'WAITING' AND j.queue = q.name)
           OR EXISTS (SELECT 1 FROM evora.jobs j WHERE j.state IN ('COMPLETED', 'CANCELLED', 'DLQ') AND j.queue = q.name)
           OR EXISTS (SELECT 1 FROM evora.schedules s WHERE s.queue = q.name)) AS empty
  FROM evora.queues q
  WHERE q.name = :name
),
deleted AS (
  DELETE FROM evora.queues q USING target t WHERE q.name = t.name AND t.empty
  RETURNING q.name
),
audited AS (
  INSERT INTO evora.audit_events (at, actor_kind, token_id, token_name, action, target, change)
  SELECT coalesce(:now::timestamptz, now()), :actorKind, :actorTokenId::uuid, :actorName, 'queue.delete', d.name, '{}'::jsonb
  FROM deleted d
)
SELECT EXISTS (SELECT 1 FROM target) AS found, EXISTS (SELECT 1 FROM deleted) AS deleted

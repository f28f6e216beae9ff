-- name: jobParentsLock
-- The existing parents a dependency submit names (0011_dependencies.sql): locks them in id
-- order (two submits naming shared parents lock them in the same order), marks them
-- has_dependents (so their changes of state run the dependents trigger) and returns each
-- one's latest state. An id that names no job is missing from the result.
-- Must stay true: it runs in the submit's transaction, before the insert. A locking read in
-- READ COMMITTED returns the row's latest version, so a parent that completed while this
-- waited on it is seen COMPLETED (the child is created PENDING), and a parent that
-- completes after this waits for the submit to commit and then finds the WAITING child.
-- NOWAIT: a parent another transaction holds (a completion batch, which may hold several
-- parents in any order) fails this at once (55P03) instead of waiting, and the store runs
-- the submit again after a short pause: the submit never waits while holding a parent, so
-- it can never deadlock with a completion, and a completion batch is never the victim.
WITH locked AS (
  SELECT j.id, j.state FROM evora.jobs j WHERE j.id = ANY (:ids::uuid[]) ORDER BY j.id FOR NO KEY UPDATE NOWAIT
),
marked AS (
  UPDATE evora.jobs j SET has_dependents = true
  FROM locked l
  WHERE j.id = l.id AND NOT j.has_dependents
  RETURNING j.id
)
SELECT l.id, l.state FROM locked l WHERE (SELECT count(*) FROM marked) >= 0

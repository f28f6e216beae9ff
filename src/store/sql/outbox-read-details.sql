-- name: outboxReadDetails
-- outboxRead, plus each event's job id, type, attempt and worker (job_ids, types,
-- attempts, worker_ids appended to the array), for a sink that stores events (MongoDB).
-- Must stay true: the same rows and leading elements as outbox-read.sql.
SELECT id, at, n,
       json_build_array(CASE WHEN cardinality(array_positions(queues, queues[1])) = n THEN to_json(queues[1]) ELSE to_json(queues) END,
                        CASE WHEN cardinality(array_positions(kinds, kinds[1])) = n THEN to_json(kinds[1]) ELSE to_json(kinds) END,
                        CASE WHEN cardinality(array_positions(from_states, from_states[1])) = n THEN to_json(from_states[1]) ELSE to_json(from_states) END,
                        CASE WHEN cardinality(array_positions(to_states, to_states[1])) = n THEN to_json(to_states[1]) ELSE to_json(to_states) END,
                        wait_ms, run_ms, job_ids, types, attempts, worker_ids)::text AS e
FROM evora.job_events WHERE id <= :hiId AND xid < :horizon::xid8 ORDER BY id

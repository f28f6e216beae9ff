-- name: outboxRead
-- A projector batch's outbox rows (id <= :hiId, xid < :horizon), as the projection needs
-- them: one JSON array per row, [queues, kinds, from_states, to_states, wait_ms, run_ms],
-- where each of the first four is its one value when all of the row's events agree (NULLs
-- too; the usual case: one statement, one queue, one kind), else the whole array.
-- Must stay true: one text value per row is cheap to send and to parse (read whole, the
-- JSON of a row cost PostgreSQL ~2 us per event; this way ~0.4 us). The element order is
-- the PackedEvents tuple in src/store/outbox.ts.
SELECT id, at, n,
       json_build_array(CASE WHEN cardinality(array_positions(queues, queues[1])) = n THEN to_json(queues[1]) ELSE to_json(queues) END,
                        CASE WHEN cardinality(array_positions(kinds, kinds[1])) = n THEN to_json(kinds[1]) ELSE to_json(kinds) END,
                        CASE WHEN cardinality(array_positions(from_states, from_states[1])) = n THEN to_json(from_states[1]) ELSE to_json(from_states) END,
                        CASE WHEN cardinality(array_positions(to_states, to_states[1])) = n THEN to_json(to_states[1]) ELSE to_json(to_states) END,
                        wait_ms, run_ms)::text AS e
FROM evora.job_events WHERE id <= :hiId AND xid < :horizon::xid8 ORDER BY id

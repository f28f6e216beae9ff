-- minimal: a bare state change by id.
UPDATE evora.jobs j SET state = 'COMPLETED', finished_at = now() FROM unnest($1::uuid[]) AS c(id) WHERE j.id = c.id

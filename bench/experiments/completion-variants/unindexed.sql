-- unindexed: an update of one unindexed column (HOT when the page has room: FILLFACTOR=50).
UPDATE evora.jobs j SET finished_at = now() FROM unnest($1::uuid[]) AS c(id) WHERE j.id = c.id

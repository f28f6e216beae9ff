-- delete: what graphile-worker does with a completed job.
DELETE FROM evora.jobs j USING unnest($1::uuid[]) AS c(id) WHERE j.id = c.id

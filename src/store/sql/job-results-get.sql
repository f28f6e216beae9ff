-- name: jobResultsGet
-- The results of the given jobs (the parents of claimed jobs: LeasedJob.parent_results).
-- Run only when a claim took a job with parents, so a claim of jobs without parents never pays
-- for it. A job that no longer exists (pruned) is missing from the result.
SELECT j.id, j.result FROM evora.jobs j WHERE j.id = ANY (:ids::uuid[])

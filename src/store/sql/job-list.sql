-- name: jobList
-- Jobs newest first (id order is creation order: UUIDv7), filtered by queue, states, type,
-- idempotency key (exact; jobs_idempotency_idx, skipping over its queues when no queue is
-- given) and error group (evora.error_group, as the bulk statements match it; '' = no error;
-- checked on the rows the other filters' index walks reach) when given (null: any), one page
-- at a time: keyset on id below :afterId. The caller asks for one row more than a page to
-- know whether another page follows.
SELECT * FROM evora.jobs
WHERE (:queue::text IS NULL OR queue = :queue)
  AND (:states::evora.job_state[] IS NULL OR state = ANY(:states))
  AND (:type::text IS NULL OR type = :type)
  AND (:idempotencyKey::text IS NULL OR idempotency_key = :idempotencyKey)
  AND (:errorGroup::text IS NULL OR evora.error_group(last_error) = :errorGroup)
  AND (:afterId::uuid IS NULL OR id < :afterId)
ORDER BY id DESC
LIMIT :limit

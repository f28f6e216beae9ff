-- name: jobList
-- Jobs newest first (id order is creation order: UUIDv7), filtered by queue, states, type,
-- idempotency key (exact; jobs_idempotency_idx, skipping over its queues when no queue is
-- given) and error group (evora.error_group, as the bulk statements match it; '' = no error;
-- checked on the rows the other filters' index walks reach) when given (null: any), one page
-- at a time: keyset on id below :afterId. The caller asks for one row more than a page to
-- know whether another page follows.
-- A page also ends before the job that would begin past :pageBytes of JSON text (payload,
-- result, checkpoint and error; the first job always comes), so that a page of large jobs
-- is neither read into the server whole nor sent as one oversized message. page_rows is how
-- many rows the page held before that cut: more than the rows returned means it cut.
-- Only the jobs up to the cut are sized (a jsonb's text costs about 40 ms per MiB): the
-- window's running sum is computed row by row as `cut` reads them, and its LIMIT 1 stops at
-- the first job past the bound. Sizing the whole page instead cost a page of 1,000 such
-- jobs some 40 s for the one or two it returns, and walking N of them page by page N times that.
WITH page AS MATERIALIZED (
  SELECT * FROM evora.jobs
  WHERE (:queue::text IS NULL OR queue = :queue)
    AND (:states::evora.job_state[] IS NULL OR state = ANY(:states))
    AND (:type::text IS NULL OR type = :type)
    AND (:idempotencyKey::text IS NULL OR idempotency_key = :idempotencyKey)
    AND (:errorGroup::text IS NULL OR evora.error_group(last_error) = :errorGroup)
    AND (:afterId::uuid IS NULL OR id < :afterId)
  ORDER BY id DESC
  LIMIT :limit
), cut AS MATERIALIZED (
  SELECT id FROM (
    SELECT id,
           coalesce(sum(octet_length(payload::text) + coalesce(octet_length(result::text), 0)
                        + coalesce(octet_length(checkpoint::text), 0) + coalesce(octet_length(last_error), 0))
                    OVER (ORDER BY id DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS bytes_before
    FROM page
  ) sized
  WHERE bytes_before >= :pageBytes
  LIMIT 1
)
SELECT page.*, (SELECT count(*) FROM page) AS page_rows
FROM page
WHERE page.id > ALL (SELECT id FROM cut)
ORDER BY page.id DESC

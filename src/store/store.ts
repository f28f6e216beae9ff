import pg from 'pg';
import { EvoraError, alreadyExists, failedPrecondition, invalidArgument, notFound } from '../domain/errors.js';
import { isUuid, uuidv7 } from '../domain/ids.js';
import { STORE_SESSION_OPTIONS, storeTypes } from './types.js';
import type { BackoffKind, Queue, QueueUpsertInput } from '../domain/queue.js';
import type { Job, JobListParams, JobState, JobSubmitInput, JobSubmitResult, JobWritten, JsonObject, LeaseRef, LeaseWriteOutcome, SweepResult } from '../domain/job.js';
import type { JobEventKind, OutboxEvents } from '../domain/events.js';

/**
 * The store: the only code in Evora that speaks SQL to the queue tables. Every operation
 * is one statement or one short transaction, takes one params object, and is batch-shaped
 * (unnest over arrays) where the server calls it in bulk. Every time-dependent operation
 * takes an optional `now`; when absent the database clock decides, so that many server
 * processes agree on time.
 */

/** NOTIFY channel that names a queue which has work claimable now. */
export const CHANNEL_JOB_AVAILABLE = 'evora_job_available';
/** NOTIFY channel that names a RUNNING job an operator has asked to cancel. */
export const CHANNEL_JOB_CANCEL = 'evora_job_cancel';

interface JobRow {
  id: string;
  queue: string;
  type: string;
  payload: JsonObject;
  state: JobState;
  priority: number;
  run_at: Date;
  attempt: number;
  max_attempts: number;
  lease_token: string | null;
  locked_until: Date | null;
  worker_id: string | null;
  idempotency_key: string | null;
  result: JsonObject | null;
  last_error: string | null;
  cancel_requested_at: Date | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

interface QueueRow {
  name: string;
  max_attempts: number;
  backoff_kind: BackoffKind;
  backoff_base_seconds: number;
  backoff_cap_seconds: number;
  backoff_jitter: number;
  lease_seconds: number;
  paused: boolean;
  max_concurrency: number | null;
  created_at: Date;
  updated_at: Date;
}

function jobFromRow(r: JobRow): Job {
  return {
    id: r.id,
    queue: r.queue,
    type: r.type,
    payload: r.payload,
    state: r.state,
    priority: r.priority,
    runAt: r.run_at,
    attempt: r.attempt,
    maxAttempts: r.max_attempts,
    leaseToken: r.lease_token,
    lockedUntil: r.locked_until,
    workerId: r.worker_id,
    idempotencyKey: r.idempotency_key,
    result: r.result,
    lastError: r.last_error,
    cancelRequestedAt: r.cancel_requested_at,
    createdAt: r.created_at,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
  };
}

function jobWrittenFromRow(r: JobRow): JobWritten {
  return { id: r.id, queue: r.queue, type: r.type, state: r.state, attempt: r.attempt, workerId: r.worker_id, lastError: r.last_error };
}

function queueFromRow(r: QueueRow): Queue {
  return {
    name: r.name,
    maxAttempts: r.max_attempts,
    backoffKind: r.backoff_kind,
    backoffBaseSeconds: r.backoff_base_seconds,
    backoffCapSeconds: r.backoff_cap_seconds,
    backoffJitter: r.backoff_jitter,
    leaseSeconds: r.lease_seconds,
    paused: r.paused,
    maxConcurrency: r.max_concurrency,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

// ---------------------------------------------------------------------------------------
// SQL. Each statement is whole here so a reviewer can read it in one place.
// `coalesce($n::timestamptz, now())` is how every statement takes an optional `now`.
// Statements that make work claimable right away send one NOTIFY per queue through the
// `woken` CTE; the `(SELECT count(*) FROM woken) >= 0` guard forces it to run (a SELECT
// CTE that nothing reads is never evaluated). NOTIFY is delivered at commit, so a woken
// dispatcher never looks for rows it cannot see yet.
// ---------------------------------------------------------------------------------------

/**
 * The outbox CTE: one packed job_events row holding the events of every job the statement
 * changed (migrations/0006_packed_outbox.sql), in the same statement as the change; no row
 * when it changed none. `source` is the CTE holding the changed rows (new values); the
 * other arguments are SQL expressions over those rows. All the array_agg calls read the
 * rows in one pass, so element i of each array is the same job.
 */
function eventsCte(e: { source: string; kind: string; fromState: string; at: string; waitMs?: string; runMs?: string }): string {
  return `events AS (
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT max(${e.at}), count(*), array_agg(id), array_agg(queue), array_agg(type),
         array_agg((${e.kind})::evora.job_event_kind), array_agg((${e.fromState})::evora.job_state), array_agg(state),
         array_agg(attempt), array_agg(worker_id),
         array_agg((${e.waitMs ?? 'NULL'})::float8), array_agg((${e.runMs ?? 'NULL'})::float8)
  FROM ${e.source}
  HAVING count(*) > 0
)`;
}

/** Milliseconds between two timestamptz expressions. */
const msBetween = (from: string, to: string) => `extract(epoch FROM (${to}) - (${from})) * 1000`;

/** What the statements that change a failed attempt's state record: by where the job went. */
const FAILURE_KIND = (retryKind: string) => `(CASE state
      WHEN 'PENDING' THEN '${retryKind}'
      WHEN 'DLQ' THEN 'dead_lettered'
      ELSE 'cancelled' END)::evora.job_event_kind`;

/**
 * The submit statement: inserts the jobs PENDING with one `submitted` event each, and wakes
 * each queue that got a job due now. A new queue gets its row with the defaults.
 *
 * With `handoff` (SQL_JOB_INSERT_HANDOFF, for a single job: jobSubmit), $10 names a worker
 * of this server with a free slot, and the job is leased to it in this statement when a
 * claim would pick it now: its queue exists and is not paused, it is due, and no claimable
 * job waits in the queue. Such a job is created RUNNING (migrations/0009_submit_handoff.sql),
 * records two events, submitted then claimed, and wakes no one. Batches use the statement
 * without it, which costs them nothing. The hand-off statement takes its one job as scalars,
 * not arrays: over arrays the plan cache never settled on a generic plan (it costs an
 * `unnest` of a parameter at ten rows) and planned every submit again, 1.2 ms of a 2 ms
 * statement (test/store/plans.test.ts checks it settles).
 */
function jobInsertSql(opts: { handoff: boolean }): string {
  const now = 'coalesce($9::timestamptz, now())';
  // The hand-off's conditions, on the queue row the insert already joined (none for a new queue).
  const handoffJoin = `
  LEFT JOIN LATERAL (
    SELECT q.lease_seconds
    WHERE NOT q.paused
      AND coalesce(i.run_at, ${now}) <= ${now}
      AND (
        -- The first job a claim would take, looked up the way a claim walks the index (an
        -- EXISTS gets planned as a scan of every queue's waiting jobs once there are many).
        SELECT j.id FROM evora.jobs j
        WHERE j.state = 'PENDING' AND j.queue = i.queue AND j.run_at <= ${now}
        ORDER BY j.priority, j.run_at, j.id
        LIMIT 1
      ) IS NULL
  ) h ON true`;
  const leaseColumns = `,
                          state, attempt, lease_token, locked_until, worker_id, started_at`;
  const leaseValues = `,
         (CASE WHEN h.lease_seconds IS NULL THEN 'PENDING' ELSE 'RUNNING' END)::evora.job_state,
         CASE WHEN h.lease_seconds IS NULL THEN 0 ELSE 1 END,
         CASE WHEN h.lease_seconds IS NOT NULL THEN gen_random_uuid() END,
         ${now} + make_interval(secs => h.lease_seconds),
         CASE WHEN h.lease_seconds IS NOT NULL THEN $10::text END,
         CASE WHEN h.lease_seconds IS NOT NULL THEN ${now} END`;
  const events = opts.handoff
    ? `changes AS (
  SELECT id, queue, type, 'submitted'::evora.job_event_kind AS kind, NULL::evora.job_state AS from_state,
         'PENDING'::evora.job_state AS state, 0 AS attempt, NULL::text AS worker_id, created_at AS at,
         NULL::float8 AS wait_ms
  FROM inserted
  UNION ALL
  SELECT id, queue, type, 'claimed', 'PENDING', state, attempt, worker_id, started_at, ${msBetween('run_at', 'started_at')}
  FROM inserted WHERE state = 'RUNNING'
),
${eventsCte({ source: 'changes', kind: 'kind', fromState: 'from_state', at: 'at', waitMs: 'wait_ms' })}`
    : eventsCte({ source: 'inserted', kind: "'submitted'", fromState: 'NULL', at: 'created_at' });
  return `
WITH input AS (${opts.handoff ? `
  SELECT $1::uuid AS id, $2::text AS queue, $3::text AS type, $4::jsonb AS payload, $5::int AS priority,
         $6::timestamptz AS run_at, $7::text AS idempotency_key, $8::int AS max_attempts` : `
  SELECT *
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[], $5::int[], $6::timestamptz[], $7::text[], $8::int[])
    AS i(id, queue, type, payload, priority, run_at, idempotency_key, max_attempts)`}
),
new_queues AS (
  INSERT INTO evora.queues (name)
  SELECT DISTINCT i.queue FROM input i
  WHERE NOT EXISTS (SELECT 1 FROM evora.queues q WHERE q.name = i.queue)
  ON CONFLICT (name) DO NOTHING
  RETURNING name, max_attempts
),
inserted AS (
  INSERT INTO evora.jobs (id, queue, type, payload, priority, run_at, idempotency_key, max_attempts, created_at${opts.handoff ? leaseColumns : ''})
  SELECT i.id, i.queue, i.type, i.payload, i.priority,
         coalesce(i.run_at, ${now}),
         i.idempotency_key,
         coalesce(i.max_attempts, q.max_attempts, nq.max_attempts),
         ${now}${opts.handoff ? leaseValues : ''}
  FROM input i
  LEFT JOIN evora.queues q ON q.name = i.queue
  LEFT JOIN new_queues nq ON nq.name = i.queue${opts.handoff ? handoffJoin : ''}
  ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
  RETURNING *
),
${events},
woken AS (
  SELECT pg_notify('${CHANNEL_JOB_AVAILABLE}', d.queue)
  FROM (SELECT DISTINCT queue FROM inserted WHERE state = 'PENDING' AND run_at <= ${now}) d
)
SELECT * FROM inserted WHERE (SELECT count(*) FROM woken) >= 0`;
}

const SQL_JOB_INSERT_MANY = jobInsertSql({ handoff: false });
const SQL_JOB_INSERT_HANDOFF = jobInsertSql({ handoff: true });

// Run in a fresh snapshot after the insert, so it sees a conflicting row that a concurrent
// submit committed while our insert waited on it.
const SQL_JOB_FIND_BY_KEYS = `
SELECT j.*, (j.type = k.type AND j.payload = k.payload) AS same_content
FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[]) AS k(queue, idempotency_key, type, payload)
JOIN evora.jobs j ON j.queue = k.queue AND j.idempotency_key = k.idempotency_key`;

// Per queue, a LATERAL scan of the claimable index in (priority, run_at, id) order that stops
// after $2 rows, so the cost is independent of how many jobs wait or have finished; then
// the best $2 across the queues. Rows another claimer holds are skipped, not waited on.
const SQL_JOB_CLAIM = `
WITH claimable_queues AS (
  SELECT name, lease_seconds FROM evora.queues WHERE name = ANY($1::text[]) AND NOT paused
),
picked AS (
  SELECT c.id, c.priority, c.run_at
  FROM claimable_queues q
  CROSS JOIN LATERAL (
    SELECT j.id, j.priority, j.run_at
    FROM evora.jobs j
    WHERE j.state = 'PENDING' AND j.queue = q.name AND j.run_at <= coalesce($4::timestamptz, now())
    ORDER BY j.priority, j.run_at, j.id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  ) c
  ORDER BY c.priority, c.run_at, c.id
  LIMIT $2
),
slotted AS (
  -- The i-th best job goes to the i-th slot: the dispatcher hands out slots round-robin.
  -- Slot i belongs to worker $3[$5[i]]: the distinct worker ids and one small int per slot
  -- (an int array is read by offset; sending 2,000 copies of a worker id cost both sides).
  SELECT p.id, p.slot, ($3::text[])[($5::int[])[p.slot]] AS worker_id
  FROM (SELECT id, row_number() OVER (ORDER BY priority, run_at, id) AS slot FROM picked) p
),
claimed AS (
  UPDATE evora.jobs j
  SET state = 'RUNNING',
      attempt = j.attempt + 1,
      lease_token = gen_random_uuid(),
      locked_until = coalesce($4::timestamptz, now()) + make_interval(secs => q.lease_seconds),
      worker_id = s.worker_id,
      started_at = coalesce($4::timestamptz, now()),
      cancel_requested_at = NULL
  FROM slotted s, claimable_queues q
  WHERE j.id = s.id AND q.name = j.queue
    -- Says nothing new, but makes the planner fetch the rows by primary key: without it, on
    -- a table of a few ten thousand rows it joined them by a sequential scan, 3x slower for
    -- a claim of 100 (test/store/plans.test.ts).
    AND j.id = ANY (ARRAY(SELECT id FROM picked))
  RETURNING j.id, j.queue, j.type, j.payload, j.state, j.priority, j.run_at, j.attempt, j.max_attempts,
            j.lease_token, j.locked_until, j.worker_id, j.idempotency_key, j.last_error, j.created_at,
            j.started_at, s.slot
),
${eventsCte({ source: 'claimed', kind: "'claimed'", fromState: "'PENDING'", at: 'started_at', waitMs: msBetween('run_at', 'started_at') })}
-- Not sent back: state (RUNNING), worker_id (the caller named it), and result, finished_at
-- and cancel_requested_at (NULL after a claim); every column read back costs the server.
SELECT id, queue, type, payload, priority, run_at, attempt, max_attempts, lease_token, locked_until,
       idempotency_key, last_error, created_at, started_at, slot
FROM claimed`;

/** A column of an outbox row as JSON: its one value when all are equal (NULLs too), else the array. */
const outboxColumnJson = (c: string) =>
  `CASE WHEN cardinality(array_positions(${c}, ${c}[1])) = n THEN to_json(${c}[1]) ELSE to_json(${c}) END`;

/**
 * The projector's read of a batch's outbox rows: what the projection needs (OutboxEvents),
 * and with `details` each event's job id, type, attempt and worker, for a sink that stores
 * events.
 */
const outboxReadSql = (opts: { details: boolean }) => `
SELECT id, at, n,
       json_build_array(${['queues', 'kinds', 'from_states', 'to_states'].map(outboxColumnJson).join(',\n                        ')},
                        wait_ms, run_ms${opts.details ? ', job_ids, types, attempts, worker_ids' : ''})::text AS e
FROM evora.job_events WHERE id <= $1 AND xid < $2::xid8 ORDER BY id`;

const SQL_OUTBOX_READ = outboxReadSql({ details: false });
const SQL_OUTBOX_READ_DETAILS = outboxReadSql({ details: true });

/**
 * "The job is RUNNING", written so that the planner cannot use it to pick the partial
 * jobs_running_lease_idx: a write by lease must find its rows by primary key. With
 * `j.state = 'RUNNING'` the planner, trusting statistics taken while few jobs ran, walked
 * the whole lease index instead: with 55,000 jobs running, completing one took ~60 ms.
 */
const HELD = `(CASE WHEN j.state = 'RUNNING' THEN true END)`;

const SQL_JOB_HEARTBEAT_MANY = `
UPDATE evora.jobs j
SET locked_until = coalesce($3::timestamptz, now()) + make_interval(secs => q.lease_seconds)
FROM unnest($1::uuid[], $2::uuid[]) AS l(id, token), evora.queues q
WHERE j.id = l.id AND j.lease_token = l.token AND ${HELD} AND q.name = j.queue
RETURNING j.id, j.locked_until, j.cancel_requested_at`;

// Worker writes take one report per lease (DISTINCT ON (id, token)): a stale and a fresh
// report of one job in the same batch are both kept, and only the fresh token matches.
const SQL_JOB_COMPLETE_MANY = `
WITH input AS (
  SELECT DISTINCT ON (id, token) * FROM unnest($1::uuid[], $2::uuid[], $3::jsonb[]) AS c(id, token, result)
),
updated AS (
  UPDATE evora.jobs j
  SET state = 'COMPLETED',
      result = c.result,
      locked_until = NULL,
      finished_at = coalesce($4::timestamptz, now())
  FROM input c
  WHERE j.id = c.id AND j.lease_token = c.token AND ${HELD}
  RETURNING j.id, j.lease_token, j.queue, j.type, j.state, j.attempt, j.worker_id, j.last_error, j.started_at, j.finished_at
),
${eventsCte({ source: 'updated', kind: "'completed'", fromState: "'RUNNING'", at: 'finished_at', runMs: msBetween('started_at', 'finished_at') })}
SELECT id, lease_token, queue, type, state, attempt, worker_id, last_error FROM updated`;

// Lock the leased rows first (FOR UPDATE returns their latest version), decide each next
// state from that version, then write it.
const SQL_JOB_FAIL_MANY = `
WITH input AS (
  SELECT DISTINCT ON (id, token) *
  FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::bool[], $5::timestamptz[])
    AS f(id, token, error, retryable, retry_at)
),
locked AS (
  SELECT j.id, f.error, f.retry_at,
         evora.job_state_after_failure(j.cancel_requested_at IS NOT NULL, f.retryable, j.attempt, j.max_attempts) AS next_state,
         evora.backoff_seconds(q.backoff_kind, q.backoff_base_seconds, q.backoff_cap_seconds, q.backoff_jitter,
                               j.attempt, random()) AS backoff
  FROM input f
  JOIN evora.jobs j ON j.id = f.id
  JOIN evora.queues q ON q.name = j.queue
  WHERE j.lease_token = f.token AND ${HELD}
  FOR UPDATE OF j
),
updated AS (
  UPDATE evora.jobs j
  SET state = l.next_state,
      run_at = CASE WHEN l.next_state = 'PENDING'
                    THEN coalesce(l.retry_at, coalesce($6::timestamptz, now()) + make_interval(secs => l.backoff))
                    ELSE j.run_at END,
      last_error = l.error,
      locked_until = NULL,
      finished_at = CASE WHEN l.next_state = 'PENDING' THEN NULL ELSE coalesce($6::timestamptz, now()) END
  FROM locked l
  WHERE j.id = l.id
  RETURNING j.*
),
${eventsCte({ source: 'updated', kind: FAILURE_KIND('failed_retrying'), fromState: "'RUNNING'", at: 'coalesce($6::timestamptz, now())', runMs: msBetween('started_at', 'coalesce($6::timestamptz, now())') })},
woken AS (
  SELECT pg_notify('${CHANNEL_JOB_AVAILABLE}', d.queue)
  FROM (SELECT DISTINCT queue FROM updated WHERE state = 'PENDING' AND run_at <= coalesce($6::timestamptz, now())) d
)
SELECT * FROM updated WHERE (SELECT count(*) FROM woken) >= 0`;

// A snooze gives the attempt back: the job did not fail, it asked to run later.
const SQL_JOB_SNOOZE_MANY = `
WITH input AS (
  SELECT DISTINCT ON (id, token) * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS s(id, token, run_at)
),
locked AS (
  SELECT j.id, s.run_at,
         CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'CANCELLED'::evora.job_state
              ELSE 'PENDING'::evora.job_state END AS next_state
  FROM input s JOIN evora.jobs j ON j.id = s.id
  WHERE j.lease_token = s.token AND ${HELD}
  FOR UPDATE OF j
),
updated AS (
  UPDATE evora.jobs j
  SET state = l.next_state,
      run_at = CASE WHEN l.next_state = 'PENDING' THEN l.run_at ELSE j.run_at END,
      attempt = CASE WHEN l.next_state = 'PENDING' THEN greatest(j.attempt - 1, 0) ELSE j.attempt END,
      locked_until = NULL,
      finished_at = CASE WHEN l.next_state = 'PENDING' THEN NULL ELSE coalesce($4::timestamptz, now()) END
  FROM locked l
  WHERE j.id = l.id
  RETURNING j.*
),
${eventsCte({ source: 'updated', kind: FAILURE_KIND('snoozed'), fromState: "'RUNNING'", at: 'coalesce($4::timestamptz, now())', runMs: msBetween('started_at', 'coalesce($4::timestamptz, now())') })},
woken AS (
  SELECT pg_notify('${CHANNEL_JOB_AVAILABLE}', d.queue)
  FROM (SELECT DISTINCT queue FROM updated WHERE state = 'PENDING' AND run_at <= coalesce($4::timestamptz, now())) d
)
SELECT * FROM updated WHERE (SELECT count(*) FROM woken) >= 0`;

// PENDING: cancelled at once. RUNNING: flagged, and the holder's server is told through
// NOTIFY so it can push `cancel` to the worker; the job becomes CANCELLED when the worker
// gives it up or its lease expires. CANCELLED: answered as it is (cancel is idempotent).
const SQL_JOB_CANCEL = `
WITH updated AS (
  UPDATE evora.jobs j
  SET state = CASE WHEN j.state = 'PENDING' THEN 'CANCELLED'::evora.job_state ELSE j.state END,
      finished_at = CASE WHEN j.state = 'PENDING' THEN coalesce($2::timestamptz, now()) ELSE j.finished_at END,
      cancel_requested_at = CASE WHEN j.state = 'RUNNING'
                                 THEN coalesce(j.cancel_requested_at, coalesce($2::timestamptz, now()))
                                 ELSE j.cancel_requested_at END
  WHERE j.id = $1 AND j.state IN ('PENDING', 'RUNNING')
  RETURNING j.*
),
${eventsCte({ source: "(SELECT * FROM updated WHERE state = 'CANCELLED') c", kind: "'cancelled'", fromState: "'PENDING'", at: 'finished_at' })},
told AS (
  SELECT pg_notify('${CHANNEL_JOB_CANCEL}', u.id::text) FROM updated u WHERE u.state = 'RUNNING'
)
SELECT * FROM updated WHERE (SELECT count(*) FROM told) >= 0`;

const SQL_JOB_RETRY = `
WITH previous AS (
  SELECT id, state FROM evora.jobs WHERE id = $1 AND state IN ('DLQ', 'CANCELLED') FOR UPDATE
),
updated AS (
  UPDATE evora.jobs j
  SET state = 'PENDING',
      attempt = 0,
      run_at = coalesce($2::timestamptz, now()),
      lease_token = NULL,
      locked_until = NULL,
      worker_id = NULL,
      result = NULL,
      cancel_requested_at = NULL,
      started_at = NULL,
      finished_at = NULL
  FROM previous p
  WHERE j.id = p.id
  RETURNING j.*, p.state AS previous_state
),
${eventsCte({ source: 'updated', kind: "'retried_manually'", fromState: 'previous_state', at: 'run_at' })},
woken AS (
  SELECT pg_notify('${CHANNEL_JOB_AVAILABLE}', d.queue) FROM (SELECT DISTINCT queue FROM updated) d
)
SELECT * FROM updated WHERE (SELECT count(*) FROM woken) >= 0`;

// The visibility sweeper's statement. SKIP LOCKED lets a worker's concurrent complete win
// the row; the attempt was already counted at claim time.
const SQL_JOB_SWEEP_EXPIRED = `
WITH expired AS (
  SELECT j.id,
         evora.job_state_after_failure(j.cancel_requested_at IS NOT NULL, true, j.attempt, j.max_attempts) AS next_state,
         evora.backoff_seconds(q.backoff_kind, q.backoff_base_seconds, q.backoff_cap_seconds, q.backoff_jitter,
                               j.attempt, random()) AS backoff
  FROM evora.jobs j
  JOIN evora.queues q ON q.name = j.queue
  WHERE j.state = 'RUNNING' AND j.locked_until < coalesce($2::timestamptz, now())
  ORDER BY j.locked_until
  LIMIT $1
  FOR UPDATE OF j SKIP LOCKED
),
updated AS (
  UPDATE evora.jobs j
  SET state = e.next_state,
      run_at = CASE WHEN e.next_state = 'PENDING'
                    THEN coalesce($2::timestamptz, now()) + make_interval(secs => e.backoff)
                    ELSE j.run_at END,
      last_error = 'lease expired (worker ' || coalesce(j.worker_id, 'unknown') || ')',
      locked_until = NULL,
      finished_at = CASE WHEN e.next_state = 'PENDING' THEN NULL ELSE coalesce($2::timestamptz, now()) END
  FROM expired e
  WHERE j.id = e.id
  RETURNING j.*
),
${eventsCte({ source: 'updated', kind: FAILURE_KIND('lease_expired'), fromState: "'RUNNING'", at: 'coalesce($2::timestamptz, now())', runMs: msBetween('started_at', 'coalesce($2::timestamptz, now())') })},
woken AS (
  SELECT pg_notify('${CHANNEL_JOB_AVAILABLE}', d.queue)
  FROM (SELECT DISTINCT queue FROM updated WHERE state = 'PENDING' AND run_at <= coalesce($2::timestamptz, now())) d
)
SELECT * FROM updated WHERE (SELECT count(*) FROM woken) >= 0`;

const SQL_JOB_LIST = `
SELECT * FROM evora.jobs
WHERE ($1::text IS NULL OR queue = $1)
  AND ($2::evora.job_state[] IS NULL OR state = ANY($2))
  AND ($3::text IS NULL OR type = $3)
  AND ($4::uuid IS NULL OR id < $4)
ORDER BY id DESC
LIMIT $5`;

const SQL_QUEUE_UPSERT = `
INSERT INTO evora.queues AS q (name, max_attempts, backoff_kind, backoff_base_seconds, backoff_cap_seconds,
                               backoff_jitter, lease_seconds, max_concurrency)
VALUES ($1,
        coalesce($2::int, 5), coalesce($3::evora.backoff_kind, 'exponential'),
        coalesce($4::float8, 5), coalesce($5::float8, 3600), coalesce($6::float8, 0.2),
        coalesce($7::int, 30), nullif($8::int, 0))
ON CONFLICT (name) DO UPDATE SET
  max_attempts = coalesce($2::int, q.max_attempts),
  backoff_kind = coalesce($3::evora.backoff_kind, q.backoff_kind),
  backoff_base_seconds = coalesce($4::float8, q.backoff_base_seconds),
  backoff_cap_seconds = coalesce($5::float8, q.backoff_cap_seconds),
  backoff_jitter = coalesce($6::float8, q.backoff_jitter),
  lease_seconds = coalesce($7::int, q.lease_seconds),
  max_concurrency = CASE WHEN $8::int IS NULL THEN q.max_concurrency ELSE nullif($8::int, 0) END,
  updated_at = now()
RETURNING *`;

// ---------------------------------------------------------------------------------------

/** Connection settings for the store's pool. */
export interface StoreOptions {
  connectionString: string;
  /** Pool size; the dispatcher, the unary API and the maintenance services share it. */
  maxConnections?: number;
  /** Name shown in pg_stat_activity. */
  applicationName?: string;
  /**
   * Claims commit with synchronous_commit off, on a pool of their own (half the size of
   * the main one, on top of it). Off by default; see Store.claimPool.
   */
  claimAsyncCommit?: boolean;
}

const PG_NOT_NULL_VIOLATION = '23502';

function pgCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

/**
 * The store. Owns the connection pool; `close()` ends it. Safe for concurrent use.
 */
export class Store {
  readonly pool: pg.Pool;
  /**
   * Where claims run. By default the main pool. With claimAsyncCommit, a pool of sessions
   * with synchronous_commit off, so a claim returns without waiting for its WAL flush.
   * Nothing is lost: if PostgreSQL crashes before the flush, the job is PENDING again
   * after recovery (its claimed event gone with it, one transaction) and is claimed again;
   * the worker that got it holds a token the database never kept, so its writes are
   * refused. A completion commits synchronously and its flush carries the claim's WAL, so
   * a durable completion never outlives its claim. The price (why it is opt-in): the first
   * run may overlap the second until its next heartbeat, and the attempt that claim
   * counted is lost, so a job that crashes the database right after its claim never
   * reaches the DLQ. Submits, completions, failures and operator writes stay synchronous.
   */
  private readonly claimPool: pg.Pool;

  constructor(readonly options: StoreOptions) {
    const common = {
      connectionString: options.connectionString,
      application_name: options.applicationName ?? 'evora',
      types: storeTypes,
    };
    // UTC sessions: timestamps arrive in the one form storeTypes reads fast.
    this.pool = new pg.Pool({ ...common, max: options.maxConnections ?? 10, options: STORE_SESSION_OPTIONS });
    this.claimPool = options.claimAsyncCommit
      ? new pg.Pool({
          ...common,
          max: Math.max(2, Math.ceil((options.maxConnections ?? 10) / 2)),
          options: `${STORE_SESSION_OPTIONS} -c synchronous_commit=off`,
        })
      : this.pool;
    // An idle client that loses its connection must not crash the process; the pool
    // replaces it on the next checkout.
    this.pool.on('error', () => undefined);
    if (this.claimPool !== this.pool) this.claimPool.on('error', () => undefined);
  }

  /** Ends the pools. Safe to call twice. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([this.pool.end(), this.claimPool !== this.pool ? this.claimPool.end() : undefined]);
  }
  private closed = false;

  // ----- jobs: producers ---------------------------------------------------------------

  /**
   * Submits one job; see jobSubmitMany. With `handoffWorkerId` (a worker of the caller's
   * with a free slot) the job is leased to that worker in the same statement when a claim
   * would pick it now, and comes back RUNNING with its lease; otherwise it comes back as
   * jobSubmitMany leaves it. The caller must push a RUNNING job to that worker or release it.
   */
  async jobSubmit(params: { job: JobSubmitInput; now?: Date; handoffWorkerId?: string }): Promise<JobSubmitResult> {
    const [result] = await this.submit([params.job], params.now, params.handoffWorkerId ?? null);
    if (!result) throw new Error('evora: submit returned no result');
    return result;
  }

  /**
   * Submits jobs, all or nothing. A job with an idempotency key that its queue already
   * holds is a replay: the existing job is returned with created=false, unless its type or
   * payload differ, which is refused (ALREADY_EXISTS) and changes nothing. Results come
   * in input order.
   */
  async jobSubmitMany(params: { jobs: JobSubmitInput[]; now?: Date }): Promise<JobSubmitResult[]> {
    return this.submit(params.jobs, params.now, null);
  }

  private async submit(jobs: JobSubmitInput[], now: Date | undefined, handoffWorkerId: string | null): Promise<JobSubmitResult[]> {
    if (jobs.length === 0) return [];
    const ids = jobs.map(() => uuidv7());
    const columns = [
      ids,
      jobs.map((j) => j.queue),
      jobs.map((j) => j.type),
      jobs.map((j) => JSON.stringify(j.payload ?? {})),
      jobs.map((j) => j.priority ?? 0),
      jobs.map((j) => j.runAt ?? null),
      jobs.map((j) => j.idempotencyKey || null),
      jobs.map((j) => (j.maxAttempts && j.maxAttempts > 0 ? j.maxAttempts : null)),
    ];
    // The hand-off statement takes one job as scalars (see jobInsertSql), batches take arrays.
    const args = handoffWorkerId === null ? [...columns, now ?? null] : [...columns.map((c) => c[0]), now ?? null, handoffWorkerId];
    const statement =
      handoffWorkerId === null
        ? { name: 'evora_job_insert_many', text: SQL_JOB_INSERT_MANY }
        : { name: 'evora_job_insert_handoff', text: SQL_JOB_INSERT_HANDOFF };
    const anyKey = jobs.some((j) => j.idempotencyKey);
    // Without keys, or with a single job, one autocommit statement is atomic by itself. A
    // batch with keys needs a transaction: a refused replay must undo the batch's inserts.
    const transactional = anyKey && jobs.length > 1;
    for (let tries = 1; ; tries++) {
      const client = await this.pool.connect();
      let inTransaction = false;
      try {
        if (transactional) {
          await client.query('BEGIN');
          inTransaction = true;
        }
        const inserted = await client.query<JobRow>({ ...statement, values: args });
        const byId = new Map(inserted.rows.map((r) => [r.id, r]));
        const results: (JobSubmitResult | undefined)[] = ids.map((id) => {
          const row = byId.get(id);
          return row ? { job: jobFromRow(row), created: true } : undefined;
        });
        const missing = jobs.map((j, i) => ({ j, i })).filter(({ i }) => !results[i]);
        if (missing.length > 0) {
          const found = await client.query<JobRow & { same_content: boolean }>(SQL_JOB_FIND_BY_KEYS, [
            missing.map(({ j }) => j.queue),
            missing.map(({ j }) => j.idempotencyKey),
            missing.map(({ j }) => j.type),
            missing.map(({ j }) => JSON.stringify(j.payload ?? {})),
          ]);
          const byKey = new Map(found.rows.map((r) => [`${r.queue}\u0000${r.idempotency_key}`, r]));
          for (const { j, i } of missing) {
            const row = byKey.get(`${j.queue}\u0000${j.idempotencyKey}`);
            if (!row) throw new RetrySubmit('the conflicting job vanished');
            if (!row.same_content) {
              throw alreadyExists(
                `idempotency key "${j.idempotencyKey}" in queue "${j.queue}" already names job ${row.id} with a different type or payload`,
              );
            }
            results[i] = { job: jobFromRow(row), created: false };
          }
        }
        if (inTransaction) await client.query('COMMIT');
        inTransaction = false;
        return results as JobSubmitResult[];
      } catch (err) {
        if (inTransaction) await client.query('ROLLBACK').catch(() => undefined);
        // Two first submits to a new queue can race on creating its row; the loser sees
        // neither row in its snapshot and leaves max_attempts NULL. Trying again sees it.
        const retryable = err instanceof RetrySubmit || pgCode(err) === PG_NOT_NULL_VIOLATION;
        if (retryable && tries < 3) continue;
        if (err instanceof EvoraError) throw err;
        throw new Error(`evora: submit failed: ${(err as Error).message}`, { cause: err });
      } finally {
        client.release();
      }
    }
  }

  // ----- jobs: workers -----------------------------------------------------------------

  /**
   * Claims claimable jobs of the given queues, in priority then run_at order, skipping
   * paused queues and rows other claimers hold (SKIP LOCKED). Each claimed job is RUNNING
   * with attempt+1, a fresh lease token, and a lease of its queue's lease_seconds.
   * Either one worker takes up to `limit` jobs, or `workerIds` names one worker per slot:
   * the i-th job returned (in claim order) belongs to workerIds[i].
   */
  async jobClaim(
    params: { queues: string[]; now?: Date } & ({ limit: number; workerId: string } | { workerIds: string[] }),
  ): Promise<Job[]> {
    const workerIds =
      'workerIds' in params ? params.workerIds : Array.from({ length: Math.max(0, params.limit) }, () => params.workerId);
    if (workerIds.length === 0 || params.queues.length === 0) return [];
    const distinct: string[] = [];
    const index = new Map<string, number>();
    const slotWorkers = workerIds.map((w) => {
      let i = index.get(w);
      if (i === undefined) index.set(w, (i = distinct.push(w)));
      return i;
    });
    const { rows } = await this.claimPool.query<JobRow & { slot: string }>({
      name: 'evora_job_claim',
      text: SQL_JOB_CLAIM,
      values: [params.queues, workerIds.length, distinct, params.now ?? null, slotWorkers],
    });
    // UPDATE ... RETURNING does not keep the picked order; the slot number restores it.
    return rows
      .sort((a, b) => Number(a.slot) - Number(b.slot))
      .map((r, i) => {
        // The columns the claim does not send back, as the claim left them.
        const job = jobFromRow(r);
        job.state = 'RUNNING';
        job.workerId = workerIds[i] ?? null;
        job.result = null;
        job.finishedAt = null;
        job.cancelRequestedAt = null;
        return job;
      });
  }

  /**
   * Extends the leases whose tokens still match a RUNNING job. Returns the new expiry of
   * each extended lease (and whether an operator asked to cancel that job) and the ids of
   * the leases that are lost.
   */
  async jobHeartbeatMany(params: { leases: LeaseRef[]; now?: Date }): Promise<{
    extended: { id: string; lockedUntil: Date; cancelRequested: boolean }[];
    lost: string[];
  }> {
    const valid = params.leases.filter((l) => isUuid(l.id) && isUuid(l.token));
    const extended: { id: string; lockedUntil: Date; cancelRequested: boolean }[] = [];
    if (valid.length > 0) {
      const { rows } = await this.pool.query<{ id: string; locked_until: Date; cancel_requested_at: Date | null }>({
        name: 'evora_job_heartbeat_many',
        text: SQL_JOB_HEARTBEAT_MANY,
        values: [valid.map((l) => l.id), valid.map((l) => l.token), params.now ?? null],
      });
      for (const r of rows) {
        extended.push({ id: r.id, lockedUntil: r.locked_until, cancelRequested: r.cancel_requested_at !== null });
      }
    }
    const ok = new Set(extended.map((e) => e.id));
    return { extended, lost: params.leases.filter((l) => !ok.has(l.id)).map((l) => l.id) };
  }

  /**
   * Completes jobs whose leases are current; the others are answered lease_lost, unchanged.
   * Reports what changed as JobWritten (jobGet reads the whole job).
   */
  async jobCompleteMany(params: {
    completions: (LeaseRef & { result?: JsonObject | null })[];
    now?: Date;
  }): Promise<LeaseWriteOutcome<JobWritten>[]> {
    const valid = params.completions.filter((c) => isUuid(c.id) && isUuid(c.token));
    return this.leaseWrite(params.completions, jobWrittenFromRow, valid.length === 0 ? [] : await this.rows('evora_job_complete_many', SQL_JOB_COMPLETE_MANY, [
      valid.map((c) => c.id),
      valid.map((c) => c.token),
      valid.map((c) => (c.result == null ? null : JSON.stringify(c.result))),
      params.now ?? null,
    ]));
  }

  /**
   * Fails jobs whose leases are current. Retryable with attempts left: back to PENDING at
   * retryAt, or after the queue's backoff. Otherwise: DLQ with the error kept. A job an
   * operator asked to cancel becomes CANCELLED.
   */
  async jobFailMany(params: {
    failures: (LeaseRef & { error: string; retryable: boolean; retryAt?: Date | null })[];
    now?: Date;
  }): Promise<LeaseWriteOutcome[]> {
    const valid = params.failures.filter((f) => isUuid(f.id) && isUuid(f.token));
    return this.leaseWrite(params.failures, jobFromRow, valid.length === 0 ? [] : await this.rows('evora_job_fail_many', SQL_JOB_FAIL_MANY, [
      valid.map((f) => f.id),
      valid.map((f) => f.token),
      valid.map((f) => f.error),
      valid.map((f) => f.retryable),
      valid.map((f) => f.retryAt ?? null),
      params.now ?? null,
    ]));
  }

  /** Puts leased jobs back to PENDING at runAt without using up an attempt. */
  async jobSnoozeMany(params: { snoozes: (LeaseRef & { runAt: Date })[]; now?: Date }): Promise<LeaseWriteOutcome[]> {
    const valid = params.snoozes.filter((s) => isUuid(s.id) && isUuid(s.token));
    return this.leaseWrite(params.snoozes, jobFromRow, valid.length === 0 ? [] : await this.rows('evora_job_snooze_many', SQL_JOB_SNOOZE_MANY, [
      valid.map((s) => s.id),
      valid.map((s) => s.token),
      valid.map((s) => s.runAt),
      params.now ?? null,
    ]));
  }

  /**
   * Runs a hot-path statement as a named prepared statement: each connection plans it once
   * instead of on every call (planning these CTEs costs about 1 ms).
   */
  private async rows(name: string, text: string, values: unknown[]): Promise<JobRow[]> {
    return (await this.pool.query<JobRow>({ name, text, values })).rows;
  }

  private leaseWrite<J>(inputs: LeaseRef[], fromRow: (row: JobRow) => J, rows: JobRow[]): LeaseWriteOutcome<J>[] {
    const byId = new Map(rows.map((r) => [r.id, r]));
    return inputs.map((input) => {
      const row = byId.get(input.id);
      // A duplicate of an already-accepted write in the same batch is not accepted twice.
      if (row && row.lease_token === input.token) {
        byId.delete(input.id);
        return { id: input.id, accepted: true, job: fromRow(row) };
      }
      return { id: input.id, accepted: false, reason: 'lease_lost' };
    });
  }

  // ----- jobs: operators ---------------------------------------------------------------

  /** Reads one job. NOT_FOUND when there is none with that id. */
  async jobGet(params: { id: string }): Promise<Job> {
    if (!isUuid(params.id)) throw invalidArgument(`job id "${params.id}" is not a UUID`);
    const { rows } = await this.pool.query<JobRow>('SELECT * FROM evora.jobs WHERE id = $1', [params.id]);
    const row = rows[0];
    if (!row) throw notFound(`job ${params.id} not found`);
    return jobFromRow(row);
  }

  /** Jobs newest first, filtered, one page at a time (keyset on id). */
  async jobList(params: JobListParams): Promise<{ jobs: Job[]; nextAfterId: string | null }> {
    if (params.afterId && !isUuid(params.afterId)) throw invalidArgument('page token is not valid');
    const { rows } = await this.pool.query<JobRow>(SQL_JOB_LIST, [
      params.queue || null,
      params.states && params.states.length > 0 ? params.states : null,
      params.type || null,
      params.afterId || null,
      params.limit + 1,
    ]);
    const page = rows.slice(0, params.limit).map(jobFromRow);
    return { jobs: page, nextAfterId: rows.length > params.limit ? (page[page.length - 1]?.id ?? null) : null };
  }

  /**
   * Cancels a job: a PENDING one at once; a RUNNING one is flagged (and its holder told)
   * until the worker gives it up or its lease expires. Cancelling a CANCELLED job returns
   * it unchanged; a COMPLETED or DLQ job cannot be cancelled.
   */
  async jobCancel(params: { id: string; now?: Date }): Promise<Job> {
    if (!isUuid(params.id)) throw invalidArgument(`job id "${params.id}" is not a UUID`);
    const { rows } = await this.pool.query<JobRow>(SQL_JOB_CANCEL, [params.id, params.now ?? null]);
    if (rows[0]) return jobFromRow(rows[0]);
    const job = await this.jobGet({ id: params.id });
    if (job.state === 'CANCELLED') return job;
    throw failedPrecondition(`job ${job.id} is ${job.state} and cannot be cancelled`);
  }

  /** Manual retry: a DLQ or CANCELLED job goes back to PENDING with its attempts reset. */
  async jobRetry(params: { id: string; now?: Date }): Promise<Job> {
    if (!isUuid(params.id)) throw invalidArgument(`job id "${params.id}" is not a UUID`);
    const { rows } = await this.pool.query<JobRow>(SQL_JOB_RETRY, [params.id, params.now ?? null]);
    if (rows[0]) return jobFromRow(rows[0]);
    const job = await this.jobGet({ id: params.id });
    throw failedPrecondition(`job ${job.id} is ${job.state}; only DLQ or CANCELLED jobs can be retried`);
  }

  // ----- maintenance -------------------------------------------------------------------

  /**
   * One batch of the visibility sweep: RUNNING jobs whose lease expired go back to
   * PENDING after their queue's backoff, to DLQ when their attempts are used up, or to
   * CANCELLED when an operator asked for that.
   */
  async jobSweepExpired(params: { limit: number; now?: Date }): Promise<SweepResult> {
    const rows = await this.rows('evora_job_sweep_expired', SQL_JOB_SWEEP_EXPIRED, [params.limit, params.now ?? null]);
    const jobs = rows.map(jobFromRow);
    return {
      requeued: jobs.filter((j) => j.state === 'PENDING').length,
      deadLettered: jobs.filter((j) => j.state === 'DLQ').length,
      cancelled: jobs.filter((j) => j.state === 'CANCELLED').length,
      jobs,
    };
  }

  // ----- the outbox ----------------------------------------------------------------------

  /**
   * Opens the projector's next batch: the batch a crash left open (with exactly the rows it
   * had), else a new one of whole outbox rows in id order, among those written by
   * transactions that have ended (see migrations/0005_lean_outbox.sql), up to `limit` events
   * (the row that crosses the limit is taken whole). Null when there is nothing to project.
   */
  async projectorBatchOpen(params: {
    sink: string;
    limit: number;
    /** Also read each event's job id, type, attempt and worker (for a sink that stores events). */
    details: boolean;
  }): Promise<{ batchId: number; outbox: { hiId: string; horizon: string }; rows: OutboxEvents[]; reopened: boolean } | null> {
    const open = await this.pool.query<{ id: string; hi_id: string; horizon: string }>(
      'SELECT id, hi_id, horizon FROM evora.projector_batches ORDER BY id LIMIT 1',
    );
    let batch = open.rows[0];
    const reopened = batch !== undefined;
    if (!batch) {
      // Whole outbox rows, in id order, until about `limit` events (at least one row).
      const { rows } = await this.pool.query<{ id: string; hi_id: string; horizon: string }>(
        `WITH horizon AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin),
         first_rows AS (
           SELECT e.id, e.n FROM evora.job_events e, horizon h WHERE e.xid < h.xmin ORDER BY e.id LIMIT $1
         ),
         taken AS (
           SELECT id, n FROM (SELECT id, n, sum(n) OVER (ORDER BY id) - n AS before FROM first_rows) r
           WHERE before < $1
         )
         INSERT INTO evora.projector_batches (sink, events, hi_id, horizon)
         SELECT $2, sum(t.n), max(t.id), (SELECT xmin FROM horizon) FROM taken t HAVING count(*) > 0
         RETURNING id, hi_id, horizon`,
        [params.limit, params.sink],
      );
      batch = rows[0];
    }
    if (!batch) return null;
    // The packed rows as JSON (one value per row: cheap to send and to parse).
    const { rows } = await this.pool.query<{ id: string; at: Date; n: number; e: string }>({
      name: params.details ? 'evora_outbox_read_details' : 'evora_outbox_read',
      text: params.details ? SQL_OUTBOX_READ_DETAILS : SQL_OUTBOX_READ,
      values: [batch.hi_id, batch.horizon],
    });
    const out: OutboxEvents[] = rows.map((row) => {
      const [queue, kind, fromState, toState, waitMs, runMs, jobIds, types, attempts, workerIds] = JSON.parse(row.e) as PackedEvents;
      return {
        rowId: Number(row.id),
        at: row.at,
        n: row.n,
        queue,
        kind,
        fromState,
        toState,
        waitMs,
        runMs,
        details: jobIds ? { jobIds, types: types!, attempts: attempts!, workerIds: workerIds! } : null,
      };
    });
    return { batchId: Number(batch.id), outbox: { hiId: batch.hi_id, horizon: batch.horizon }, rows: out, reopened };
  }

  /** Closes an applied batch: its outbox rows are deleted, and so is the batch. */
  async projectorBatchClose(params: { batchId: number }): Promise<void> {
    await this.pool.query(
      `WITH batch AS (DELETE FROM evora.projector_batches WHERE id = $1 RETURNING hi_id, horizon)
       DELETE FROM evora.job_events e USING batch b WHERE e.id <= b.hi_id AND e.xid < b.horizon`,
      [params.batchId],
    );
  }

  /** PENDING jobs claimable now, per queue (from the claimable index). */
  async queueDepths(params: { now?: Date } = {}): Promise<{ queue: string; depth: number }[]> {
    const { rows } = await this.pool.query<{ queue: string; depth: number }>(
      `SELECT queue, count(*)::int AS depth FROM evora.jobs
       WHERE state = 'PENDING' AND run_at <= coalesce($1::timestamptz, now()) GROUP BY queue ORDER BY queue`,
      [params.now ?? null],
    );
    return rows;
  }

  /** How far telemetry is behind: outbox events not yet applied, and the age of the oldest. */
  async outboxLag(params: { now?: Date } = {}): Promise<{ events: number; oldestSeconds: number }> {
    const { rows } = await this.pool.query<{ n: number; age: number | null }>(
      `SELECT coalesce(sum(n), 0)::int AS n, extract(epoch FROM coalesce($1::timestamptz, now()) - min(at))::float8 AS age
       FROM evora.job_events`,
      [params.now ?? null],
    );
    return { events: rows[0]?.n ?? 0, oldestSeconds: Math.max(0, rows[0]?.age ?? 0) };
  }

  // ----- queues ------------------------------------------------------------------------

  /** Creates a queue or changes the given settings of an existing one. */
  async queueUpsert(params: QueueUpsertInput): Promise<Queue> {
    const { rows } = await this.pool.query<QueueRow>(SQL_QUEUE_UPSERT, [
      params.name,
      params.maxAttempts ?? null,
      params.backoffKind ?? null,
      params.backoffBaseSeconds ?? null,
      params.backoffCapSeconds ?? null,
      params.backoffJitter ?? null,
      params.leaseSeconds ?? null,
      params.maxConcurrency ?? null,
    ]);
    return queueFromRow(rows[0] as QueueRow);
  }

  /** Reads one queue. NOT_FOUND when it does not exist. */
  async queueGet(params: { name: string }): Promise<Queue> {
    const { rows } = await this.pool.query<QueueRow>('SELECT * FROM evora.queues WHERE name = $1', [params.name]);
    if (!rows[0]) throw notFound(`queue "${params.name}" not found`);
    return queueFromRow(rows[0]);
  }

  /** All queues by name. */
  async queueList(): Promise<Queue[]> {
    const { rows } = await this.pool.query<QueueRow>('SELECT * FROM evora.queues ORDER BY name');
    return rows.map(queueFromRow);
  }

  /**
   * Pauses or resumes a queue. A paused queue keeps accepting submits; nothing is claimed
   * from it. Resuming wakes the dispatchers of every server.
   */
  async queueSetPaused(params: { name: string; paused: boolean }): Promise<Queue> {
    const { rows } = await this.pool.query<QueueRow>(
      `WITH updated AS (
         UPDATE evora.queues SET paused = $2, updated_at = now() WHERE name = $1 RETURNING *
       ),
       woken AS (
         SELECT pg_notify('${CHANNEL_JOB_AVAILABLE}', name) FROM updated WHERE NOT paused
       )
       SELECT * FROM updated WHERE (SELECT count(*) FROM woken) >= 0`,
      [params.name, params.paused],
    );
    if (!rows[0]) throw notFound(`queue "${params.name}" not found`);
    return queueFromRow(rows[0]);
  }
}

/** One packed outbox row as the projector reads it (SQL_OUTBOX_READ, then the details). */
type PackedEvents = [
  OutboxEvents['queue'], OutboxEvents['kind'], OutboxEvents['fromState'], OutboxEvents['toState'],
  (number | null)[], (number | null)[],
  string[]?, string[]?, number[]?, (string | null)[]?,
];

/** Internal: a submit attempt that lost a race and should simply run again. */
class RetrySubmit extends Error {}

/** The claim statement, exported only so scripts/explain-claim.ts can show its plan. */
export const SQL_JOB_CLAIM_FOR_EXPLAIN = SQL_JOB_CLAIM;

/** The completion statement, exported only so a test can check its plan. */
export const SQL_JOB_COMPLETE_FOR_EXPLAIN = SQL_JOB_COMPLETE_MANY;

/** The hand-off submit statement, exported only so a test can check its plans. */
export const SQL_JOB_INSERT_HANDOFF_FOR_EXPLAIN = SQL_JOB_INSERT_HANDOFF;

import type { StorePool } from './pool.js';
import { isUuid } from '../domain/ids.js';
import type { HeartbeatOutcome, Job, JobWritten, JsonObject, LeaseExtended, LeaseRef, LeaseWriteOutcome, ProgressReport, SweepResult } from '../domain/job.js';
import { PLAIN_QUEUE_TTL_MS, type LimitedQueues, type PlainQueues } from './limited-queues.js';
import { JOB_COLUMNS, columnsOf, jobFromRow, type JobRow } from './rows.js';
import { columnIndexes, rawRowsOf, rowsOf, statement, type RawRow } from './statements.js';

/**
 * The lease path: the writes a lease holder makes (heartbeat, complete, fail, snooze), plus
 * the sweep that takes expired leases back (the claim that makes leases: jobs-claim.ts). All
 * of these are hot and run as named prepared statements. A write whose token no longer
 * matches a RUNNING job changes nothing and is answered lease_lost.
 */

interface LeaseParams {
  ids: string[];
  tokens: string[];
  now: Date | null;
}

interface JobHeartbeatRow {
  id: string;
  lease_token: string;
  locked_until: Date;
  cancel_requested_at: Date | null;
}
const jobHeartbeatManySql = statement<LeaseParams, JobHeartbeatRow>(
  'job-heartbeat-many',
  { ids: 'uuid[]', tokens: 'uuid[]', now: 'timestamptz' },
  columnsOf(JOB_COLUMNS, ['id', 'lease_token', 'locked_until', 'cancel_requested_at'] as const),
  { prepared: true },
);

/** What a completion sends back: what JobWritten needs but the constants, and the token that was matched. */
interface JobCompletedRow {
  id: string;
  lease_token: string;
  queue: string;
  type: string;
  attempt: number;
  worker_id: string | null;
}
/** Raw: one row per completed job, read as text (jobsComplete). */
const jobCompleteManySql = statement<LeaseParams & { results: (string | null)[] }, JobCompletedRow>(
  'job-complete-many',
  { ids: 'uuid[]', tokens: 'uuid[]', results: 'jsonb[]', now: 'timestamptz' },
  columnsOf(JOB_COLUMNS, ['id', 'lease_token', 'queue', 'type', 'attempt', 'worker_id'] as const),
  { prepared: true, raw: true },
);
const D = columnIndexes(jobCompleteManySql);

/** A completed job as its completion's row tells it. */
function completedOf(r: RawRow): JobWritten {
  return {
    id: r[D.id] as string,
    queue: r[D.queue] as string,
    type: r[D.type] as string,
    state: 'COMPLETED',
    attempt: Number(r[D.attempt]),
    workerId: r[D.worker_id] ?? null,
    lastError: null,
  };
}

interface JobFailManyParams extends LeaseParams {
  errors: string[];
  retryables: boolean[];
  retryAts: (Date | null)[];
}
const jobFailManySql = statement<JobFailManyParams, JobRow>(
  'job-fail-many',
  { ids: 'uuid[]', tokens: 'uuid[]', errors: 'text[]', retryables: 'bool[]', retryAts: 'timestamptz[]', now: 'timestamptz' },
  JOB_COLUMNS,
  { prepared: true },
);

const jobSnoozeManySql = statement<LeaseParams & { runAts: (Date | null)[] }, JobRow>(
  'job-snooze-many',
  { ids: 'uuid[]', tokens: 'uuid[]', runAts: 'timestamptz[]', now: 'timestamptz' },
  JOB_COLUMNS,
  { prepared: true },
);

const jobSweepExpiredSql = statement<
  { limit: number; now: Date | null; reachableSince: Date | null; tickAt: Date | null; maxGapSeconds: number | null },
  JobRow
>(
  'job-sweep-expired',
  { limit: 'int8', now: 'timestamptz', reachableSince: 'timestamptz', tickAt: 'timestamptz', maxGapSeconds: 'float8' },
  JOB_COLUMNS,
  { prepared: true },
);

const jobSweepTimedOutSql = statement<{ limit: number; now: Date | null }, JobRow>(
  'job-sweep-timed-out',
  { limit: 'int8', now: 'timestamptz' },
  JOB_COLUMNS,
);

/**
 * Heartbeats (Store.jobHeartbeatMany). A lease is the pair (id, token): a worker may name a
 * stale and the current lease of one job, and only the current one is extended.
 */
export async function jobsHeartbeat(pool: StorePool, leases: LeaseRef[], now: Date | null): Promise<HeartbeatOutcome> {
  const valid = leases.filter((l) => isUuid(l.id) && isUuid(l.token));
  const extended: LeaseExtended[] = [];
  if (valid.length > 0) {
    const rows = await rowsOf(pool, jobHeartbeatManySql, { ids: valid.map((l) => l.id), tokens: valid.map((l) => l.token), now });
    for (const r of rows) {
      extended.push({ id: r.id, token: r.lease_token, lockedUntil: r.locked_until, cancelRequested: r.cancel_requested_at !== null });
    }
  }
  const ok = new Set(extended.map(leaseKey));
  return { extended, lost: leases.filter((l) => !ok.has(leaseKey(l))) };
}

/** One key per lease: its job id and its token. */
function leaseKey(l: LeaseRef): string {
  return `${l.id} ${l.token}`;
}

const queueWakeSql = statement<{ queues: string[] }, { pg_notify: string }>('queue-wake', { queues: 'text[]' }, { pg_notify: 'void' });
const queueLimitedReadSql = statement<{ queues: string[] }, { name: string; limited: boolean }>(
  'queue-limited-read',
  { queues: 'text[]' },
  { name: 'text', limited: 'bool' },
);

/**
 * Completions (Store.jobCompleteMany). A completed job of a queue with a limit frees room its
 * claimers (on any server) may be idle for: those queues, as far as `limited` knows, are
 * woken after the completion commits. The statement itself does not look at queues, so
 * queues without limits pay nothing. A queue `limited` does not know and `plain` has not
 * seen within PLAIN_QUEUE_TTL_MS (a limited queue never claimed through this store: a unary
 * CompleteJob sent to another server than the claim) has its row read once
 * (queue-limited-read.sql), so its claimers are woken too, not left to their fallback poll.
 */
export async function jobsComplete(
  pool: StorePool,
  limited: LimitedQueues,
  plain: PlainQueues,
  completions: (LeaseRef & { result?: JsonObject | null; resultJson?: string })[],
  now: Date | null,
): Promise<LeaseWriteOutcome<JobWritten>[]> {
  const valid = completions.filter((c) => isUuid(c.id) && isUuid(c.token));
  const rows =
    valid.length === 0
      ? []
      : await rawRowsOf(pool, jobCompleteManySql, {
          ids: valid.map((c) => c.id),
          tokens: valid.map((c) => c.token),
          results: valid.map((c) => c.resultJson ?? (c.result == null ? null : JSON.stringify(c.result))),
          now,
        });
  if (rows.length > 0) {
    const queues = new Set<string>();
    for (const r of rows) queues.add(r[D.queue] as string);
    await queuesKindLearn(pool, limited, plain, queues);
    const wake = [...queues].filter((q) => limited.has(q));
    if (wake.length > 0) await queuesWake(pool, wake);
  }
  return leaseOutcomesBy(completions, rows, (r) => r[D.id] as string, (r) => r[D.lease_token] ?? null, completedOf);
}

/** The most queues `plain` remembers (it is emptied past this). */
const MAX_PLAIN_QUEUES = 10_000;

/**
 * Reads whether the queues this store has not seen lately have a concurrency limit: those
 * that do join `limited`, the others `plain` (for PLAIN_QUEUE_TTL_MS). Best effort, as the
 * wake-up it serves: a failed read leaves them to the fallback poll.
 */
async function queuesKindLearn(pool: StorePool, limited: LimitedQueues, plain: PlainQueues, queues: Set<string>): Promise<void> {
  const now = Date.now();
  const unknown: string[] = [];
  for (const q of queues) {
    if (limited.has(q)) continue;
    const seen = plain.get(q);
    if (seen === undefined || now - seen > PLAIN_QUEUE_TTL_MS) unknown.push(q);
  }
  if (unknown.length === 0) return;
  try {
    const found = await rowsOf(pool, queueLimitedReadSql, { queues: unknown });
    // Bounded: a database with very many queue names costs re-reads, never unbounded memory.
    if (plain.size + found.length > MAX_PLAIN_QUEUES) plain.clear();
    for (const r of found) {
      if (r.limited) {
        limited.add(r.name);
        plain.delete(r.name);
      } else plain.set(r.name, now);
    }
  } catch {
    // Reported by the pool's availability tracker; the claimers' fallback poll covers it.
  }
}

/**
 * NOTIFYs the queues after a write that freed room committed. Best effort: the write stands
 * whatever happens here, and a wake-up that is not sent is made up by the fallback poll, so
 * a failure (the database went away just now) is not the caller's.
 */
async function queuesWake(pool: StorePool, queues: string[]): Promise<void> {
  try {
    await rowsOf(pool, queueWakeSql, { queues });
  } catch {
    // Reported by the pool's availability tracker; the claimers' fallback poll covers it.
  }
}

/** Failures (Store.jobFailMany). */
export async function jobsFail(
  pool: StorePool,
  failures: (LeaseRef & { error: string; retryable: boolean; retryAt?: Date | null })[],
  now: Date | null,
): Promise<LeaseWriteOutcome[]> {
  const valid = failures.filter((f) => isUuid(f.id) && isUuid(f.token));
  const rows =
    valid.length === 0
      ? []
      : await rowsOf(pool, jobFailManySql, {
          ids: valid.map((f) => f.id),
          tokens: valid.map((f) => f.token),
          errors: valid.map((f) => f.error),
          retryables: valid.map((f) => f.retryable),
          retryAts: valid.map((f) => f.retryAt ?? null),
          now,
        });
  return leaseWriteOutcomes(failures, jobFromRow, rows);
}

/** Snoozes (Store.jobSnoozeMany). */
export async function jobsSnooze(pool: StorePool, snoozes: (LeaseRef & { runAt: Date | null })[], now: Date | null): Promise<LeaseWriteOutcome[]> {
  const valid = snoozes.filter((s) => isUuid(s.id) && isUuid(s.token));
  const rows =
    valid.length === 0
      ? []
      : await rowsOf(pool, jobSnoozeManySql, { ids: valid.map((s) => s.id), tokens: valid.map((s) => s.token), runAts: valid.map((s) => s.runAt), now });
  return leaseWriteOutcomes(snoozes, jobFromRow, rows);
}

interface JobProgressManyParams extends LeaseParams {
  percents: (number | null)[];
  dones: (number | null)[];
  totals: (number | null)[];
  messages: (string | null)[];
  checkpoints: (string | null)[];
  reportedAts: Date[];
}
const jobProgressManySql = statement<JobProgressManyParams, { id: string; lease_token: string | null }>(
  'job-progress-many',
  {
    ids: 'uuid[]', tokens: 'uuid[]', percents: 'float8[]', dones: 'int8[]', totals: 'int8[]', messages: 'text[]',
    checkpoints: 'jsonb[]', reportedAts: 'timestamptz[]', now: 'timestamptz',
  },
  columnsOf(JOB_COLUMNS, ['id', 'lease_token'] as const),
  { prepared: true },
);

/**
 * Progress reports (Store.jobProgressMany): the latest report of each lease, written
 * together. A report whose lease is not current changes nothing and is answered lease_lost.
 */
export async function jobsProgress(pool: StorePool, reports: ProgressReport[], now: Date | null): Promise<LeaseWriteOutcome<null>[]> {
  const valid = reports.filter((r) => isUuid(r.id) && isUuid(r.token));
  const rows =
    valid.length === 0
      ? []
      : await rowsOf(pool, jobProgressManySql, {
          ids: valid.map((r) => r.id),
          tokens: valid.map((r) => r.token),
          percents: valid.map((r) => r.percent),
          dones: valid.map((r) => r.done),
          totals: valid.map((r) => r.total),
          messages: valid.map((r) => r.message || null),
          checkpoints: valid.map((r) => (r.checkpoint === null ? null : JSON.stringify(r.checkpoint))),
          reportedAts: valid.map((r) => r.reportedAt),
          now,
        });
  return leaseWriteOutcomes(reports, () => null, rows);
}

/** One batch of the visibility sweep (Store.jobSweepExpired). */
export async function jobsSweepExpired(
  pool: StorePool,
  limit: number,
  now: Date | null,
  reachable: { since: Date; tickAt: Date; maxGapSeconds: number } | null,
): Promise<SweepResult> {
  const bound = { reachableSince: reachable?.since ?? null, tickAt: reachable?.tickAt ?? null, maxGapSeconds: reachable?.maxGapSeconds ?? null };
  return sweepResult((await rowsOf(pool, jobSweepExpiredSql, { limit, now, ...bound })).map(jobFromRow));
}

/** One batch of the timeout sweep (Store.jobSweepTimedOut). */
export async function jobsSweepTimedOut(pool: StorePool, limit: number, now: Date | null): Promise<SweepResult> {
  return sweepResult((await rowsOf(pool, jobSweepTimedOutSql, { limit, now })).map(jobFromRow));
}

const jobWaitingRepairSql = statement<{ limit: number; now: Date | null }, { id: string }>(
  'job-waiting-repair',
  { limit: 'int8', now: 'timestamptz' },
  columnsOf(JOB_COLUMNS, ['id'] as const),
);

/** One batch of the dependencies' repair pass (Store.jobWaitingRepair): the ids of the jobs it released. */
export async function jobsWaitingRepair(pool: StorePool, limit: number, now: Date | null): Promise<string[]> {
  return (await rowsOf(pool, jobWaitingRepairSql, { limit, now })).map((r) => r.id);
}

/** A sweep batch's jobs, counted by where they went. */
function sweepResult(jobs: Job[]): SweepResult {
  return {
    requeued: jobs.filter((j) => j.state === 'PENDING').length,
    deadLettered: jobs.filter((j) => j.state === 'DLQ').length,
    cancelled: jobs.filter((j) => j.state === 'CANCELLED').length,
    jobs,
  };
}

/** Each input's outcome: accepted with its row when the write matched its lease, else lease_lost. */
function leaseWriteOutcomes<Row extends { id: string; lease_token: string | null }, J>(
  inputs: LeaseRef[],
  fromRow: (row: Row) => J,
  rows: Row[],
): LeaseWriteOutcome<J>[] {
  return leaseOutcomesBy(inputs, rows, (r) => r.id, (r) => r.lease_token, fromRow);
}

/** leaseWriteOutcomes for rows of any shape: `idOf` and `tokenOf` read a row's job id and lease token. */
function leaseOutcomesBy<Row, J>(
  inputs: LeaseRef[],
  rows: Row[],
  idOf: (row: Row) => string,
  tokenOf: (row: Row) => string | null,
  fromRow: (row: Row) => J,
): LeaseWriteOutcome<J>[] {
  const byId = new Map(rows.map((r) => [idOf(r), r]));
  return inputs.map((input) => {
    const row = byId.get(input.id);
    // A duplicate of an already-accepted write in the same batch is not accepted twice.
    if (row && tokenOf(row) === input.token) {
      byId.delete(input.id);
      return { id: input.id, accepted: true, job: fromRow(row) };
    }
    return { id: input.id, accepted: false, reason: 'lease_lost' };
  });
}

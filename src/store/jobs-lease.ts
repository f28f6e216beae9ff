import type { StorePool } from './pool.js';
import { isUuid } from '../domain/ids.js';
import type { HeartbeatOutcome, Job, JobWritten, JsonObject, LeaseExtended, LeaseRef, LeaseWriteOutcome, ProgressReport, SweepResult } from '../domain/job.js';
import { JOB_COLUMNS, columnsOf, jobFromRow, jobWrittenFromRow, type JobRow } from './rows.js';
import { rowsOf, statement, type PgTypes } from './statements.js';

/**
 * The lease path: claims, and the writes a lease holder makes (heartbeat, complete, fail,
 * snooze), plus the sweep that takes expired leases back. All of these are hot and run as
 * named prepared statements. A write whose token no longer matches a RUNNING job changes
 * nothing and is answered lease_lost.
 */

interface JobClaimParams {
  queues: string[];
  limit: number;
  /** The distinct worker ids. */
  workerIds: string[];
  /** Per slot, the 1-based index of its worker in workerIds. */
  slotWorkers: number[];
  /** Job types to claim; null = any. */
  types: string[] | null;
  now: Date | null;
}
/** The columns a claim sends back (see job-claim.sql), and the slot that orders them. */
type JobClaimRow = Omit<JobRow, 'state' | 'worker_id' | 'result' | 'cancel_requested_at' | 'finished_at' | 'submitted'
  | 'backoff_kind' | 'backoff_base_seconds' | 'backoff_cap_seconds' | 'backoff_jitter' | 'timeout_seconds' | 'concurrency_key'
  | 'has_dependents' | 'cancelled_by' | 'progress'> & {
  slot: string;
  /** Only on a row without a job (id null): when a rate-limited queue's next token is due. */
  next_token_at: Date | null;
  /** Only on a row without a job (id null): whether the queue has a limit (which statement claims it). */
  queue_limited: boolean | null;
  /** The job's last checkpoint (the next attempt resumes from it); null = none. */
  checkpoint: JsonObject | null;
};
const JOB_CLAIM_PARAMS = { queues: 'text[]', limit: 'int8', workerIds: 'text[]', slotWorkers: 'int4[]', types: 'text[]', now: 'timestamptz' } as const;
const JOB_CLAIM_COLUMNS: PgTypes<JobClaimRow> = {
  ...columnsOf(JOB_COLUMNS, [
    'id', 'queue', 'type', 'payload', 'priority', 'run_at', 'attempt', 'max_attempts', 'lease_token',
    'locked_until', 'idempotency_key', 'last_error', 'created_at', 'started_at',
  ] as const),
  slot: 'int8',
  next_token_at: 'timestamptz',
  queue_limited: 'bool',
  // dependencies (0011_dependencies.sql)
  parent_ids: 'uuid[]',
  checkpoint: 'jsonb',
};
/** The claim of queues without limits: the statement they pay for (job-claim.sql). */
const jobClaimSql = statement<JobClaimParams, JobClaimRow>('job-claim', JOB_CLAIM_PARAMS, JOB_CLAIM_COLUMNS, { prepared: true });
/** The claim of queues with limits: room, rate tokens and per-key picks (job-claim-limited.sql). */
const jobClaimLimitedSql = statement<JobClaimParams, JobClaimRow>('job-claim-limited', JOB_CLAIM_PARAMS, JOB_CLAIM_COLUMNS, { prepared: true });

/** The parents' results of claimed jobs that have parents (job-results-get.sql). */
const jobResultsGetSql = statement<{ ids: string[] }, { id: string; result: JsonObject | null }>(
  'job-results-get',
  { ids: 'uuid[]' },
  columnsOf(JOB_COLUMNS, ['id', 'result'] as const),
);

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

/** What a completion sends back: what JobWritten needs, and the token that was matched. */
type JobCompletedRow = Pick<JobRow, 'id' | 'lease_token' | 'queue' | 'type' | 'state' | 'attempt' | 'worker_id' | 'last_error'>;
const JOB_COMPLETED_COLUMNS: PgTypes<JobCompletedRow> = columnsOf(JOB_COLUMNS, [
  'id', 'lease_token', 'queue', 'type', 'state', 'attempt', 'worker_id', 'last_error',
] as const);
const jobCompleteManySql = statement<LeaseParams & { results: (string | null)[] }, JobCompletedRow>(
  'job-complete-many',
  { ids: 'uuid[]', tokens: 'uuid[]', results: 'jsonb[]', now: 'timestamptz' },
  JOB_COMPLETED_COLUMNS,
  { prepared: true },
);

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

const jobSweepExpiredSql = statement<{ limit: number; now: Date | null }, JobRow>(
  'job-sweep-expired',
  { limit: 'int8', now: 'timestamptz' },
  JOB_COLUMNS,
  { prepared: true },
);

const jobSweepTimedOutSql = statement<{ limit: number; now: Date | null }, JobRow>(
  'job-sweep-timed-out',
  { limit: 'int8', now: 'timestamptz' },
  JOB_COLUMNS,
);

/**
 * What a claim took, best first; `nextTokenAt` is set when jobs of a rate-limited queue were
 * held back for want of a token: the earliest time the next token is due (the claimer wakes
 * then instead of polling).
 */
export type ClaimedJobs = Job[] & { nextTokenAt?: Date };

/**
 * The queues this store has seen limited (Store.jobClaim): their claims go straight to
 * job-claim-limited.sql. Only a hint: each statement checks the queue's settings itself and
 * answers a queue that belongs to the other one with a row without a job, which corrects it.
 */
export type LimitedQueues = Set<string>;

/**
 * The claim (Store.jobClaim): workerIds names the worker of each slot, in claim order; `types`
 * limits it to those job types (null = any). Queues without a limit are claimed by
 * job-claim.sql, those with one by job-claim-limited.sql; a queue found in the other kind
 * than `limited` said is claimed again, with the slots left, by the right statement.
 */
export async function jobsClaim(
  claimPool: StorePool,
  limited: LimitedQueues,
  queues: string[],
  workerIds: string[],
  types: string[] | null,
  now: Date | null,
): Promise<ClaimedJobs> {
  if (workerIds.length === 0 || queues.length === 0) return [];
  const plain = queues.filter((q) => !limited.has(q));
  const withLimits = queues.filter((q) => limited.has(q));
  const jobs: ClaimedJobs = [];
  let nextTokenAt: Date | undefined;
  // At most three statements: a queue moves kind at most once per call (found limited by the
  // plain claim, it goes to the limited one, whose answer for it is then final).
  for (const [sql, asked] of [[jobClaimSql, plain], [jobClaimLimitedSql, withLimits]] as const) {
    if (asked.length === 0 || jobs.length >= workerIds.length) continue;
    const got = await claimOnce(claimPool, sql, asked, workerIds.slice(jobs.length), types, now);
    for (const q of got.nowLimited) {
      limited.add(q);
      if (sql === jobClaimSql) withLimits.push(q);
    }
    for (const q of got.nowPlain) limited.delete(q);
    jobs.push(...got.jobs);
    if (got.nextTokenAt && (!nextTokenAt || got.nextTokenAt < nextTokenAt)) nextTokenAt = got.nextTokenAt;
  }
  if (nextTokenAt) jobs.nextTokenAt = nextTokenAt;
  return jobs;
}

/** One claim statement's jobs, best first, and what it said about the queues' kinds. */
async function claimOnce(
  claimPool: StorePool,
  sql: typeof jobClaimSql,
  queues: string[],
  workerIds: string[],
  types: string[] | null,
  now: Date | null,
): Promise<{ jobs: Job[]; nextTokenAt?: Date; nowLimited: string[]; nowPlain: string[] }> {
  const distinct: string[] = [];
  const index = new Map<string, number>();
  const slotWorkers = workerIds.map((w) => {
    let i = index.get(w);
    if (i === undefined) index.set(w, (i = distinct.push(w)));
    return i;
  });
  const all = await rowsOf(claimPool, sql, { queues, limit: workerIds.length, workerIds: distinct, slotWorkers, types, now });
  let nextTokenAt: Date | undefined;
  const nowLimited: string[] = [];
  const nowPlain: string[] = [];
  const rows: JobClaimRow[] = [];
  for (const r of all) {
    if (r.id !== null) rows.push(r);
    else {
      if (r.queue_limited === true) nowLimited.push(r.queue);
      else if (r.queue_limited === false) nowPlain.push(r.queue);
      if (r.next_token_at && (!nextTokenAt || r.next_token_at < nextTokenAt)) nextTokenAt = r.next_token_at;
    }
  }
  // The rows come back in no particular order; the slot number restores the claim order.
  const jobs = rows
    .sort((a, b) => Number(a.slot) - Number(b.slot))
    .map((r, i) => {
      const job = jobFromRow(r as JobClaimRow & JobRow);
      // The columns the claim does not send back, as the claim left them.
      job.state = 'RUNNING';
      job.workerId = workerIds[i] ?? null;
      job.result = null;
      job.finishedAt = null;
      job.cancelRequestedAt = null;
      // The job's own policy is the server's business (fail, sweep), not the worker's: not read.
      job.backoff = null;
      job.timeoutSeconds = null;
      job.progress = null;
      return job;
    });
  await parentResultsAttach(claimPool, jobs);
  return { jobs, ...(nextTokenAt ? { nextTokenAt } : {}), nowLimited, nowPlain };
}

/**
 * Sets parentResults on the claimed jobs that have parents, with one statement, and only
 * when there are some: a claim of jobs without parents pays nothing for dependencies. A
 * parent that no longer exists is missing from the map; one without a result maps to null.
 */
async function parentResultsAttach(pool: StorePool, jobs: Job[]): Promise<void> {
  const withParents = jobs.filter((j) => j.parentIds);
  if (withParents.length === 0) return;
  const ids = [...new Set(withParents.flatMap((j) => j.parentIds!))];
  const results = new Map((await rowsOf(pool, jobResultsGetSql, { ids })).map((r) => [r.id, r.result]));
  for (const job of withParents) {
    job.parentResults = Object.fromEntries(job.parentIds!.filter((p) => results.has(p)).map((p) => [p, results.get(p) ?? null]));
  }
}

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

/**
 * Completions (Store.jobCompleteMany). A completed job of a queue with a limit frees room its
 * claimers (on any server) may be idle for: those queues, as far as `limited` knows, are
 * woken after the completion commits. The statement itself does not look at queues, so
 * queues without limits pay nothing. What `limited` does not know (a limited queue never
 * claimed through this store) is found by the claimers' fallback poll.
 */
export async function jobsComplete(
  pool: StorePool,
  limited: LimitedQueues,
  completions: (LeaseRef & { result?: JsonObject | null })[],
  now: Date | null,
): Promise<LeaseWriteOutcome<JobWritten>[]> {
  const valid = completions.filter((c) => isUuid(c.id) && isUuid(c.token));
  const rows =
    valid.length === 0
      ? []
      : await rowsOf(pool, jobCompleteManySql, {
          ids: valid.map((c) => c.id),
          tokens: valid.map((c) => c.token),
          results: valid.map((c) => (c.result == null ? null : JSON.stringify(c.result))),
          now,
        });
  if (limited.size > 0) {
    const wake = new Set<string>();
    for (const r of rows) if (limited.has(r.queue)) wake.add(r.queue);
    if (wake.size > 0) await queuesWake(pool, [...wake]);
  }
  return leaseWriteOutcomes(completions, jobWrittenFromRow, rows);
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
export async function jobsSweepExpired(pool: StorePool, limit: number, now: Date | null): Promise<SweepResult> {
  return sweepResult((await rowsOf(pool, jobSweepExpiredSql, { limit, now })).map(jobFromRow));
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

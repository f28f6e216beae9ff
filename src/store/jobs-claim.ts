import type { StorePool } from './pool.js';
import type { Job, JsonObject } from '../domain/job.js';
import { JOB_COLUMNS, columnsOf } from './rows.js';
import { columnIndexes, rawRowsOf, rowsOf, statement, type PgTypes, type RawRow } from './statements.js';
import { timestamptzParse, uuidArrayParse } from './types.js';
import { jobsSnooze } from './jobs-lease.js';
import type { LimitedQueues } from './limited-queues.js';

/**
 * The claim: claimable jobs become RUNNING under fresh leases for the slots the caller names
 * (job-claim.sql for queues without limits, job-claim-limited.sql for those with one). The
 * hottest read the server makes: its rows are read as text and parsed here, only the values
 * that differ from job to job (docs/store.md). The writes a lease holder makes are in
 * jobs-lease.ts.
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
/**
 * The columns a claim sends back (job-claim.sql, job-claim-limited.sql), read as text: per
 * job what differs from job to job; on each queue's row without a job (id null), what its
 * jobs share and what the statement found about the queue.
 */
interface JobClaimRow {
  id: string | null;
  queue: string;
  type: string;
  payload: JsonObject;
  priority: number;
  run_at: Date;
  attempt: number;
  max_attempts: number;
  lease_token: string;
  idempotency_key: string | null;
  last_error: string | null;
  created_at: Date;
  parent_ids: string[] | null;
  /** The job's last checkpoint (the next attempt resumes from it); null = none. */
  checkpoint: JsonObject | null;
  /** On a queue's row: when its jobs were claimed (the claim's time) … */
  started_at: Date | null;
  /** … and when their leases end. */
  locked_until: Date | null;
  /** On a queue's row: when a rate-limited queue's next token is due, if jobs wait for one. */
  next_token_at: Date | null;
  /** On a queue's row: whether the queue has a limit (which statement claims it). */
  queue_limited: boolean | null;
}
const JOB_CLAIM_PARAMS = { queues: 'text[]', limit: 'int8', workerIds: 'text[]', slotWorkers: 'int4[]', types: 'text[]', now: 'timestamptz' } as const;
const JOB_CLAIM_COLUMNS: PgTypes<JobClaimRow> = {
  ...columnsOf(JOB_COLUMNS, [
    'id', 'queue', 'type', 'payload', 'priority', 'run_at', 'attempt', 'max_attempts', 'lease_token',
    'idempotency_key', 'last_error', 'created_at', 'parent_ids', 'checkpoint', 'started_at', 'locked_until',
  ] as const),
  next_token_at: 'timestamptz',
  queue_limited: 'bool',
};
/**
 * The claim of queues without limits: the statement they pay for (job-claim.sql). Raw: a
 * claim's rows are the biggest result the server reads, and most of its columns go to the
 * worker as they are (claimedJobOf parses the rest).
 */
const jobClaimSql = statement<JobClaimParams, JobClaimRow>('job-claim', JOB_CLAIM_PARAMS, JOB_CLAIM_COLUMNS, { prepared: true, raw: true });
/** The claim of queues with limits: room, rate tokens and per-key picks (job-claim-limited.sql). */
const jobClaimLimitedSql = statement<JobClaimParams, JobClaimRow>('job-claim-limited', JOB_CLAIM_PARAMS, JOB_CLAIM_COLUMNS, { prepared: true, raw: true });
/** Where each column is in a claim's rows (the two statements return the same columns). */
const C = columnIndexes(jobClaimSql);

/** The parents' results of claimed jobs that have parents (job-results-get.sql). */
const jobResultsGetSql = statement<{ ids: string[] }, { id: string; result: JsonObject | null }>(
  'job-results-get',
  { ids: 'uuid[]' },
  columnsOf(JOB_COLUMNS, ['id', 'result'] as const),
);

/**
 * What a claim took, best first; `nextTokenAt` is set when jobs of a rate-limited queue were
 * held back for want of a token: the earliest time the next token is due (the claimer wakes
 * then instead of polling).
 */
export type ClaimedJobs = Job[] & { nextTokenAt?: Date };


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
  try {
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
    await parentResultsAttach(claimPool, jobs);
  } catch (err) {
    // A statement that committed leased its jobs; a later step failed (the connection cut
    // before the parents' results were read, the second statement refused). The caller gets
    // the error and no jobs, so they are given back now, claimable again with no attempt
    // used up, rather than left leased to a worker that never gets them (their lease would
    // expire and cost an attempt). If that fails too, their leases expire.
    if (jobs.length > 0) await jobsGiveBack(claimPool, jobs, now);
    throw err;
  }
  if (nextTokenAt) jobs.nextTokenAt = nextTokenAt;
  return jobs;
}

/** Releases claimed jobs at once (a snooze to their run_at: no attempt used up); best effort. */
async function jobsGiveBack(pool: StorePool, jobs: Job[], now: Date | null): Promise<void> {
  await jobsSnooze(pool, jobs.map((j) => ({ id: j.id, token: j.leaseToken ?? '', runAt: j.runAt })), now).catch(() => undefined);
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
  const rows = await rawRowsOf(claimPool, sql, { queues, limit: workerIds.length, workerIds: distinct, slotWorkers, types, now });
  let nextTokenAt: Date | undefined;
  const nowLimited: string[] = [];
  const nowPlain: string[] = [];
  // What the queues' jobs share: the rows without a job come first (slot 0).
  const shared = new Map<string, { startedAt: Date; lockedUntil: Date }>();
  const jobs: Job[] = [];
  for (const r of rows) {
    const queue = r[C.queue] as string;
    if (r[C.id] === null) {
      shared.set(queue, { startedAt: timestamptzParse(r[C.started_at] as string), lockedUntil: timestamptzParse(r[C.locked_until] as string) });
      if (r[C.queue_limited] === 't') nowLimited.push(queue);
      else if (r[C.queue_limited] === 'f') nowPlain.push(queue);
      const due = r[C.next_token_at] ?? null;
      if (due !== null) {
        const at = timestamptzParse(due);
        if (!nextTokenAt || at < nextTokenAt) nextTokenAt = at;
      }
      continue;
    }
    const times = shared.get(queue);
    if (!times) throw new Error(`evora: ${sql.name} returned a job of queue ${queue} before the queue's row`);
    jobs.push(claimedJobOf(r, times.startedAt, times.lockedUntil, workerIds[jobs.length] ?? null));
  }
  return { jobs, ...(nextTokenAt ? { nextTokenAt } : {}), nowLimited, nowPlain };
}

/**
 * A claimed job from its row's text: the values the claim returns per job, parsed here (the
 * statement is raw), and what its queue's row says all its jobs share. The columns the claim
 * does not send back are as it left them: RUNNING, the caller's worker, nothing finished; the
 * job's own policy is the server's business (fail, sweep), not the worker's, and is not read.
 */
function claimedJobOf(r: RawRow, startedAt: Date, lockedUntil: Date, workerId: string | null): Job {
  const parentIds = r[C.parent_ids] ?? null;
  const checkpoint = r[C.checkpoint] ?? null;
  return new ClaimedJob(r[C.payload] as string, {
    id: r[C.id] as string,
    queue: r[C.queue] as string,
    type: r[C.type] as string,
    state: 'RUNNING',
    priority: Number(r[C.priority]),
    runAt: timestamptzParse(r[C.run_at] as string),
    attempt: Number(r[C.attempt]),
    maxAttempts: Number(r[C.max_attempts]),
    leaseToken: r[C.lease_token] as string,
    lockedUntil,
    workerId,
    idempotencyKey: r[C.idempotency_key] ?? null,
    result: null,
    lastError: r[C.last_error] ?? null,
    cancelRequestedAt: null,
    createdAt: timestamptzParse(r[C.created_at] as string),
    startedAt,
    finishedAt: null,
    backoff: null,
    timeoutSeconds: null,
    concurrencyKey: null,
    parentIds: parentIds === null ? null : uuidArrayParse(parentIds),
    progress: null,
    checkpoint: checkpoint === null ? null : (JSON.parse(checkpoint) as JsonObject),
  });
}

/**
 * A claimed job: its payload is parsed from the text the claim read (payloadJson) the first
 * time something reads `payload`, so a push to a worker that takes payloads as JSON never
 * parses it. `payload` is an own enumerable property (an accessor shared by all instances)
 * and `payloadJson` a getter of the class, so the job spreads, compares and serializes as
 * the plain Job jobGet returns does.
 */
// The fields the constructor assigns (declaration merging: the class has them all).
interface ClaimedJob extends Omit<Job, 'payload' | 'payloadJson'> {}
class ClaimedJob {
  declare payload: JsonObject;
  readonly #text: string;
  #parsed: JsonObject | undefined;

  constructor(text: string, fields: Omit<Job, 'payload' | 'payloadJson'>) {
    this.#text = text;
    Object.assign(this, fields);
    Object.defineProperty(this, 'payload', ClaimedJob.#payloadAccessor);
  }

  /** The payload as the claim read it (JSON text, as stored). */
  get payloadJson(): string {
    return this.#text;
  }

  static readonly #payloadAccessor: PropertyDescriptor = {
    enumerable: true,
    configurable: true,
    get(this: ClaimedJob): JsonObject {
      return (this.#parsed ??= JSON.parse(this.#text) as JsonObject);
    },
    set(this: ClaimedJob, value: JsonObject) {
      this.#parsed = value;
    },
  };
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

const jobQueuesDueSql = statement<{ queues: string[]; now: Date | null }, { queue: string }>(
  'job-queues-due',
  { queues: 'text[]', now: 'timestamptz' },
  { queue: 'text' },
);

/** Which of `queues` (not paused) have a PENDING job due at `now` (null: the database's now). */
export async function jobsQueuesDue(pool: StorePool, queues: string[], now: Date | null): Promise<string[]> {
  if (queues.length === 0) return [];
  return (await rowsOf(pool, jobQueuesDueSql, { queues, now })).map((r) => r.queue);
}

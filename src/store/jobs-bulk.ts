import type { StorePool } from './pool.js';
import { CANCELLABLE_STATES, FINISHED_STATES, RETRYABLE_STATES, type JobBulkFilter, type JobState } from '../domain/job.js';
import type { AuditActor } from '../domain/audit.js';
import { ACTOR_TYPES, actorParams, type ActorParams } from './audit.js';
import { idCheck } from './jobs-operator.js';
import { deadlockRetried } from './deadlocks.js';
import { inTransaction, rowOf, rowsOf, statement, type Statement } from './statements.js';

/**
 * Operators' actions on the many jobs a filter matches (the JobService's RetryJobs,
 * PurgeJobs and CancelJobs, their dry runs, and the reach of a cascade): each run in batches
 * of its own statement and transaction, so that a large action holds few locks at once, can
 * stop between batches, and never takes in jobs that finish (a cancel: that are created)
 * while it runs.
 */

/** The filter parts of the bulk statements, as they bind. */
interface BulkFilterSqlParams {
  queue: string | null;
  states: JobState[];
  type: string | null;
  errorGroup: string | null;
  finishedBefore: Date | null;
  ids: string[] | null;
}
const BULK_FILTER_TYPES = {
  queue: 'text',
  states: 'evora.job_state[]',
  type: 'text',
  errorGroup: 'text',
  finishedBefore: 'timestamptz',
  ids: 'uuid[]',
} as const;

/** One batch: how many jobs it changed, and its time (the cutoff of the run's later batches). */
interface BulkBatchRow {
  /** Jobs the batch changed. */
  jobs: number;
  /** Rows it locked to change: a batch may leave some of them as they are (see batchesRun). */
  picked: number;
  at: Date;
}
const BULK_BATCH_COLUMNS = { jobs: 'int4', picked: 'int4', at: 'timestamptz' } as const;

/** One batch's parameters: the filter, the run's cutoff, and its audit event's actor, target and change. */
type BulkBatchSqlParams = BulkFilterSqlParams &
  ActorParams & { cutoff: Date | null; limit: number; now: Date | null; auditTarget: string; auditChange: string };
const BULK_BATCH_TYPES = {
  ...BULK_FILTER_TYPES,
  ...ACTOR_TYPES,
  cutoff: 'timestamptz',
  limit: 'int8',
  now: 'timestamptz',
  auditTarget: 'text',
  auditChange: 'jsonb',
} as const;

const jobRetryManySql = statement<BulkBatchSqlParams, BulkBatchRow>(
  'job-retry-many',
  BULK_BATCH_TYPES,
  BULK_BATCH_COLUMNS,
);

const jobPurgeManySql = statement<BulkBatchSqlParams, BulkBatchRow>(
  'job-purge-many',
  BULK_BATCH_TYPES,
  BULK_BATCH_COLUMNS,
);

/** The cancel's batch: no finishedBefore (the jobs it cancels have not finished; checkBulkFilter refuses one). */
const jobCancelManySql = statement<Omit<BulkBatchSqlParams, 'finishedBefore'>, BulkBatchRow>(
  'job-cancel-many',
  (({ finishedBefore: _, ...types }) => types)(BULK_BATCH_TYPES),
  BULK_BATCH_COLUMNS,
);

/** The advisory lock of sql/job-bulk-lock.sql (the class of leader.ts's and migrate.ts's keys). */
const JOB_BULK_LOCK_KEY = 7_301_846_002;
const jobBulkLockSql = statement<{ key: number }, { locked: string }>('job-bulk-lock', { key: 'int8' }, { locked: 'void' });

/**
 * One batch of an action whose changes cascade through dependents (a cancel, a retry), in a
 * transaction that first takes the bulk lock: such batches run one at a time across the
 * servers (sql/job-bulk-lock.sql says why).
 */
function cascadingBatch<P>(pool: StorePool, s: Statement<P, BulkBatchRow>, params: P): Promise<BulkBatchRow | undefined> {
  return pool.withClient((client) =>
    inTransaction(client, async () => {
      await rowsOf(client, jobBulkLockSql, { key: JOB_BULK_LOCK_KEY });
      return rowOf(client, s, params);
    }),
  );
}

/** `jobs` is int8: pg hands it over as a string. */
/** The rules a dry run adds to its filter: those of the action it counts for. */
interface BulkCountRules {
  projectedOnly: boolean;
  retryOnly: boolean;
  cancelOnly: boolean;
}
const jobCountManySql = statement<BulkFilterSqlParams & BulkCountRules, { jobs: string; finished_before: Date | null }>(
  'job-count-many',
  { ...BULK_FILTER_TYPES, projectedOnly: 'bool', retryOnly: 'bool', cancelOnly: 'bool' },
  { jobs: 'int8', finished_before: 'timestamptz' },
);

const jobCascadeQueuesSql = statement<BulkFilterSqlParams & { retry: boolean }, { queue: string; jobs: string }>(
  'job-cascade-queues',
  { ...BULK_FILTER_TYPES, retry: 'bool' },
  { queue: 'text', jobs: 'int8' },
);

/**
 * The queues a cancel (`action` 'cancel') or a retry ('retry') of the jobs `filter` matches
 * would reach through their dependents, with how many descendants in each, queue order
 * (Store.jobCascadeQueues; sql/job-cascade-queues.sql): at least every job the dependents
 * trigger would change, never fewer. The filter's states are cut to those the action takes.
 */
export async function jobCascadeQueuesRead(pool: StorePool, action: 'cancel' | 'retry', filter: JobBulkFilter): Promise<{ queue: string; jobs: number }[]> {
  (filter.ids ?? []).forEach(idCheck);
  const params = filterParams(filter, action === 'retry' ? RETRYABLE_STATES : CANCELLABLE_STATES);
  if (params.states.length === 0) return [];
  const rows = await rowsOf(pool, jobCascadeQueuesSql, { ...params, retry: action === 'retry' });
  return rows.map((r) => ({ queue: r.queue, jobs: Number(r.jobs) }));
}

/** Rows one bulk statement changes at most: one short transaction, a bounded set of row locks. */
export const BULK_BATCH_SIZE = 500;

/** What a bulk operator action is asked to do. */
export interface JobBulkParams {
  filter: JobBulkFilter;
  now: Date | null;
  /** Stops between batches (what is done stays done). */
  signal?: AbortSignal;
  /**
   * Called before each batch after the first with how many jobs the run has changed so far;
   * what it throws ends the run there (what is done stays done). The RPCs stop a run whose
   * caller's token stopped working this way.
   */
  beforeBatch?: (done: number) => void;
  /** Rows per statement; BULK_BATCH_SIZE unless a test says otherwise. */
  batchSize?: number;
  /** Who asks (each batch that changed jobs writes an audit event); absent: the anonymous caller. */
  actor?: AuditActor;
}

/** Most job ids of a bulk filter an audit event lists; a longer list is recorded by its length. */
const AUDIT_MAX_IDS = 100;

/**
 * The audit parameters of a run's batch `n` (from 1): target the filter's queue or "*";
 * change the filter (the batch's job count is added by the statement). A filter of more
 * than AUDIT_MAX_IDS ids records `ids_count` instead of the ids (each batch's event would
 * repeat up to 10,000 of them).
 */
function bulkAudit(params: JobBulkParams, n: number): ActorParams & { auditTarget: string; auditChange: string } {
  const f = params.filter;
  const filter = {
    queue: f.queue,
    states: f.states,
    type: f.type,
    ...(f.errorGroup != null ? { error_group: f.errorGroup } : {}),
    finished_before: f.finishedBefore ? f.finishedBefore.toISOString() : null,
    ...(f.ids !== null && f.ids.length > AUDIT_MAX_IDS ? { ids_count: f.ids.length } : { ids: f.ids }),
  };
  return { ...actorParams(params.actor), auditTarget: f.queue ?? '*', auditChange: JSON.stringify({ filter, batch: n }) };
}

function filterParams(filter: JobBulkFilter, allowed: readonly JobState[]): BulkFilterSqlParams {
  return {
    queue: filter.queue,
    states: filter.states.filter((s) => allowed.includes(s)),
    type: filter.type,
    errorGroup: filter.errorGroup ?? null,
    finishedBefore: filter.finishedBefore,
    ids: filter.ids,
  };
}

/**
 * Runs `batch` until one picks less than a full batch or changes nothing, each its own
 * statement (and transaction); returns the total. A batch may change fewer jobs than it
 * picked (a purge keeps a parent whose child another transaction holds; a retry leaves a job
 * whose parent's latest version holds it back), so the test is on what it picked: stopping
 * at the first short change would end a run early with matching jobs left untouched.
 * Every batch after the first takes only jobs that finished (a cancel: were created) by the
 * first one's time (`cutoff`): a changed job leaves the match, and no job that finishes (is
 * submitted) while the run goes on joins it, so with at least one change per batch the loop
 * ends however busy the queue is. Before each batch after the first, the signal and `beforeBatch` may end the run.
 * A batch PostgreSQL aborts to break a deadlock is run again (deadlocks.ts).
 */
async function batchesRun(
  params: JobBulkParams,
  batch: (cutoff: Date | null, limit: number, n: number) => Promise<BulkBatchRow | undefined>,
): Promise<number> {
  const limit = params.batchSize ?? BULK_BATCH_SIZE;
  let cutoff: Date | null = null;
  let total = 0;
  for (let n = 1; ; n++) {
    params.signal?.throwIfAborted();
    if (n > 1) params.beforeBatch?.(total);
    // A batch aborted to break a deadlock (another cancel's cascade) changed nothing: run it again.
    const row = await deadlockRetried(() => batch(cutoff, limit, n));
    total += row?.jobs ?? 0;
    if (!row || row.picked < limit || row.jobs === 0) return total;
    cutoff ??= row.at;
  }
}

/**
 * A bulk action's dry run: how many jobs it would touch now, and `finishedBefore`, the
 * bound that keeps the action to those (sql/job-count-many.sql): the same filter with
 * finishedBefore set to it matches none of the jobs that finish later. Null when none.
 */
export interface JobBulkCount {
  jobs: number;
  finishedBefore: Date | null;
}

/** A dry run's one statement, with the rules of its action (sql/job-count-many.sql). */
async function bulkCount(pool: StorePool, filter: BulkFilterSqlParams, rules: BulkCountRules): Promise<JobBulkCount> {
  if (filter.states.length === 0) return { jobs: 0, finishedBefore: null };
  const row = await rowOf(pool, jobCountManySql, { ...filter, ...rules });
  return { jobs: Number(row?.jobs ?? 0), finishedBefore: row?.finished_before ?? null };
}

/** The dry run of jobsRetryMany (Store.jobRetryCount): the jobs it would retry now. Changes nothing. */
export function jobsRetryCount(pool: StorePool, filter: JobBulkFilter): Promise<JobBulkCount> {
  return bulkCount(pool, filterParams(filter, RETRYABLE_STATES), { projectedOnly: false, retryOnly: true, cancelOnly: false });
}

/** The dry run of jobsPurgeMany (Store.jobPurgeCount): the jobs it would delete now. Changes nothing. */
export function jobsPurgeCount(pool: StorePool, filter: JobBulkFilter): Promise<JobBulkCount> {
  return bulkCount(pool, filterParams(filter, FINISHED_STATES), { projectedOnly: true, retryOnly: false, cancelOnly: false });
}

/** The dry run of jobsCancelMany (Store.jobCancelCount): the jobs it would cancel or flag now. Changes nothing. */
export function jobsCancelCount(pool: StorePool, filter: JobBulkFilter): Promise<JobBulkCount> {
  return bulkCount(pool, filterParams(filter, CANCELLABLE_STATES), { projectedOnly: false, retryOnly: false, cancelOnly: true });
}

/**
 * An operator's bulk retry (Store.jobRetryMany): every DLQ or CANCELLED job the filter
 * matches, each as jobRetry does it; other states in the filter's reach are left alone.
 * Returns how many jobs were retried.
 */
export async function jobsRetryMany(pool: StorePool, params: JobBulkParams): Promise<number> {
  const filter = filterParams(params.filter, RETRYABLE_STATES);
  if (filter.states.length === 0) return 0;
  return batchesRun(params, (cutoff, limit, n) => cascadingBatch(pool, jobRetryManySql, { ...filter, cutoff, limit, now: params.now, ...bulkAudit(params, n) }));
}

/**
 * An operator's purge (Store.jobPurgeMany): deletes every finished job the filter matches,
 * never one in another state, and (as retention) never one whose events telemetry has not
 * projected yet. Returns how many jobs were deleted.
 */
export async function jobsPurgeMany(pool: StorePool, params: JobBulkParams): Promise<number> {
  const filter = filterParams(params.filter, FINISHED_STATES);
  if (filter.states.length === 0) return 0;
  return batchesRun(params, (cutoff, limit, n) => rowOf(pool, jobPurgeManySql, { ...filter, cutoff, limit, now: params.now, ...bulkAudit(params, n) }));
}

/**
 * An operator's bulk cancel (Store.jobCancelMany): every PENDING, WAITING or RUNNING job the
 * filter matches, each as jobCancel does it (a running one flagged and its worker told), a
 * running one already flagged left alone; jobs created after the run's first batch are
 * left alone. Returns how many jobs were cancelled or flagged.
 */
export async function jobsCancelMany(pool: StorePool, params: JobBulkParams): Promise<number> {
  const { finishedBefore: _, ...filter } = filterParams(params.filter, CANCELLABLE_STATES);
  if (filter.states.length === 0) return 0;
  return batchesRun(params, (cutoff, limit, n) => cascadingBatch(pool, jobCancelManySql, { ...filter, cutoff, limit, now: params.now, ...bulkAudit(params, n) }));
}

import type { StorePool } from './pool.js';
import { failedPrecondition, invalidArgument, notFound } from '../domain/errors.js';
import { isUuid } from '../domain/ids.js';
import { CANCELLABLE_STATES, FINISHED_STATES, RETRYABLE_STATES, type AttemptOutcome, type DeadLetterGroup, type Job, type JobAttempt, type JobBulkFilter, type JobListParams, type JobState } from '../domain/job.js';
import { JOB_COLUMNS, jobFromRow, type JobRow } from './rows.js';
import type { AuditActor } from '../domain/audit.js';
import { ACTOR_TYPES, actorParams, type ActorParams } from './audit.js';
import { rowOf, rowsOf, statement } from './statements.js';

/**
 * Operators' reads and writes of jobs (the JobService API): get, list, cancel, retry, and
 * the bulk retry and purge over a filter. Not on the hot path: planned at every call.
 */

const jobGetSql = statement<{ id: string }, JobRow>('job-get', { id: 'uuid' }, JOB_COLUMNS);

interface JobListSqlParams {
  queue: string | null;
  states: JobState[] | null;
  type: string | null;
  idempotencyKey: string | null;
  errorGroup: string | null;
  afterId: string | null;
  limit: number;
}
const jobListSql = statement<JobListSqlParams, JobRow>(
  'job-list',
  { queue: 'text', states: 'evora.job_state[]', type: 'text', idempotencyKey: 'text', errorGroup: 'text', afterId: 'uuid', limit: 'int8' },
  JOB_COLUMNS,
);

const jobCancelSql = statement<ActorParams & { id: string; now: Date | null }, JobRow & { previous_state: JobState }>(
  'job-cancel',
  { id: 'uuid', now: 'timestamptz', ...ACTOR_TYPES },
  { ...JOB_COLUMNS, previous_state: 'evora.job_state' },
);

const jobRetrySql = statement<ActorParams & { id: string; now: Date | null }, JobRow & { previous_state: JobState }>(
  'job-retry',
  { id: 'uuid', now: 'timestamptz', ...ACTOR_TYPES },
  { ...JOB_COLUMNS, previous_state: 'evora.job_state' },
);

function idCheck(id: string): void {
  if (!isUuid(id)) throw invalidArgument(`job id "${id}" is not a UUID`);
}

/** One job's row; NOT_FOUND when there is none. */
async function jobRowRead(pool: StorePool, id: string): Promise<JobRow> {
  idCheck(id);
  const row = await rowOf(pool, jobGetSql, { id });
  if (!row) throw notFound(`job ${id} not found`);
  return row;
}

/** One job (Store.jobGet). */
export async function jobRead(pool: StorePool, id: string): Promise<Job> {
  return jobFromRow(await jobRowRead(pool, id));
}

const jobQueuesReadSql = statement<{ ids: string[] }, { id: string; queue: string }>('job-queues-read', { ids: 'uuid[]' }, { id: 'uuid', queue: 'text' });

/** The queues of the jobs of `ids` that exist, by id (Store.jobQueues). */
export async function jobQueuesRead(pool: StorePool, ids: readonly string[]): Promise<Map<string, string>> {
  ids.forEach(idCheck);
  const rows = await rowsOf(pool, jobQueuesReadSql, { ids: [...ids] });
  return new Map(rows.map((r) => [r.id, r.queue]));
}

/** A page of jobs (Store.jobList). */
export async function jobsList(pool: StorePool, params: JobListParams): Promise<{ jobs: Job[]; nextAfterId: string | null }> {
  if (params.afterId && !isUuid(params.afterId)) throw invalidArgument('page token is not valid');
  const rows = await rowsOf(pool, jobListSql, {
    queue: params.queue || null,
    states: params.states && params.states.length > 0 ? params.states : null,
    type: params.type || null,
    idempotencyKey: params.idempotencyKey || null,
    // '' is a group (jobs without an error), so only null or undefined means any.
    errorGroup: params.errorGroup ?? null,
    afterId: params.afterId || null,
    limit: params.limit + 1,
  });
  const page = rows.slice(0, params.limit).map(jobFromRow);
  return { jobs: page, nextAfterId: rows.length > params.limit ? (page[page.length - 1]?.id ?? null) : null };
}

/** An operator's cancel (Store.jobCancel). */
export async function jobCancel(pool: StorePool, id: string, now: Date | null, actor: AuditActor | undefined): Promise<Job> {
  idCheck(id);
  const row = await rowOf(pool, jobCancelSql, { id, now, ...actorParams(actor) });
  if (row) return jobFromRow(row);
  const job = await jobRead(pool, id);
  if (job.state === 'CANCELLED') return job;
  throw failedPrecondition(`job ${job.id} is ${job.state} and cannot be cancelled`);
}

/** One step of the chain that holds a job back (sql/job-hold-chain.sql); `state` null: the job is gone. */
interface HoldStepRow {
  depth: number;
  id: string;
  state: JobState | null;
  last_error: string | null;
}
const jobHoldChainSql = statement<{ id: string }, HoldStepRow>(
  'job-hold-chain',
  { id: 'uuid' },
  { depth: 'int4', id: 'uuid', state: 'evora.job_state', last_error: 'text' },
);

/** How a job up the graph went, in both "can never run" refusals: the same words wherever a deleted job is named. */
const DELETED_BY = '(deleted by retention or a purge)';

/**
 * The one line of a retry refused for the job's parents: it names what the operator can act
 * on, from the chain of jobs holding it back (`steps`: the job's own parent first, then the
 * end of the chain and the job before it; see sql/job-hold-chain.sql).
 * - The end is gone: nothing can restore the job. Its own cancelled_by gone: "was cancelled
 *   because parent <p> did not complete ..."; gone further up (a purged root above a parent
 *   still there): "has a parent that can never complete", naming that parent, the job whose
 *   cancelled_by is gone, and the gone one. Either way: submit the job again.
 * - Else: retry the end first, "parent <p>" when it is the job's own parent, else "job <root>"
 *   (the parent it holds back named too). Never a job that no longer exists.
 * Must stay true: every id it names is one the caller can look up, or said to be gone.
 */
function retryHeldMessage(job: JobRow, steps: readonly HoldStepRow[]): string {
  const why = job.last_error ?? 'see its parents';
  const parent = steps[0];
  const end = steps[steps.length - 1];
  if (!parent || !end) return `job ${job.id} was not retried: its parents changed meanwhile; try again`;
  if (end.state === null) {
    if (end.depth === 1) {
      return `job ${job.id} was cancelled because parent ${end.id} did not complete (${why}), and that parent no longer exists ${DELETED_BY}: it can never complete; submit the job again without it`;
    }
    const by = steps[steps.length - 2]!;
    const held = by.id === parent.id ? `parent ${parent.id} was cancelled` : `parent ${parent.id} is held back by job ${by.id}, which was cancelled`;
    return `job ${job.id} has a parent that can never complete: ${held} because its parent ${end.id} did not complete (${by.last_error ?? 'see its parents'}), and ${end.id} no longer exists ${DELETED_BY}; submit the job again without it`;
  }
  const first = end.id === parent.id ? `parent ${parent.id} first` : `job ${end.id} first (parent ${parent.id} is held back by it)`;
  return `job ${job.id} has a parent in DLQ or CANCELLED (${why}); retry ${first}`;
}

/**
 * An operator's manual retry (Store.jobRetry). The statement decides (sql/job-retry.sql); when
 * it retried nothing, the job is read again only to say why, in one line: no such job
 * (NOT_FOUND), not DLQ or CANCELLED, or held back by its parents (retryHeldMessage: the job to
 * retry first, or that a job up its graph was deleted and it can never run: submit it again).
 * Each is FAILED_PRECONDITION but the first, and changed nothing.
 */
export async function jobRetry(pool: StorePool, id: string, now: Date | null, actor: AuditActor | undefined): Promise<Job> {
  idCheck(id);
  const row = await rowOf(pool, jobRetrySql, { id, now, ...actorParams(actor) });
  if (row) return jobFromRow(row);
  const job = await jobRowRead(pool, id);
  if ((job.state === 'DLQ' || job.state === 'CANCELLED') && job.parent_ids) {
    throw failedPrecondition(retryHeldMessage(job, await rowsOf(pool, jobHoldChainSql, { id })));
  }
  throw failedPrecondition(`job ${job.id} is ${job.state}; only DLQ or CANCELLED jobs can be retried`);
}

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

/** `jobs` is int8: pg hands it over as a string. */
const jobCountManySql = statement<BulkFilterSqlParams & { projectedOnly: boolean; retryOnly: boolean }, { jobs: string; finished_before: Date | null }>(
  'job-count-many',
  { ...BULK_FILTER_TYPES, projectedOnly: 'bool', retryOnly: 'bool' },
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
 * Every batch after the first takes only jobs that finished by the first one's time
 * (`cutoff`): a changed job leaves the match, and no job that finishes while the run goes
 * on joins it, so with at least one change per batch the loop ends however busy the queue
 * is. Before each batch after the first, the signal and `beforeBatch` may end the run.
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
    const row = await batch(cutoff, limit, n);
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
async function bulkCount(pool: StorePool, filter: BulkFilterSqlParams, rules: { projectedOnly: boolean; retryOnly: boolean }): Promise<JobBulkCount> {
  if (filter.states.length === 0) return { jobs: 0, finishedBefore: null };
  const row = await rowOf(pool, jobCountManySql, { ...filter, ...rules });
  return { jobs: Number(row?.jobs ?? 0), finishedBefore: row?.finished_before ?? null };
}

/** The dry run of jobsRetryMany (Store.jobRetryCount): the jobs it would retry now. Changes nothing. */
export function jobsRetryCount(pool: StorePool, filter: JobBulkFilter): Promise<JobBulkCount> {
  return bulkCount(pool, filterParams(filter, RETRYABLE_STATES), { projectedOnly: false, retryOnly: true });
}

/** The dry run of jobsPurgeMany (Store.jobPurgeCount): the jobs it would delete now. Changes nothing. */
export function jobsPurgeCount(pool: StorePool, filter: JobBulkFilter): Promise<JobBulkCount> {
  return bulkCount(pool, filterParams(filter, FINISHED_STATES), { projectedOnly: true, retryOnly: false });
}

/**
 * An operator's bulk retry (Store.jobRetryMany): every DLQ or CANCELLED job the filter
 * matches, each as jobRetry does it; other states in the filter's reach are left alone.
 * Returns how many jobs were retried.
 */
export async function jobsRetryMany(pool: StorePool, params: JobBulkParams): Promise<number> {
  const filter = filterParams(params.filter, RETRYABLE_STATES);
  if (filter.states.length === 0) return 0;
  return batchesRun(params, (cutoff, limit, n) => rowOf(pool, jobRetryManySql, { ...filter, cutoff, limit, now: params.now, ...bulkAudit(params, n) }));
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

interface JobAttemptRow {
  attempt: number;
  worker_id: string | null;
  started_at: Date | null;
  finished_at: Date | null;
  outcome: AttemptOutcome;
  error: string | null;
}
const jobAttemptListSql = statement<{ id: string }, JobAttemptRow>(
  'job-attempt-list',
  { id: 'uuid' },
  { attempt: 'int4', worker_id: 'text', started_at: 'timestamptz', finished_at: 'timestamptz', outcome: 'text', error: 'text' },
);

/**
 * A job's attempts, oldest first (Store.jobAttempts; job-attempt-list.sql): those that ended
 * without success, then its RUNNING or COMPLETED one, read from the job row. Empty for an
 * unknown id (the caller checks the job exists).
 */
export async function jobAttemptsRead(pool: StorePool, id: string): Promise<JobAttempt[]> {
  idCheck(id);
  const rows = await rowsOf(pool, jobAttemptListSql, { id });
  return rows.map((r) => ({
    attempt: r.attempt,
    workerId: r.worker_id,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    outcome: r.outcome,
    error: r.error,
  }));
}

interface DeadLetterGroupRow {
  queue: string;
  type: string;
  error: string;
  jobs: string;
  newest_finished_at: Date;
  seen: string;
  groups: string;
}
const jobDeadLetterGroupsSql = statement<{ queue: string | null; scanLimit: number; limit: number }, DeadLetterGroupRow>(
  'job-dead-letter-groups',
  { queue: 'text', scanLimit: 'int8', limit: 'int8' },
  { queue: 'text', type: 'text', error: 'text', jobs: 'int8', newest_finished_at: 'timestamptz', seen: 'int8', groups: 'int8' },
);

/** Most DLQ jobs one ListDeadLetterGroups call groups: the newest ones of its queue (or of all). */
export const DEAD_LETTER_SCAN_LIMIT = 10_000;

/**
 * Dead letters grouped by queue, type and error group, largest first (Store.jobDeadLetterGroups;
 * sql/job-dead-letter-groups.sql), at most `limit` groups.
 * - `truncated`: more DLQ jobs exist than the newest `scanLimit` that were grouped, so the
 *   counts cover only those. Must stay true: exactly `scanLimit` DLQ jobs, all grouped, is
 *   not truncated (the statement reads one id past the bound to know).
 * - `totalGroups`: the groups among the jobs grouped, before `limit` kept the largest; more
 *   than `groups.length` when the limit left some out.
 */
export async function jobDeadLetterGroups(
  pool: StorePool,
  params: { queue: string | null; limit: number; scanLimit?: number },
): Promise<{ groups: DeadLetterGroup[]; truncated: boolean; totalGroups: number }> {
  const scanLimit = params.scanLimit ?? DEAD_LETTER_SCAN_LIMIT;
  const rows = await rowsOf(pool, jobDeadLetterGroupsSql, { queue: params.queue, scanLimit, limit: params.limit });
  return {
    groups: rows.map((r) => ({ queue: r.queue, type: r.type, error: r.error, count: Number(r.jobs), newestFinishedAt: r.newest_finished_at })),
    truncated: rows.length > 0 && Number(rows[0]!.seen) > scanLimit,
    totalGroups: rows.length > 0 ? Number(rows[0]!.groups) : 0,
  };
}

const jobDependentsListSql = statement<{ id: string; limit: number }, { id: string; queue: string }>(
  'job-dependents-list',
  { id: 'uuid', limit: 'int8' },
  { id: 'uuid', queue: 'text' },
);

/** Most children GetJob lists. */
export const MAX_DEPENDENTS = 1000;

/**
 * A job's direct children, at most MAX_DEPENDENTS, oldest first, each with its queue (a
 * caller limited to queues is answered only those of its queues; Store.jobDependents).
 */
export async function jobDependents(pool: StorePool, id: string): Promise<{ id: string; queue: string }[]> {
  idCheck(id);
  return rowsOf(pool, jobDependentsListSql, { id, limit: MAX_DEPENDENTS });
}

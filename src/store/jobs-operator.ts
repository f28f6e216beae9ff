import type { StorePool } from './pool.js';
import { failedPrecondition, invalidArgument, notFound } from '../domain/errors.js';
import { isUuid } from '../domain/ids.js';
import { LIST_PAGE_BYTES, MAX_DEPENDENTS } from '../domain/validate.js';
import type { AttemptOutcome, DeadLetterGroup, Job, JobAttempt, JobListParams, JobState } from '../domain/job.js';
import { JOB_COLUMNS, jobFromRow, type JobRow } from './rows.js';
import { deadlockRetried } from './deadlocks.js';
import type { AuditActor } from '../domain/audit.js';
import { ACTOR_TYPES, actorParams, type ActorParams } from './audit.js';
import { rowOf, rowsOf, statement } from './statements.js';

/**
 * Operators' reads and writes of one job at a time (the JobService API): get, list, cancel,
 * retry, attempts, dead-letter groups, dependents; jobs-bulk.ts has the actions over a
 * filter. Not on the hot path: planned at every call.
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
  pageBytes: number;
}
const jobListSql = statement<JobListSqlParams, JobRow & { page_rows: string }>(
  'job-list',
  { queue: 'text', states: 'evora.job_state[]', type: 'text', idempotencyKey: 'text', errorGroup: 'text', afterId: 'uuid', limit: 'int8', pageBytes: 'int8' },
  { ...JOB_COLUMNS, page_rows: 'int8' },
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

/** INVALID_ARGUMENT unless `id` is a UUID: a job id is checked before it reaches SQL. */
export function idCheck(id: string): void {
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

/**
 * A page of jobs (Store.jobList): at most `limit`, fewer when their JSON text passes
 * LIST_PAGE_BYTES (job-list.sql); nextAfterId is set whenever more jobs match.
 */
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
    pageBytes: LIST_PAGE_BYTES,
  });
  const page = rows.slice(0, params.limit).map(jobFromRow);
  // More follow when the extra row came, or when the size cut left rows of the page out.
  const more = rows.length > params.limit || rows.length < Number(rows[0]?.page_rows ?? 0);
  return { jobs: page, nextAfterId: more ? (page[page.length - 1]?.id ?? null) : null };
}

/** An operator's cancel (Store.jobCancel). */
export async function jobCancel(pool: StorePool, id: string, now: Date | null, actor: AuditActor | undefined): Promise<Job> {
  idCheck(id);
  // Aborted to break a deadlock with another cancel (its cascade and this one's crossed), it changed nothing: run again.
  const row = await deadlockRetried(() => rowOf(pool, jobCancelSql, { id, now, ...actorParams(actor) }));
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

/**
 * A job's direct children, at most MAX_DEPENDENTS, oldest first, each with its queue (a
 * caller limited to queues is answered only those of its queues; Store.jobDependents).
 */
export async function jobDependents(pool: StorePool, id: string): Promise<{ id: string; queue: string }[]> {
  idCheck(id);
  return rowsOf(pool, jobDependentsListSql, { id, limit: MAX_DEPENDENTS });
}

import type { StorePool } from './pool.js';
import { failedPrecondition, invalidArgument, notFound } from '../domain/errors.js';
import { isUuid } from '../domain/ids.js';
import type { AttemptOutcome, Job, JobAttempt, JobListParams, JobState } from '../domain/job.js';
import { JOB_COLUMNS, jobFromRow, type JobRow } from './rows.js';
import { rowOf, rowsOf, statement } from './statements.js';

/**
 * Operators' reads and writes of single jobs (the JobService API): get, list, cancel,
 * retry. Not on the hot path: planned at every call.
 */

const jobGetSql = statement<{ id: string }, JobRow>('job-get', { id: 'uuid' }, JOB_COLUMNS);

interface JobListSqlParams {
  queue: string | null;
  states: JobState[] | null;
  type: string | null;
  afterId: string | null;
  limit: number;
}
const jobListSql = statement<JobListSqlParams, JobRow>(
  'job-list',
  { queue: 'text', states: 'evora.job_state[]', type: 'text', afterId: 'uuid', limit: 'int8' },
  JOB_COLUMNS,
);

const jobCancelSql = statement<{ id: string; now: Date | null }, JobRow>('job-cancel', { id: 'uuid', now: 'timestamptz' }, JOB_COLUMNS);

const jobRetrySql = statement<{ id: string; now: Date | null }, JobRow & { previous_state: JobState }>(
  'job-retry',
  { id: 'uuid', now: 'timestamptz' },
  { ...JOB_COLUMNS, previous_state: 'evora.job_state' },
);

function idCheck(id: string): void {
  if (!isUuid(id)) throw invalidArgument(`job id "${id}" is not a UUID`);
}

/** One job (Store.jobGet). */
export async function jobRead(pool: StorePool, id: string): Promise<Job> {
  idCheck(id);
  const row = await rowOf(pool, jobGetSql, { id });
  if (!row) throw notFound(`job ${id} not found`);
  return jobFromRow(row);
}

/** A page of jobs (Store.jobList). */
export async function jobsList(pool: StorePool, params: JobListParams): Promise<{ jobs: Job[]; nextAfterId: string | null }> {
  if (params.afterId && !isUuid(params.afterId)) throw invalidArgument('page token is not valid');
  const rows = await rowsOf(pool, jobListSql, {
    queue: params.queue || null,
    states: params.states && params.states.length > 0 ? params.states : null,
    type: params.type || null,
    afterId: params.afterId || null,
    limit: params.limit + 1,
  });
  const page = rows.slice(0, params.limit).map(jobFromRow);
  return { jobs: page, nextAfterId: rows.length > params.limit ? (page[page.length - 1]?.id ?? null) : null };
}

/** An operator's cancel (Store.jobCancel). */
export async function jobCancel(pool: StorePool, id: string, now: Date | null): Promise<Job> {
  idCheck(id);
  const row = await rowOf(pool, jobCancelSql, { id, now });
  if (row) return jobFromRow(row);
  const job = await jobRead(pool, id);
  if (job.state === 'CANCELLED') return job;
  throw failedPrecondition(`job ${job.id} is ${job.state} and cannot be cancelled`);
}

/** An operator's manual retry (Store.jobRetry). */
export async function jobRetry(pool: StorePool, id: string, now: Date | null): Promise<Job> {
  idCheck(id);
  const row = await rowOf(pool, jobRetrySql, { id, now });
  if (row) return jobFromRow(row);
  const job = await jobRead(pool, id);
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

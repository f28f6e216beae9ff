import type { BackoffKind, Queue } from '../domain/queue.js';
import type { Job, JobProgress, JobState, JsonObject } from '../domain/job.js';
import type { PgTypes } from './statements.js';

/**
 * The rows the statements return, as node-postgres hands them over, and how they become
 * the domain's types. A row type lists its columns in the order the statement returns them:
 * the declarations (PgTypes) are checked against PostgreSQL in that order.
 */

/** A whole row of evora.jobs (what `RETURNING *` returns), in the table's column order. */
export interface JobRow {
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
  /** What a keyed submit said for the fields the row resolves (0005_strict_idempotency.sql); null without a key. */
  submitted: JsonObject | null;
  /** The job's own backoff, each NULL = the queue's, and attempt timeout (0007_job_policy.sql). */
  backoff_kind: BackoffKind | null;
  backoff_base_seconds: number | null;
  backoff_cap_seconds: number | null;
  backoff_jitter: number | null;
  timeout_seconds: number | null;
  /** The job's concurrency key (0009_concurrency_keys.sql); null = none. */
  concurrency_key: string | null;
  // ----- dependencies (0011_dependencies.sql) -----
  /** The job's parents; null = none. */
  parent_ids: string[] | null;
  /** Whether some job names this one as a parent. */
  has_dependents: boolean;
  /** While CANCELLED: the parent whose end cancelled it. */
  cancelled_by: string | null;
  // Progress and checkpoints (0012_progress_attempts.sql).
  /** The last progress report (job-progress-many.sql builds it); null = none. */
  progress: ProgressJson | null;
  /** The last checkpoint reported; null = none. */
  checkpoint: JsonObject | null;
}

/** Job.progress as job-progress-many.sql stores it (absent keys were NULL). */
export interface ProgressJson {
  percent?: number;
  done?: number;
  total?: number;
  message?: string;
  attempt?: number;
  reported_at?: string;
}

/** The columns of evora.jobs, in table order. */
export const JOB_COLUMNS: PgTypes<JobRow> = {
  id: 'uuid',
  queue: 'text',
  type: 'text',
  payload: 'jsonb',
  state: 'evora.job_state',
  priority: 'int4',
  run_at: 'timestamptz',
  attempt: 'int4',
  max_attempts: 'int4',
  lease_token: 'uuid',
  locked_until: 'timestamptz',
  worker_id: 'text',
  idempotency_key: 'text',
  result: 'jsonb',
  last_error: 'text',
  cancel_requested_at: 'timestamptz',
  created_at: 'timestamptz',
  started_at: 'timestamptz',
  finished_at: 'timestamptz',
  submitted: 'jsonb',
  backoff_kind: 'evora.backoff_kind',
  backoff_base_seconds: 'float8',
  backoff_cap_seconds: 'float8',
  backoff_jitter: 'float8',
  timeout_seconds: 'float8',
  concurrency_key: 'text',
  // dependencies (0011_dependencies.sql)
  parent_ids: 'uuid[]',
  has_dependents: 'bool',
  cancelled_by: 'uuid',
  progress: 'jsonb',
  checkpoint: 'jsonb',
};

/**
 * Some of a table's columns, in the order given (a statement that reads back fewer columns
 * than `RETURNING *`): their types come from the table's one declaration.
 */
export function columnsOf<T, K extends keyof T>(columns: PgTypes<T>, names: readonly K[]): PgTypes<Pick<T, K>> {
  return Object.fromEntries(names.map((n) => [n, columns[n]])) as unknown as PgTypes<Pick<T, K>>;
}

/** A row of evora.queues, in the table's column order. */
export interface QueueRow {
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
  completed_retention_seconds: number | null;
  cancelled_retention_seconds: number | null;
  dlq_retention_seconds: number | null;
  attempt_timeout_seconds: number | null;
  rate_per_second: number | null;
  rate_burst: number | null;
  /** The rate limit's bucket state: read and written only by evora.queue_limit (migration 0008). */
  rate_tokens: number | null;
  rate_refilled_at: Date | null;
  /** At most this many RUNNING jobs per concurrency key; null = no per-key limit (0009). */
  max_concurrency_per_key: number | null;
  /** Completing jobs are deleted, not kept COMPLETED (0015). */
  delete_on_complete: boolean;
}

/** The columns of evora.queues, in table order. */
export const QUEUE_COLUMNS: PgTypes<QueueRow> = {
  name: 'text',
  max_attempts: 'int4',
  backoff_kind: 'evora.backoff_kind',
  backoff_base_seconds: 'float8',
  backoff_cap_seconds: 'float8',
  backoff_jitter: 'float8',
  lease_seconds: 'int4',
  paused: 'bool',
  max_concurrency: 'int4',
  created_at: 'timestamptz',
  updated_at: 'timestamptz',
  completed_retention_seconds: 'float8',
  cancelled_retention_seconds: 'float8',
  dlq_retention_seconds: 'float8',
  attempt_timeout_seconds: 'float8',
  rate_per_second: 'float8',
  rate_burst: 'int4',
  rate_tokens: 'float8',
  rate_refilled_at: 'timestamptz',
  max_concurrency_per_key: 'int4',
  delete_on_complete: 'bool',
};

/** A job row as the domain's Job. */
export function jobFromRow(r: JobRow): Job {
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
    // `?? null`: a statement that reads back fewer columns (the claim) leaves these unset.
    backoff:
      (r.backoff_kind ?? r.backoff_base_seconds ?? r.backoff_cap_seconds ?? r.backoff_jitter ?? null) === null
        ? null
        : {
            kind: r.backoff_kind ?? null,
            baseSeconds: r.backoff_base_seconds ?? null,
            capSeconds: r.backoff_cap_seconds ?? null,
            jitter: r.backoff_jitter ?? null,
          },
    timeoutSeconds: r.timeout_seconds ?? null,
    concurrencyKey: r.concurrency_key ?? null,
    parentIds: r.parent_ids ?? null,
    progress: progressFromJson(r.progress ?? null),
    checkpoint: r.checkpoint ?? null,
  };
}

/** Job.progress from its stored JSON. */
export function progressFromJson(p: ProgressJson | null): JobProgress | null {
  if (!p) return null;
  return {
    percent: p.percent ?? null,
    done: p.done ?? null,
    total: p.total ?? null,
    message: p.message ?? '',
    attempt: p.attempt ?? 0,
    reportedAt: new Date(p.reported_at ?? 0),
  };
}

/** A queue row as the domain's Queue. */
export function queueFromRow(r: QueueRow): Queue {
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
    completedRetentionSeconds: r.completed_retention_seconds,
    cancelledRetentionSeconds: r.cancelled_retention_seconds,
    dlqRetentionSeconds: r.dlq_retention_seconds,
    attemptTimeoutSeconds: r.attempt_timeout_seconds,
    rateLimit: r.rate_per_second === null || r.rate_burst === null ? null : { perSecond: r.rate_per_second, burst: r.rate_burst },
    maxConcurrencyPerKey: r.max_concurrency_per_key,
    deleteOnComplete: r.delete_on_complete,
  };
}

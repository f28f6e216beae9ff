import type { StorePool } from './pool.js';
import { failedPrecondition, invalidArgument, notFound } from '../domain/errors.js';
import type { BackoffKind, Queue, QueueUpsertInput } from '../domain/queue.js';
import { QUEUE_COLUMNS, queueFromRow, type QueueRow } from './rows.js';
import type { AuditActor } from '../domain/audit.js';
import type { JobState, JsonObject } from '../domain/job.js';
import { ACTOR_TYPES, actorParams, type ActorParams } from './audit.js';
import { inTransaction, rowOf, rowsOf, statement, type None } from './statements.js';

/** Queues: their settings and pause state (the QueueService API). */

interface QueueUpsertParams extends ActorParams {
  name: string;
  maxAttempts: number | null;
  backoffKind: BackoffKind | null;
  backoffBaseSeconds: number | null;
  backoffCapSeconds: number | null;
  backoffJitter: number | null;
  leaseSeconds: number | null;
  maxConcurrency: number | null;
  completedRetentionSeconds: number | null;
  cancelledRetentionSeconds: number | null;
  dlqRetentionSeconds: number | null;
  attemptTimeoutSeconds: number | null;
  ratePerSecond: number | null;
  rateBurst: number | null;
  maxConcurrencyPerKey: number | null;
  deleteOnComplete: boolean | null;
  change: string;
  now: Date | null;
}
const queueUpsertSql = statement<QueueUpsertParams, QueueRow & { created: boolean }>(
  'queue-upsert',
  {
    name: 'text',
    maxAttempts: 'int4',
    backoffKind: 'evora.backoff_kind',
    backoffBaseSeconds: 'float8',
    backoffCapSeconds: 'float8',
    backoffJitter: 'float8',
    leaseSeconds: 'int4',
    maxConcurrency: 'int4',
    completedRetentionSeconds: 'float8',
    cancelledRetentionSeconds: 'float8',
    dlqRetentionSeconds: 'float8',
    attemptTimeoutSeconds: 'float8',
    ratePerSecond: 'float8',
    rateBurst: 'int4',
    maxConcurrencyPerKey: 'int4',
    deleteOnComplete: 'bool',
    change: 'jsonb',
    now: 'timestamptz',
    ...ACTOR_TYPES,
  },
  { ...QUEUE_COLUMNS, created: 'bool' },
);
const queueGetSql = statement<{ name: string }, QueueRow>('queue-get', { name: 'text' }, QUEUE_COLUMNS);
const queueListSql = statement<None, QueueRow>('queue-list', {}, QUEUE_COLUMNS);
const queueLeaseSecondsSql = statement<{ queues: string[] }, { name: string; lease_seconds: number }>(
  'queue-lease-seconds',
  { queues: 'text[]' },
  { name: 'text', lease_seconds: 'int4' },
);
const queueSetPausedSql = statement<ActorParams & { name: string; paused: boolean; now: Date | null }, QueueRow>(
  'queue-set-paused',
  { name: 'text', paused: 'bool', now: 'timestamptz', ...ACTOR_TYPES },
  QUEUE_COLUMNS,
);

/**
 * The settings an upsert sets, for its audit event: the non-null inputs, by their
 * snake_case names (the proto's), the name left out (it is the target).
 */
export function queueUpsertChange(params: QueueUpsertInput): JsonObject {
  const change: JsonObject = {};
  for (const [key, value] of Object.entries(params)) {
    if (key === 'name' || key === 'now' || key === 'actor' || value === null || value === undefined) continue;
    const v = key === 'rateLimit' && params.rateLimit ? { per_second: params.rateLimit.perSecond, burst: params.rateLimit.burst } : value;
    change[key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = v as JsonObject[string];
  }
  return change;
}

/** Creates or changes a queue (Store.queueUpsert), with its audit event. */
export async function queueUpsert(
  pool: StorePool,
  params: QueueUpsertInput,
  now: Date | null,
  actor: AuditActor | undefined,
): Promise<{ queue: Queue; created: boolean }> {
  const row = await rowOf(pool, queueUpsertSql, {
    ...actorParams(actor),
    change: JSON.stringify(queueUpsertChange(params)),
    name: params.name,
    maxAttempts: params.maxAttempts ?? null,
    backoffKind: params.backoffKind ?? null,
    backoffBaseSeconds: params.backoffBaseSeconds ?? null,
    backoffCapSeconds: params.backoffCapSeconds ?? null,
    backoffJitter: params.backoffJitter ?? null,
    leaseSeconds: params.leaseSeconds ?? null,
    maxConcurrency: params.maxConcurrency ?? null,
    completedRetentionSeconds: params.completedRetentionSeconds ?? null,
    cancelledRetentionSeconds: params.cancelledRetentionSeconds ?? null,
    dlqRetentionSeconds: params.dlqRetentionSeconds ?? null,
    attemptTimeoutSeconds: params.attemptTimeoutSeconds ?? null,
    ratePerSecond: params.rateLimit?.perSecond ?? null,
    rateBurst: params.rateLimit ? (params.rateLimit.perSecond === 0 ? 0 : params.rateLimit.burst) : null,
    maxConcurrencyPerKey: params.maxConcurrencyPerKey ?? null,
    deleteOnComplete: params.deleteOnComplete ?? null,
    now,
  }).catch((err: unknown) => {
    if (constraintOf(err) === 'queues_backoff_base_within_cap') {
      throw invalidArgument(
        "backoff.base would be longer than backoff.cap (the queue's current cap, 1 hour for a new queue, when the request sets none): every delay would be the cap; give a cap at least as long as the base",
        { cause: err },
      );
    }
    throw err;
  });
  return { queue: queueFromRow(row!), created: row!.created };
}

/** The constraint a PostgreSQL error names (23514 check_violation and the like), if any. */
function constraintOf(err: unknown): string | undefined {
  const c = typeof err === 'object' && err !== null ? (err as { constraint?: unknown }).constraint : undefined;
  return typeof c === 'string' ? c : undefined;
}

/** One queue (Store.queueGet). */
export async function queueRead(pool: StorePool, name: string): Promise<Queue> {
  const row = await rowOf(pool, queueGetSql, { name });
  if (!row) throw notFound(`queue "${name}" not found`);
  return queueFromRow(row);
}

/** Every queue (Store.queueList). */
export async function queuesList(pool: StorePool): Promise<Queue[]> {
  return (await rowsOf(pool, queueListSql, {})).map(queueFromRow);
}

/** The lease length of each named queue that exists (Store.queueLeaseSeconds). */
export async function queuesLeaseSeconds(pool: StorePool, queues: string[]): Promise<Map<string, number>> {
  const rows = await rowsOf(pool, queueLeaseSecondsSql, { queues });
  return new Map(rows.map((r) => [r.name, r.lease_seconds]));
}

/** Pauses or resumes a queue (Store.queueSetPaused), with its audit event. */
export async function queueSetPaused(pool: StorePool, name: string, paused: boolean, now: Date | null, actor: AuditActor | undefined): Promise<Queue> {
  const row = await rowOf(pool, queueSetPausedSql, { name, paused, now, ...actorParams(actor) });
  if (!row) throw notFound(`queue "${name}" not found`);
  return queueFromRow(row);
}

const queueDeleteLockSql = statement<{ name: string }, { locked: string }>('queue-delete-lock', { name: 'text' }, { locked: 'void' });
const queueDeleteSql = statement<ActorParams & { name: string; now: Date | null }, { found: boolean; deleted: boolean }>(
  'queue-delete',
  { name: 'text', now: 'timestamptz', ...ACTOR_TYPES },
  { found: 'bool', deleted: 'bool' },
);
const queueContentsSql = statement<{ name: string }, { state: JobState | null; n: string; schedules: string[] }>(
  'queue-contents',
  { name: 'text' },
  { state: 'evora.job_state', n: 'int8', schedules: 'text[]' },
);

/** What keeps a queue from being deleted: its jobs by state and its schedules' names. */
export interface QueueContents {
  jobs: Partial<Record<JobState, number>>;
  schedules: string[];
}

/**
 * The refusal's one line: what is in the queue and the commands that empty it (the CLI's
 * real spellings), e.g. `queue "q" has 12 jobs (3 PENDING, 9 COMPLETED) and 1 schedule
 * (nightly): ...`.
 */
export function queueNotEmptyMessage(name: string, c: QueueContents): string {
  const states = JOB_STATE_ORDER.filter((s) => (c.jobs[s] ?? 0) > 0);
  const total = states.reduce((n, s) => n + (c.jobs[s] ?? 0), 0);
  const what: string[] = [];
  if (total > 0) what.push(`${total} job${total === 1 ? '' : 's'} (${states.map((s) => `${c.jobs[s]} ${s}`).join(', ')})`);
  if (c.schedules.length > 0) {
    const shown = c.schedules.slice(0, 5).join(', ') + (c.schedules.length > 5 ? ', ...' : '');
    what.push(`${c.schedules.length} schedule${c.schedules.length === 1 ? '' : 's'} (${shown})`);
  }
  const steps: string[] = [];
  if (states.some((s) => s === 'PENDING' || s === 'WAITING' || s === 'RUNNING')) steps.push(`cancel its unfinished jobs (evora cancel --all --queue ${name})`);
  if (total > 0) steps.push(`purge its jobs once finished (evora purge --queue ${name})`);
  if (c.schedules.length > 0) steps.push(`delete its schedules (evora schedule delete <name>)`);
  return `queue "${name}" is not empty: it has ${what.join(' and ')}; only an empty queue is deleted: ${steps.join(', ')}, then delete it again`;
}

/** Job states in the order a message lists them: unfinished first. */
const JOB_STATE_ORDER: readonly JobState[] = ['PENDING', 'WAITING', 'RUNNING', 'COMPLETED', 'DLQ', 'CANCELLED'];

/**
 * Deletes an empty queue and its settings (Store.queueDelete), with its audit event, under
 * the queue's advisory lock (queue-delete-lock.sql), which every submit takes shared: so no
 * job is ever left without its queue row. NOT_FOUND when there is no such queue;
 * FAILED_PRECONDITION, saying what is in it, when it is not empty (counted after the
 * delete's transaction ended: submits into the queue never wait for the counting).
 */
export async function queueDelete(pool: StorePool, name: string, now: Date | null, actor: AuditActor | undefined): Promise<void> {
  const row = await pool.withClient((client) =>
    inTransaction(client, async () => {
      await rowsOf(client, queueDeleteLockSql, { name });
      return rowOf(client, queueDeleteSql, { name, now, ...actorParams(actor) });
    }),
  );
  if (!row?.found) throw notFound(`queue "${name}" not found`);
  if (row.deleted) return;
  const rows = await rowsOf(pool, queueContentsSql, { name });
  const jobs: Partial<Record<JobState, number>> = {};
  for (const r of rows) if (r.state !== null) jobs[r.state] = Number(r.n);
  throw failedPrecondition(queueNotEmptyMessage(name, { jobs, schedules: rows[0]?.schedules ?? [] }));
}

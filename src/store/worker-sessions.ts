import type { StorePool } from './pool.js';
import type { WorkerSessionInfo } from '../domain/job.js';
import { rowOf, rowsOf, statement, type None } from './statements.js';

/**
 * Every server's live worker sessions (0014_worker_sessions.sql): each server syncs its own
 * (workerSessionSync, batch-shaped), forgets a closed one at once (workerSessionDelete), and
 * the leader deletes a dead server's (workerSessionPrune). Reads take only fresh rows.
 */

/** A row older than this (seconds since last_seen_at) is a dead server's: ignored, then pruned. */
export const WORKER_SESSION_STALE_SECONDS = 30;

/** One session as this server's dispatcher knows it (what a sync writes). */
export type WorkerSessionWrite = Omit<WorkerSessionInfo, 'serverId' | 'serverAddress' | 'lastSeenAt'>;

interface WorkerSessionSyncParams {
  serverId: string;
  serverAddress: string;
  sessionIds: string[];
  workerIds: string[];
  queues: string[];
  jobTypes: string[];
  slots: number[];
  heldJobs: number[];
  freeSlots: number[];
  connectedAts: Date[];
  now: Date | null;
}
const workerSessionSyncSql = statement<WorkerSessionSyncParams, None>(
  'worker-session-sync',
  {
    serverId: 'uuid',
    serverAddress: 'text',
    sessionIds: 'uuid[]',
    workerIds: 'text[]',
    queues: 'text[]',
    jobTypes: 'text[]',
    slots: 'int4[]',
    heldJobs: 'int4[]',
    freeSlots: 'int4[]',
    connectedAts: 'timestamptz[]',
    now: 'timestamptz',
  },
  {},
);
const workerSessionDeleteSql = statement<{ sessionIds: string[] }, None>('worker-session-delete', { sessionIds: 'uuid[]' }, {});

interface WorkerSessionRow {
  session_id: string;
  worker_id: string;
  server_id: string;
  server_address: string;
  queues: string[];
  job_types: string[];
  slots: number;
  held_jobs: number;
  free_slots: number;
  connected_at: Date;
  last_seen_at: Date;
}
const workerSessionListSql = statement<{ queues: string[] | null; staleSeconds: number; now: Date | null }, WorkerSessionRow>(
  'worker-session-list',
  { queues: 'text[]', staleSeconds: 'float8', now: 'timestamptz' },
  {
    session_id: 'uuid',
    worker_id: 'text',
    server_id: 'uuid',
    server_address: 'text',
    queues: 'text[]',
    job_types: 'text[]',
    slots: 'int4',
    held_jobs: 'int4',
    free_slots: 'int4',
    connected_at: 'timestamptz',
    last_seen_at: 'timestamptz',
  },
);
const workerSessionPruneSql = statement<{ staleSeconds: number; now: Date | null }, { sessions: number }>(
  'worker-session-prune',
  { staleSeconds: 'float8', now: 'timestamptz' },
  { sessions: 'int4' },
);

/**
 * Makes the table's rows of server `serverId` exactly `sessions` (Store.workerSessionSync):
 * upserts each (last_seen_at = now) and deletes the server's other rows, in one statement.
 */
export async function workerSessionSync(
  pool: StorePool,
  params: { serverId: string; serverAddress: string; sessions: WorkerSessionWrite[]; now: Date | null },
): Promise<void> {
  const s = params.sessions;
  await rowsOf(pool, workerSessionSyncSql, {
    serverId: params.serverId,
    serverAddress: params.serverAddress,
    sessionIds: s.map((x) => x.sessionId),
    workerIds: s.map((x) => x.workerId),
    queues: s.map((x) => x.queues.join(',')),
    jobTypes: s.map((x) => x.jobTypes.join(',')),
    slots: s.map((x) => x.slots),
    heldJobs: s.map((x) => x.heldJobs),
    freeSlots: s.map((x) => x.freeSlots),
    connectedAts: s.map((x) => x.connectedAt),
    now: params.now,
  });
}

/** Forgets closed sessions (Store.workerSessionDelete). */
export async function workerSessionDelete(pool: StorePool, sessionIds: string[]): Promise<void> {
  if (sessionIds.length > 0) await rowsOf(pool, workerSessionDeleteSql, { sessionIds });
}

/** The fresh sessions of every server, of any of `queues` (null: all) (Store.workerSessionList). */
export async function workerSessionList(pool: StorePool, params: { queues: string[] | null; now: Date | null }): Promise<WorkerSessionInfo[]> {
  const rows = await rowsOf(pool, workerSessionListSql, { queues: params.queues, staleSeconds: WORKER_SESSION_STALE_SECONDS, now: params.now });
  return rows.map((r) => ({
    sessionId: r.session_id,
    workerId: r.worker_id,
    serverId: r.server_id,
    serverAddress: r.server_address,
    queues: r.queues,
    jobTypes: r.job_types,
    slots: r.slots,
    heldJobs: r.held_jobs,
    freeSlots: r.free_slots,
    connectedAt: r.connected_at,
    lastSeenAt: r.last_seen_at,
  }));
}

/** Deletes the stale rows of dead servers (Store.workerSessionPrune); returns how many. */
export async function workerSessionPrune(pool: StorePool, now: Date | null): Promise<number> {
  return (await rowOf(pool, workerSessionPruneSql, { staleSeconds: WORKER_SESSION_STALE_SECONDS, now }))?.sessions ?? 0;
}

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { ServiceError } from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import { call, clientsFor, type Clients } from '../helpers/server-setup.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';
import {
  backendKill,
  backendsOf,
  freePort,
  logLines,
  privatePostgres,
  serveChild,
  type PrivatePostgres,
  type ServeChild,
} from '../helpers/private-pg.js';

/**
 * Issue 15, point 1: a server process must survive PostgreSQL dropping any connection it
 * holds, whether checked out of the pool in the middle of a statement or a dedicated one.
 * Each kind of connection is killed mid-statement (held there by a lock this test takes)
 * or, for the idle dedicated ones, as it sits: by pg_terminate_backend, and by SIGKILL of
 * the backend process (the real crash: the postmaster then restarts every backend). The
 * server runs as a child process (`evora serve`), so an unhandled 'error' event would kill
 * it, exactly as in production; it must stay up, keep serving, log nothing at error level,
 * and exit 0 on SIGTERM. A cluster of this file's own takes the crashes.
 */

const HOWS = ['terminate', 'sigkill'] as const;
const INTERVALS = ['--poll-interval-ms', '200', '--sweep-interval-ms', '200', '--election-interval-ms', '200', '--project-interval-ms', '200'];
/** The migration runner's advisory lock key (src/store/migrate.ts). */
const MIGRATION_LOCK_KEY = '7301846001';

let pgc: PrivatePostgres;

beforeAll(async () => {
  pgc = await privatePostgres();
});
afterAll(async () => {
  await pgc?.close();
});

/** A transaction of the test's own holding `lockSql` until released (or killed with the cluster). */
async function lockHold(url: string, lockSql: string): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url, application_name: 'evora-test-lock' });
  client.on('error', () => undefined);
  await client.connect();
  await client.query('BEGIN');
  await client.query(lockSql);
  return {
    release: async () => {
      await client.query('ROLLBACK').catch(() => undefined);
      await client.end().catch(() => undefined);
    },
  };
}

/** The pid of the server backend (application_name `app`) that waits on a lock running a statement containing `text`. */
async function untilWaiting(app: string, text: string, not: number[] = []): Promise<number> {
  const pid = await waitFor(
    async () =>
      (await backendsOf(pgc, app)).find((b) => b.wait_event_type === 'Lock' && b.query.includes(text) && !not.includes(b.pid))?.pid,
    { what: `a backend of ${app} waiting in "${text}"` },
  );
  return pid!;
}

/** After a kill: a SIGKILL puts the whole cluster through crash recovery; wait until it is back. */
async function afterKill(how: (typeof HOWS)[number]): Promise<void> {
  if (how === 'sigkill') await pgc.untilAccepting();
}

function submitRequest(queue: string, key = '') {
  return { queue, type: 't', payload: { n: 1 }, priority: 0, idempotencyKey: key, maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) };
}

/** The server answers a submit and reads the job back (retrying while the database recovers). */
async function serves(clients: Clients): Promise<void> {
  await waitFor(
    async () => {
      const { job } = await call(clients.jobs, 'submitJob', submitRequest(queueName('alive')));
      const read = await call(clients.jobs, 'getJob', { id: job!.id });
      return read.job?.id === job!.id;
    },
    { timeoutMs: 30_000, what: 'the server to serve again' },
  );
}

/** An RPC that failed for want of the database: UNAVAILABLE with one readable line. */
function expectUnavailable(err: unknown): void {
  const e = err as ServiceError;
  expect(e.code, e.details).toBe(status.UNAVAILABLE);
  expect(e.details).toMatch(/^database unavailable: \S/);
  expect(e.details).not.toContain('\n');
}

/** What every test of a running child checks at its end: it lived, logged no error, and stops cleanly. */
function expectQuietSurvivor(srv: ServeChild): void {
  const output = srv.output();
  expect(output).not.toContain("Emitted 'error' event");
  expect(output).not.toContain('unexpected error');
  const errors = logLines(output).filter((l) => l.level >= 50);
  expect(errors, JSON.stringify(errors.slice(0, 3))).toEqual([]);
}

describe('a running server survives the loss of each connection it holds', () => {
  let srv: ServeChild;
  let clients: Clients;
  let url: string;

  beforeAll(async () => {
    url = await pgc.databaseCreate();
    const port = await freePort();
    srv = serveChild(['--port', String(port), ...INTERVALS], { DATABASE_URL: url, EVORA_LOG_LEVEL: 'info' });
    await waitFor(() => srv.output().includes('Evora listening'), { timeoutMs: 60_000, what: 'the server to listen' });
    clients = clientsFor(`127.0.0.1:${port}`);
  });
  afterEach(async () => {
    expect(srv.child.exitCode, srv.output().slice(-2000)).toBeNull();
    await serves(clients);
  });
  afterAll(async () => {
    clients?.close();
    if (!srv) return;
    expect(await srv.stop(), srv.output().slice(-2000)).toBe(0);
    expectQuietSurvivor(srv);
  });

  for (const how of HOWS) {
    it(`the submit transaction, killed mid-statement (${how})`, async () => {
      const lock = await lockHold(url, 'LOCK TABLE evora.jobs IN SHARE ROW EXCLUSIVE MODE');
      try {
        const queue = queueName('submit');
        // With idempotency keys, a batch of two runs in a transaction on a checked-out client.
        const submitting = call(clients.jobs, 'submitJobs', { idsOnly: false, jobs: [submitRequest(queue, 'k1'), submitRequest(queue, 'k2')] }).then(
          () => null,
          (err: unknown) => err,
        );
        const pid = await untilWaiting('evora', 'INSERT INTO evora.jobs');
        await backendKill(pgc, pid, how);
        expectUnavailable(await submitting);
      } finally {
        await lock.release();
      }
      await afterKill(how);
    });

    it(`the telemetry apply (pg sink), killed mid-statement (${how})`, async () => {
      const lock = await lockHold(url, 'LOCK TABLE evora.telemetry_applied_batches IN EXCLUSIVE MODE');
      try {
        await call(clients.jobs, 'submitJob', submitRequest(queueName('projected'))); // something to project
        const pid = await untilWaiting('evora', 'telemetry_applied_batches');
        await backendKill(pgc, pid, how);
      } finally {
        await lock.release();
      }
      await afterKill(how);
    });

    it(`a claim in flight, killed mid-statement (${how})`, async () => {
      const queue = queueName('claim');
      const worker = new RawWorker(clients);
      try {
        await worker.hello(`w-${how}`, [queue], 1);
        const lock = await lockHold(url, 'LOCK TABLE evora.jobs IN EXCLUSIVE MODE');
        try {
          // The dispatcher's fallback poll claims for the idle worker, and waits on the lock.
          const pid = await untilWaiting('evora', 'claimable_queues');
          await backendKill(pgc, pid, how);
        } finally {
          await lock.release();
        }
        await afterKill(how);
        // The worker's stream lived through it, and gets work again.
        await waitFor(() => call(clients.jobs, 'submitJob', submitRequest(queue)).then(() => true), { timeoutMs: 30_000 });
        await worker.until(() => worker.jobs.length === 1);
        expect(worker.ended).toBe(false);
      } finally {
        worker.close();
      }
    });

    it(`the LISTEN connection, killed (${how})`, async () => {
      const [before] = (await waitFor(() => backendsOf(pgc, 'evora-listener').then((b) => (b.length === 1 ? b : null))))!;
      await backendKill(pgc, before!.pid, how);
      await afterKill(how);
      await waitFor(() => backendsOf(pgc, 'evora-listener').then((b) => b.length === 1 && b[0]!.pid !== before!.pid), {
        timeoutMs: 30_000,
        what: 'the listener to reconnect',
      });
    });

    it(`the leader's lock connection, killed (${how})`, async () => {
      const leaderLocks = () =>
        pgc.query<{ pid: number }>(
          `SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid)
            WHERE a.application_name = 'evora-leader' AND l.locktype = 'advisory' AND l.granted`,
        );
      const [before] = (await waitFor(() => leaderLocks().then((r) => (r.length === 1 ? r : null)), { what: 'a leader' }))!;
      await backendKill(pgc, before!.pid, how);
      await afterKill(how);
      await waitFor(() => leaderLocks().then((r) => r.length === 1 && r[0]!.pid !== before!.pid), {
        timeoutMs: 30_000,
        what: 'the server to be elected again',
      });
    });
  }
});

describe('a starting server survives the loss of its migration connection', () => {
  for (const how of HOWS) {
    it(`the migration runner, killed mid-statement (${how}), is retried`, async () => {
      const url = await pgc.databaseCreate();
      // Hold the migration lock, so the server's migration waits for it.
      const holder = new pg.Client({ connectionString: url, application_name: 'evora-test-lock' });
      holder.on('error', () => undefined);
      await holder.connect();
      await holder.query(`SELECT pg_advisory_lock(${MIGRATION_LOCK_KEY})`);
      const port = await freePort();
      const srv = serveChild(['--port', String(port), ...INTERVALS], { DATABASE_URL: url, EVORA_LOG_LEVEL: 'info' });
      const clients = clientsFor(`127.0.0.1:${port}`);
      try {
        const pid = await untilWaiting('evora-migrate', 'pg_advisory_xact_lock');
        await backendKill(pgc, pid, how);
        if (how === 'terminate') await untilWaiting('evora-migrate', 'pg_advisory_xact_lock', [pid]); // tried again
        await holder.end().catch(() => undefined); // let it through (a crash has released it already)
        await afterKill(how);
        await waitFor(() => srv.output().includes('Evora listening'), { timeoutMs: 60_000, what: 'the server to be ready' });
        expect(srv.child.exitCode).toBeNull();
        await serves(clients);
        expect(await srv.stop(), srv.output().slice(-2000)).toBe(0);
        expectQuietSurvivor(srv);
      } finally {
        clients.close();
        await holder.end().catch(() => undefined);
        srv.child.kill('SIGKILL');
      }
    });
  }
});

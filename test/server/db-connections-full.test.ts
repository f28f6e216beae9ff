import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import * as grpc from '@grpc/grpc-js';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { call, clientsFor } from '../helpers/server-setup.js';
import { queueName } from '../helpers/factories.js';
import { teardownAdd } from '../helpers/teardown.js';
import { waitFor } from '../helpers/wait.js';
import { freePort, logLines, privatePostgres, serveChild, type PrivatePostgres, type ServeChild } from '../helpers/private-pg.js';
import { pino } from 'pino';
import { isUnavailable } from '../../src/domain/errors.js';
import { DatabaseAvailability } from '../../src/store/availability.js';

/**
 * PostgreSQL out of connection slots: other clients hold every one of max_connections (12
 * on a cluster of this file's own), before the server starts and while it runs. The server
 * (`evora serve`, a child process) must not exit; a call that needs a connection it cannot
 * get is answered UNAVAILABLE with one line; the log says what is wrong once, not once per
 * refused connection; and once the slots are free it serves again without a restart, every
 * job completed once.
 *
 * While it runs, the connections the server already holds go on answering while new ones
 * are refused (53300). Taken as an outage, each refusal began one and the next answered
 * statement ended it: a warn and an info line per refused reconnect of the LISTEN
 * connection, each second, for as long as the slots stayed taken. A refusal leaves the
 * database's state as it is (src/store/availability.ts).
 *
 * The same cluster's small lock table (max_locks_per_transaction times its few slots) gives
 * a real out-of-memory refusal (53200, "out of shared memory") of one statement cheaply.
 */

const MAX_CONNECTIONS = 12;
const INTERVALS = ['--poll-interval-ms', '200', '--sweep-interval-ms', '200', '--election-interval-ms', '200', '--project-interval-ms', '200'];
const TOO_MANY = 'sorry, too many clients already';

let pgc: PrivatePostgres;

beforeAll(async () => {
  pgc = await privatePostgres({ postgresFlags: ['-c', `max_connections=${MAX_CONNECTIONS}`] });
});
afterAll(async () => {
  await pgc?.close();
});

/**
 * Other clients taking every free connection slot, and each one that frees, until
 * released. `refusals` counts the connects PostgreSQL refused for want of a slot.
 */
function squatters(url: string) {
  const held: pg.Client[] = [];
  let stopped = false;
  let refusals = 0;
  const loop = (async () => {
    while (!stopped) {
      const client = new pg.Client({ connectionString: url, application_name: 'evora-test-squatter' });
      client.on('error', () => undefined);
      try {
        await client.connect();
        held.push(client);
      } catch (err) {
        if ((err as { code?: unknown }).code !== '53300') throw err;
        refusals++;
        await new Promise((r) => setTimeout(r, 2));
      }
    }
  })();
  let released: Promise<void> | null = null;
  return {
    refusals: () => refusals,
    /** Stops taking slots and frees every one taken. Safe to call twice. */
    release: () =>
      (released ??= (async () => {
        stopped = true;
        await loop;
        await Promise.all(held.map((c) => c.end().catch(() => undefined)));
      })()),
  };
}

/** A connection of the test's own, opened before the slots are taken (for checks and kills meanwhile). */
async function adminConnect(): Promise<pg.Client> {
  const admin = new pg.Client({ connectionString: pgc.url, application_name: 'evora-test-admin' });
  admin.on('error', () => undefined);
  await admin.connect();
  return admin;
}

/** `evora serve` on `url`; a test that fails before it stops the server leaves it to the file's teardown (SIGKILL). */
function serve(url: string, port: number): ServeChild {
  const srv = serveChild(['--port', String(port), ...INTERVALS], { DATABASE_URL: url, EVORA_LOG_LEVEL: 'debug' });
  teardownAdd(() => {
    if (srv.child.exitCode === null && srv.child.signalCode === null) srv.child.kill('SIGKILL');
  });
  return srv;
}

/** The log lines written since `from` (an offset into the output) at warn or above. */
function warnsSince(srv: ServeChild, from: number) {
  return logLines(srv.output().slice(from)).filter((l) => l.level >= 40);
}

describe('PostgreSQL out of connection slots', () => {
  it('before the server starts: it waits (UNAVAILABLE, one line in the log) and comes up once slots free', async () => {
    const url = await pgc.databaseCreate();
    const squat = squatters(pgc.url);
    await waitFor(() => squat.refusals() > 0, { what: 'every slot taken' });
    const port = await freePort();
    const srv = serve(url, port);
    const clients = clientsFor(`127.0.0.1:${port}`);
    try {
      // Several attempts refused (the startup backs off from 100 ms).
      await waitFor(() => logLines(srv.output()).filter((l) => l.reason === TOO_MANY).length >= 3, { timeoutMs: 30_000, what: 'refused attempts' });
      const err = await call(clients.jobs, 'getJob', { id: '00000000-0000-0000-0000-000000000000' }).then(
        () => null,
        (e: unknown) => e as grpc.ServiceError,
      );
      expect(err?.code).toBe(grpc.status.UNAVAILABLE);
      expect(err!.details).toBe('the server is starting: waiting for the database');
      expect(srv.child.exitCode).toBeNull();

      await squat.release();
      await waitFor(() => srv.output().includes('Evora listening'), { timeoutMs: 30_000, what: 'the server to listen' });
      const { job } = await call(clients.jobs, 'submitJob', {
        queue: queueName('after-full'), type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0),
      });
      expect(job?.id).toBeTruthy();
      expect(warnsSince(srv, 0).map((l) => l.msg)).toEqual([`waiting for the database: ${TOO_MANY}`]);
      expect(logLines(srv.output()).filter((l) => /^database reached after/.test(l.msg))).toHaveLength(1);
    } finally {
      clients.close();
      await squat.release();
      expect(await srv.stop(), srv.output().slice(-2000)).toBe(0);
    }
  });

  it('while it runs: calls needing a new connection are UNAVAILABLE, one warn line, no job lost or completed twice', async () => {
    const url = await pgc.databaseCreate();
    const port = await freePort();
    const srv = serve(url, port);
    await waitFor(() => srv.output().includes('Evora listening'), { timeoutMs: 60_000, what: 'the server to listen' });
    await waitFor(() => srv.output().includes('elected leader'), { what: 'leadership' });
    const address = `127.0.0.1:${port}`;
    const client = new EvoraClient({ address, deadlineMs: 10_000 });
    const queue = queueName('full');
    const worker = new EvoraWorker({ address, queues: [queue], slots: 4 });
    const accepted = new Map<string, number>();
    let gateOpen!: () => void;
    const gate = new Promise<void>((resolve) => (gateOpen = resolve));
    worker.handle('t', async () => {
      await gate;
      return { ok: true };
    });
    worker.on('jobFinished', ({ job, accepted: yes }) => {
      if (yes) accepted.set(job.id, (accepted.get(job.id) ?? 0) + 1);
    });
    teardownAdd(async () => {
      await worker.stop({ timeoutMs: 0, graceMs: 0 });
      client.close();
    });
    await worker.start();
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push((await client.submit({ queue, type: 't', payload: { i }, idempotencyKey: `k${i}` })).job.id);

    const admin = await adminConnect();
    const squat = squatters(pgc.url);
    try {
      await waitFor(() => squat.refusals() > 0, { what: 'every slot taken' });
      const from = srv.output().length;
      // The LISTEN connection cut: its slot goes to the squatters, and it reconnects each second, refused.
      await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'evora-listener'`);
      // Calls at once, more than the connections the pool holds: those that need a new one are refused.
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) => client.get(ids[i % ids.length]!).then(() => null, (e: unknown) => e as grpc.ServiceError)),
      );
      const failures = answers.filter((e) => e !== null);
      expect(failures.length).toBeGreaterThan(0);
      for (const e of failures) {
        expect(e.code, e.details).toBe(grpc.status.UNAVAILABLE);
        expect(e.details).toBe(`database out of connections: ${TOO_MANY}`);
      }
      gateOpen(); // the handlers finish meanwhile: their completions meet the refusals
      // The LISTEN connection's reconnects refused, one a second, the connections held
      // answering in between (the dispatcher's polls, the completions).
      const afterBurst = srv.output().length;
      await waitFor(() => logLines(srv.output().slice(afterBurst)).filter((l) => l.reason === TOO_MANY).length >= 3, {
        timeoutMs: 30_000,
        what: 'refused reconnects',
      });
      expect(srv.child.exitCode).toBeNull();
      const warns = warnsSince(srv, from);
      // The listener's own cut may be an outage of its own (one line); the refusals one more.
      expect(warns.filter((l) => l.msg !== 'database unavailable: terminating connection due to administrator command').map((l) => l.msg)).toEqual([
        `database out of connections: ${TOO_MANY}`,
      ]);
      expect(logLines(srv.output().slice(from)).filter((l) => /^database available again/.test(l.msg)).length).toBeLessThanOrEqual(1);
    } finally {
      await squat.release();
      await admin.end().catch(() => undefined);
    }

    // Everything works again without a restart: the listener reconnects, every job completes once.
    await waitFor(async () => (await pgc.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = 'evora-listener'`)).length === 1, {
      timeoutMs: 30_000,
      what: 'the listener to reconnect',
    });
    await waitFor(async () => (await Promise.all(ids.map((id) => client.get(id).catch(() => null)))).every((j) => j?.state === 'COMPLETED'), {
      timeoutMs: 30_000,
      what: 'every job to complete',
    });
    for (const id of ids) {
      expect(accepted.get(id), id).toBe(1);
      expect((await client.attempts(id)).map((a) => a.outcome)).toEqual(['COMPLETED']);
    }
    expect(await srv.stop(), srv.output().slice(-2000)).toBe(0);
    const errors = logLines(srv.output()).filter((l) => l.level >= 50);
    expect(errors, JSON.stringify(errors.slice(0, 3))).toEqual([]);
  });
});

describe('PostgreSQL out of memory for one statement', () => {
  it('a real 53200 (the shared lock table full) is a refusal: UNAVAILABLE with one line, no outage; the next statements answer', async () => {
    const lines: { level: number; msg: string }[] = [];
    const availability = new DatabaseAvailability(pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as (typeof lines)[number]) }));
    availability.success();
    const client = new pg.Client({ connectionString: pgc.url, application_name: 'evora-test-locks' });
    await client.connect();
    try {
      // One statement taking advisory locks until the shared lock table is full.
      const err = await client.query('SELECT count(pg_advisory_xact_lock(g)) FROM generate_series(1, 10000000) g').then(
        () => null,
        (e: unknown) => e as Error & { code?: string },
      );
      expect(err?.code, String(err)).toBe('53200');
      const answered = availability.failure(err);
      expect(isUnavailable(answered)).toBe(true);
      expect(answered!.message).toBe(`database out of memory: ${err!.message}`);
      // Its locks went with it: the same connection and a new one answer; no outage began or ended.
      expect((await client.query('SELECT 1 AS ok')).rows).toEqual([{ ok: 1 }]);
      expect(await pgc.query('SELECT 1 AS ok')).toEqual([{ ok: 1 }]);
      availability.success();
      expect(availability.state).toBe('available');
      expect(lines.map((l) => [l.level, l.msg])).toEqual([[40, answered!.message]]);
    } finally {
      await client.end();
    }
  });
});

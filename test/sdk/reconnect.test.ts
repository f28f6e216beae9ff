import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configLoad } from '../../src/server/config.js';
import { freePort } from '../../src/server/embedded-postgres.js';
import { silentLogger } from '../../src/logger.js';
import { serverStart, type EvoraServer } from '../../src/server/server.js';
import { EvoraClient, EvoraWorker, type WorkerSessionInfo } from '../../src/sdk/index.js';
import { testDatabaseCreate, type TestDatabase } from '../helpers/db.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The worker outlives its server: servers here are started by hand on a fixed port over one
 * database, stopped while handlers run, and replaced by a new process on the same port.
 */

let db: TestDatabase;
const servers: EvoraServer[] = [];
beforeAll(async () => {
  db = await testDatabaseCreate();
});
afterAll(async () => {
  for (const s of servers) await s.stop();
  await db.drop();
});

async function startServer(port: number): Promise<EvoraServer> {
  const config = configLoad(
    {
      host: '127.0.0.1',
      port: String(port),
      httpPort: '0',
      databaseUrl: db.url,
      pollIntervalMs: '200',
      sweepIntervalMs: '100',
      electionIntervalMs: '200',
      // Do not wait long for held jobs on shutdown: the point is to cut streams while handlers run.
      shutdownTimeoutMs: '200',
    },
    {},
  );
  const server = await serverStart(config, silentLogger());
  servers.push(server);
  return server;
}

describe('EvoraWorker across a server restart', () => {
  it('keeps running its jobs, reports them after reconnecting with its leases, and takes the rest: all COMPLETED exactly once', async () => {
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    const first = await startServer(port);
    const client = new EvoraClient({ address });
    const queue = queueName();
    const total = 12;
    const submitted = await client.submitMany(Array.from({ length: total }, (_, i) => ({ queue, type: 'work', payload: { i } })));

    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const runs = new Map<string, number>();
    let running = 0;
    const w = new EvoraWorker({ address, queues: [queue], slots: 4, workerId: 'survivor', reconnect: { initialDelayMs: 50, maxDelayMs: 500 } });
    w.handle<{ i: number }>('work', async (job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      running++;
      await released;
      running--;
      return { i: job.payload.i };
    });
    const sessions: WorkerSessionInfo[] = [];
    const drains: string[] = [];
    w.on('ready', (s) => sessions.push(s));
    w.on('drain', (d) => drains.push(d.reason));
    // Slots stay honest across the reconnect: held jobs (running or awaiting their ack) never exceed 4.
    let maxHeld = 0;
    w.on('jobStarted', () => (maxHeld = Math.max(maxHeld, w.stats().held)));
    try {
      await w.start();
      await waitFor(() => running === 4, { what: 'four handlers running' });

      // The server goes away mid-run: it asks the worker to drain, then ends the stream.
      await first.stop();
      expect(drains).toHaveLength(1);
      // Handlers finish while no server is there: their completions wait in the worker.
      release();
      await waitFor(() => w.stats().awaitingAck === 4 && running === 0, { what: 'four reports queued' });
      expect(w.stats()).toMatchObject({ connected: false, held: 4 });

      await startServer(port);
      await waitFor(async () => (await client.list({ queue, states: 'COMPLETED', pageSize: 100 })).jobs.length === total, {
        what: 'every job COMPLETED',
        timeoutMs: 20_000,
      });
    } finally {
      await w.stop({ timeoutMs: 5_000 });
      client.close();
    }

    // The reconnect carried the four leases over (hello.held), and every job ran exactly once.
    expect(sessions[0]).toMatchObject({ reconnect: false, held: 0 });
    expect(sessions.at(-1)).toMatchObject({ reconnect: true, held: 4 });
    expect(w.stats().reconnects).toBeGreaterThanOrEqual(1);
    expect(maxHeld).toBe(4);
    expect(runs.size).toBe(total);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    const check = new EvoraClient({ address });
    try {
      for (const { job } of submitted) {
        const done = await check.get(job.id);
        expect(done).toMatchObject({ state: 'COMPLETED', attempt: 1, workerId: 'survivor', lastError: null, result: { i: job.payload.i } });
      }
    } finally {
      check.close();
    }
  });

  it('start() keeps trying until a server answers', async () => {
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    const w = new EvoraWorker({ address, queues: [queueName()], slots: 1, reconnect: { initialDelayMs: 50, maxDelayMs: 200 } });
    w.handle('x', () => undefined);
    let failures = 0;
    w.on('disconnected', () => failures++);
    try {
      let started = false;
      const starting = w.start().then(() => (started = true));
      await waitFor(() => failures >= 2, { what: 'connection attempts to fail' });
      expect(started).toBe(false);
      await startServer(port);
      await starting;
      expect(w.stats().connected).toBe(true);
    } finally {
      await w.stop({ timeoutMs: 1_000 });
    }
  });
});

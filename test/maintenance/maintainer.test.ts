import { randomBytes } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { Store } from '../../src/store/store.js';
import { Maintainer } from '../../src/maintenance/maintainer.js';
import { Sweeper } from '../../src/maintenance/sweeper.js';
import { Projector } from '../../src/maintenance/projector.js';
import { PostgresTelemetrySink } from '../../src/telemetry/pg-sink.js';
import { silentLogger } from '../../src/logger.js';
import { jobInput, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';

let store: Store;
let url: string;
/** A connection of the test's own, for faults and for looking at the locks. */
let admin: pg.Client;
const started: { stop(): Promise<void> }[] = [];

beforeAll(async () => {
  ({ store, url } = await storeSetup());
  admin = new pg.Client({ connectionString: url });
  await admin.connect();
});
afterAll(async () => {
  await admin?.end();
});
afterEach(async () => {
  for (const s of started.splice(0)) await s.stop();
});

/**
 * Two server processes' maintenance on one database: each a maintainer with its own elector
 * connection, running a real sweeper and projector when it leads. Each test has an election
 * of its own, so tests do not see each other's leaders.
 */
function setup(opts: { electionIntervalMs?: number } = {}) {
  const election = `test-${randomBytes(4).toString('hex')}`;
  const make = (name: string) => {
    const swept = { jobs: 0 };
    const maintainer = new Maintainer({
      connectionString: url,
      electionName: election,
      electionIntervalMs: opts.electionIntervalMs ?? 20,
      logger: silentLogger(),
      services: {
        sweeper: new Sweeper({ store, logger: silentLogger(), intervalMs: 20, startJitterMaxMs: 0, onSwept: (b) => (swept.jobs += b.jobs.length) }),
        projector: new Projector({ store, sink: new PostgresTelemetrySink(store), logger: silentLogger(), intervalMs: 20, startJitterMaxMs: 0 }),
      },
    });
    started.push(maintainer);
    return { name, maintainer, swept };
  };
  const processes = [make('a'), make('b')];
  /** The one that leads and the one that does not (throws unless exactly one leads). */
  const roles = () => {
    const leading = processes.filter((p) => p.maintainer.isLeader);
    if (leading.length !== 1) throw new Error(`${leading.length} leaders`);
    return { leader: leading[0]!, follower: processes.find((p) => !p.maintainer.isLeader)! };
  };
  return { election, processes, roles };
}

type Process = ReturnType<typeof setup>['processes'][number];
const serviceStates = (p: Process) => Object.values(p.maintainer.services).map((s) => s.state);
const allRunning = (p: Process) => serviceStates(p).every((s) => s === 'running');
const allStopped = (p: Process) => serviceStates(p).every((s) => s === 'stopped');

/** A job whose lease has expired, as a worker that died leaves it. */
async function expiredJob(): Promise<string> {
  const queue = queueName();
  await store.queueUpsert({ name: queue, leaseSeconds: 1, backoffBaseSeconds: 0, backoffJitter: 0 });
  const past = new Date(Date.now() - 5_000);
  const { job } = await store.jobSubmit({ job: jobInput({ queue }), now: past });
  expect(await store.jobClaim({ queues: [queue], limit: 1, workerId: 'died', now: past })).toHaveLength(1);
  return job.id;
}

const requeued = async (id: string) => (await store.jobGet({ id })).state === 'PENDING';

describe('maintainer: leader-only services follow leadership', () => {
  it('only the leader runs the sweeper and the projector; when it stops, the other is elected and starts them', async () => {
    const { processes, roles } = setup();
    for (const p of processes) p.maintainer.start();
    processes[0]!.maintainer.start(); // safe twice
    const { leader, follower } = await waitFor(() => roles(), { what: 'one leader' });
    await waitFor(() => allRunning(leader), { what: "the leader's services to run" });
    expect(allStopped(follower)).toBe(true);

    // The leader's sweeper requeues an expired lease; its projector empties the outbox.
    const first = await expiredJob();
    await waitFor(() => requeued(first), { what: "the leader's sweep" });
    await waitFor(async () => (await store.outboxLag()).events === 0, { what: "the leader's projection" });
    expect(leader.swept.jobs).toBeGreaterThanOrEqual(1);
    expect(follower.swept.jobs).toBe(0);
    expect(roles().leader).toBe(leader);

    await leader.maintainer.stop();
    await leader.maintainer.stop(); // safe twice
    expect(leader.maintainer.state).toBe('stopped');
    expect(leader.maintainer.isLeader).toBe(false);
    expect(allStopped(leader)).toBe(true);

    await waitFor(() => follower.maintainer.isLeader && allRunning(follower), { what: 'the other to take over' });
    const second = await expiredJob();
    await waitFor(() => requeued(second), { what: "the new leader's sweep" });
    expect(follower.swept.jobs).toBeGreaterThanOrEqual(1);
  });

  it("a leader whose lock connection is killed stops its services at once; once the lock is free, a leader starts them", async () => {
    // Elections a minute apart: the first attempts (at start) elect a leader, and no later
    // one comes during the test, so only the lost connection itself can stop the services.
    const { election, processes, roles } = setup({ electionIntervalMs: 60_000 });
    for (const p of processes) p.maintainer.start();
    const { leader, follower } = await waitFor(() => roles(), { what: 'one leader' });
    await waitFor(() => allRunning(leader), { what: "the leader's services to run" });

    // The leader's lock and the backend holding it.
    const { rows } = await admin.query<{ pid: number; classid: number }>(
      `SELECT pid, classid::int AS classid FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND objid = hashtext($1)::oid
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      [election],
    );
    expect(rows).toHaveLength(1);
    const { pid, classid } = rows[0]!;
    // A third session queues for the same lock first, so that when the leader's backend
    // dies the lock passes to it, not to either maintainer: nobody may lead until it lets go.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      const holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const held = holder.query('SELECT pg_advisory_lock($1, hashtext($2))', [classid, election]);
      await waitFor(
        async () => (await admin.query(`SELECT 1 FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND NOT granted`, [holderPid])).rowCount === 1,
        { what: 'the third session to wait for the lock' },
      );
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      await held;

      await waitFor(() => !leader.maintainer.isLeader && allStopped(leader), { what: 'the old leader to stop its services' });
      expect(follower.maintainer.isLeader).toBe(false);
      expect(allStopped(follower)).toBe(true);
      expect(leader.maintainer.state).toBe('running'); // still campaigning
    } finally {
      await holder.end(); // releases the lock
    }
    // The next attempt (here called, not waited for) takes the free lock.
    const { leader: next } = await waitFor(
      async () => {
        for (const p of processes) await p.maintainer.elector.runOnce();
        return roles();
      },
      { what: 'a leader once the lock is free' },
    );
    await waitFor(() => allRunning(next), { what: "the new leader's services to run" });
    const job = await expiredJob();
    await waitFor(() => requeued(job), { what: "the new leader's sweep" });
  });

  it('a stop while the database does not answer ends the election attempt in progress', async () => {
    // A "database" that accepts connections, reads what it is sent, and never answers.
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket.resume()));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    try {
      const maintainer = new Maintainer({
        connectionString: `postgres://evora@127.0.0.1:${port}/evora`,
        electionName: 'silent',
        services: {},
        logger: silentLogger(),
      });
      maintainer.start();
      await waitFor(() => sockets.length > 0, { what: 'the elector to connect' });
      await maintainer.stop(); // does not wait for the connection to time out
      expect(maintainer.isLeader).toBe(false);
      await waitFor(() => sockets.every((s) => s.closed), { what: 'the connection to be closed' });
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('once shutdown has begun, a follower no longer tries to become the leader', async () => {
    const { processes, roles } = setup();
    const shutdown = new AbortController();
    for (const p of processes) p.maintainer.start(shutdown.signal);
    const { leader, follower } = await waitFor(() => roles(), { what: 'one leader' });
    shutdown.abort();
    // The leader keeps leading (and its services running) until it is stopped.
    expect(await leader.maintainer.elector.runOnce()).toBe(true);
    await leader.maintainer.stop();
    // The lock is free, yet the follower does not take it.
    expect(await follower.maintainer.elector.runOnce()).toBe(false);
    expect(follower.maintainer.isLeader).toBe(false);
    expect(allStopped(follower)).toBe(true);
  });
});

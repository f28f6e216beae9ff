import type pg from 'pg';
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logger.js';
import { Pruner } from '../../src/maintenance/pruner.js';
import type { Store } from '../../src/store/store.js';
import type { WorkerSessionWrite } from '../../src/store/worker-sessions.js';
import { queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';

/**
 * The worker-session table (0014_worker_sessions.sql) through the store: a server's sync
 * makes its rows exactly its sessions and leaves other servers' alone; reads skip a row not
 * seen for 30 s (a server that died), and the leader's pruner deletes it. Time is passed in
 * (`now`), never waited for.
 */

let store: Store;
let sql: pg.Pool;
beforeAll(async () => {
  ({ store, sql } = await storeSetup());
});

const T0 = new Date('2032-05-01T00:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

function session(workerId: string, queues: string[], over: Partial<WorkerSessionWrite> = {}): WorkerSessionWrite {
  return { sessionId: randomUUID(), workerId, queues, jobTypes: [], slots: 4, heldJobs: 1, freeSlots: 3, connectedAt: at(-60), ...over };
}

describe('worker sessions', () => {
  it("a sync upserts a server's sessions and deletes its others; another server's rows stay", async () => {
    const q = queueName('ws');
    const serverA = randomUUID();
    const serverB = randomUUID();
    const a1 = session('a1', [q], { jobTypes: ['email.send', 'sms'] });
    const a2 = session('a2', [q, `${q}-x`]);
    const b1 = session('b1', [q]);
    await store.workerSessionSync({ serverId: serverA, serverAddress: '10.0.0.1:50051', sessions: [a1, a2], now: at(0) });
    await store.workerSessionSync({ serverId: serverB, serverAddress: '10.0.0.2:50051', sessions: [b1], now: at(0) });
    const listed = await store.workerSessionList({ queues: [q], now: at(1) });
    expect(listed.map((w) => [w.workerId, w.serverId, w.serverAddress, w.queues, w.jobTypes, w.slots, w.heldJobs, w.freeSlots])).toEqual([
      ['a1', serverA, '10.0.0.1:50051', [q], ['email.send', 'sms'], 4, 1, 3],
      ['a2', serverA, '10.0.0.1:50051', [q, `${q}-x`], [], 4, 1, 3],
      ['b1', serverB, '10.0.0.2:50051', [q], [], 4, 1, 3],
    ]);
    expect(listed[0]).toMatchObject({ sessionId: a1.sessionId, connectedAt: at(-60), lastSeenAt: at(0) });
    expect((await store.workerSessionList({ queues: [`${q}-x`], now: at(1) })).map((w) => w.workerId)).toEqual(['a2']);

    // A's next sync: a2 closed, a1 holds more; connected_at stays, last_seen_at moves.
    await store.workerSessionSync({ serverId: serverA, serverAddress: '10.0.0.1:50051', sessions: [{ ...a1, heldJobs: 4, freeSlots: 0, connectedAt: at(5) }], now: at(5) });
    const after = await store.workerSessionList({ queues: [q], now: at(6) });
    expect(after.map((w) => [w.workerId, w.heldJobs, w.freeSlots])).toEqual([
      ['a1', 4, 0],
      ['b1', 1, 3],
    ]);
    expect(after[0]).toMatchObject({ connectedAt: at(-60), lastSeenAt: at(5) });

    // A closed session's row goes at once.
    await store.workerSessionDelete({ sessionIds: [b1.sessionId] });
    expect((await store.workerSessionList({ queues: [q], now: at(6) })).map((w) => w.workerId)).toEqual(['a1']);
  });

  it("a killed server's sessions: ignored once 30 s stale, then deleted by the pruner; a live server's stay", async () => {
    const q = queueName('stale');
    const dead = randomUUID();
    const live = randomUUID();
    await store.workerSessionSync({ serverId: dead, serverAddress: 'dead:1', sessions: [session('d1', [q])], now: at(100) });
    await store.workerSessionSync({ serverId: live, serverAddress: 'live:1', sessions: [session('l1', [q])], now: at(100) });
    // The live server keeps syncing; the dead one does not.
    await store.workerSessionSync({ serverId: live, serverAddress: 'live:1', sessions: (await store.workerSessionList({ queues: [q], now: at(100) }))
      .filter((w) => w.serverId === live)
      .map((w) => ({ ...w })), now: at(125) });
    expect((await store.workerSessionList({ queues: [q], now: at(129) })).map((w) => w.workerId)).toEqual(['d1', 'l1']);
    expect((await store.workerSessionList({ queues: [q], now: at(131) })).map((w) => w.workerId)).toEqual(['l1']);
    expect((await sql.query('SELECT 1 FROM evora.worker_sessions WHERE server_id = $1', [dead])).rowCount).toBe(1);

    const pruner = new Pruner({ store, logger: silentLogger() });
    const summary = await pruner.runOnce(new AbortController().signal, { now: at(131) });
    expect(summary.staleSessions).toBeGreaterThanOrEqual(1);
    expect((await sql.query('SELECT 1 FROM evora.worker_sessions WHERE server_id = $1', [dead])).rowCount).toBe(0);
    expect((await sql.query('SELECT 1 FROM evora.worker_sessions WHERE server_id = $1', [live])).rowCount).toBe(1);
    await pruner.stop();
  });

  it('a sync of no sessions deletes all of the server\'s rows (a graceful stop)', async () => {
    const q = queueName('stop');
    const server = randomUUID();
    await store.workerSessionSync({ serverId: server, serverAddress: 's:1', sessions: [session('x', [q]), session('y', [q])], now: at(200) });
    expect(await store.workerSessionList({ queues: [q], now: at(200) })).toHaveLength(2);
    await store.workerSessionSync({ serverId: server, serverAddress: 's:1', sessions: [], now: at(201) });
    expect(await store.workerSessionList({ queues: [q], now: at(201) })).toHaveLength(0);
  });
});

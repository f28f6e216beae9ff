import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { Elector } from '../../src/maintenance/elector.js';
import { Sweeper } from '../../src/maintenance/sweeper.js';
import { silentLogger } from '../../src/logger.js';
import { jobInput, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';

let store: Store;
let url: string;
const started: { stop(): Promise<void> }[] = [];

beforeAll(async () => {
  ({ store, url } = await storeSetup());
});
afterEach(async () => {
  for (const s of started.splice(0)) await s.stop();
});

/** One server process's maintenance: an elector and the sweeper it gates. */
function maintenance(opts: { intervalMs?: number } = {}) {
  const logger = silentLogger();
  const elector = new Elector({ connectionString: url, name: `test-${process.pid}`, intervalMs: opts.intervalMs ?? 60_000, logger });
  const sweeper = new Sweeper({ store, isLeader: () => elector.isLeader, logger, intervalMs: opts.intervalMs ?? 60_000 });
  started.push(sweeper, elector);
  return { elector, sweeper };
}

const T0 = new Date('2031-01-01T00:00:00Z');
const at = (s: number) => new Date(T0.getTime() + s * 1000);

describe('visibility sweeper', () => {
  it('expired lease -> PENDING with the attempt counted; at max attempts -> DLQ; retry -> PENDING -> completes', async () => {
    const { elector, sweeper } = maintenance();
    expect(await elector.runOnce()).toBe(true);
    const queue = queueName();
    await store.queueUpsert({ name: queue, maxAttempts: 2, leaseSeconds: 10, backoffKind: 'fixed', backoffBaseSeconds: 5, backoffJitter: 0 });
    const { job } = await store.jobSubmit({ job: jobInput({ queue }), now: T0 });

    await store.jobClaim({ queues: [queue], limit: 1, workerId: 'dies', now: T0 });
    expect(await sweeper.runOnce({ now: at(9) })).toMatchObject({ ran: true, requeued: 0 });
    expect(await sweeper.runOnce({ now: at(11) })).toMatchObject({ ran: true, requeued: 1 });
    const requeued = await store.jobGet({ id: job.id });
    expect(requeued).toMatchObject({ state: 'PENDING', attempt: 1, lastError: 'lease expired (worker dies)' });
    expect(requeued.runAt).toEqual(at(16));

    await store.jobClaim({ queues: [queue], limit: 1, workerId: 'dies-again', now: at(16) });
    expect(await sweeper.runOnce({ now: at(27) })).toMatchObject({ deadLettered: 1 });
    expect(await store.jobGet({ id: job.id })).toMatchObject({ state: 'DLQ', attempt: 2 });

    await store.jobRetry({ id: job.id, now: at(30) });
    const [again] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'lives', now: at(30) });
    expect(again?.attempt).toBe(1);
    const [done] = await store.jobCompleteMany({ completions: [{ id: job.id, token: again!.leaseToken!, result: { ok: true } }] });
    expect(done).toMatchObject({ accepted: true, job: { state: 'COMPLETED' } });
  });

  it('sweeps in batches until no expired lease is left', async () => {
    const { elector } = maintenance();
    await elector.runOnce();
    const sweeper = new Sweeper({ store, isLeader: () => elector.isLeader, logger: silentLogger(), batchSize: 7 });
    const queue = queueName();
    await store.jobSubmitMany({ jobs: Array.from({ length: 30 }, () => jobInput({ queue })), now: T0 });
    await store.jobClaim({ queues: [queue], limit: 30, workerId: 'w', now: T0 });
    expect(await sweeper.runOnce({ now: at(31) })).toMatchObject({ requeued: 30 });
  });

  it('two sweepers started at once: one leads; when it stops, the other takes over', async () => {
    const a = maintenance({ intervalMs: 20 });
    const b = maintenance({ intervalMs: 20 });
    a.elector.start();
    b.elector.start();
    a.elector.start(); // safe twice
    await waitFor(() => a.elector.isLeader || b.elector.isLeader, { what: 'a leader' });
    // Both keep trying every 20 ms; the lock keeps it at one leader.
    for (let i = 0; i < 5; i++) {
      await Promise.all([a.elector.runOnce(), b.elector.runOnce()]);
      expect(Number(a.elector.isLeader) + Number(b.elector.isLeader)).toBe(1);
    }
    const [leader, follower] = a.elector.isLeader ? [a, b] : [b, a];
    expect((await follower.sweeper.runOnce()).ran).toBe(false);
    expect((await leader.sweeper.runOnce()).ran).toBe(true);

    await leader.elector.stop();
    await leader.elector.stop(); // safe twice
    expect(leader.elector.isLeader).toBe(false);
    await waitFor(() => follower.elector.isLeader, { what: 'the follower to take over' });
    expect((await follower.sweeper.runOnce()).ran).toBe(true);
  });

  it('a started sweeper sweeps by itself on its interval', async () => {
    const { elector, sweeper } = maintenance({ intervalMs: 20 });
    await elector.runOnce();
    const queue = queueName();
    await store.queueUpsert({ name: queue, leaseSeconds: 1, backoffBaseSeconds: 0, backoffJitter: 0 });
    const { job } = await store.jobSubmit({ job: jobInput({ queue }) });
    await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: new Date(Date.now() - 5_000) });
    sweeper.start();
    await waitFor(async () => (await store.jobGet({ id: job.id })).state === 'PENDING', { what: 'the sweep' });
  });
});

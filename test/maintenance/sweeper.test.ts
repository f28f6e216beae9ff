import type pg from 'pg';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { Sweeper } from '../../src/maintenance/sweeper.js';
import { silentLogger } from '../../src/logger.js';
import { jobInput, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';

let store: Store;
let sql: pg.Pool;
const started: Sweeper[] = [];

beforeAll(async () => {
  ({ store, sql } = await storeSetup());
});
afterEach(async () => {
  for (const s of started.splice(0)) await s.stop();
});

/** A sweeper on this file's store (leadership is the maintainer's business: see maintainer.test.ts). */
function setup(opts: { intervalMs?: number; batchSize?: number } = {}) {
  const sweeper = new Sweeper({ store, logger: silentLogger(), intervalMs: opts.intervalMs ?? 60_000, startJitterMaxMs: 0, batchSize: opts.batchSize });
  started.push(sweeper);
  return { sweeper, signal: new AbortController().signal };
}

const T0 = new Date('2031-01-01T00:00:00Z');
const at = (s: number) => new Date(T0.getTime() + s * 1000);

describe('visibility sweeper', () => {
  it('expired lease -> PENDING with the attempt counted; at max attempts -> DLQ; retry -> PENDING -> completes', async () => {
    const { sweeper, signal } = setup();
    const queue = queueName();
    await store.queueUpsert({ name: queue, maxAttempts: 2, leaseSeconds: 10, backoffKind: 'fixed', backoffBaseSeconds: 5, backoffJitter: 0 });
    const { job } = await store.jobSubmit({ job: jobInput({ queue }), now: T0 });

    await store.jobClaim({ queues: [queue], limit: 1, workerId: 'dies', now: T0 });
    await sweeper.runOnce(signal, { now: T0 }); // the sweeper reaches the database from T0 on
    expect(await sweeper.runOnce(signal, { now: at(9) })).toMatchObject({ requeued: 0 });
    expect(await sweeper.runOnce(signal, { now: at(11) })).toMatchObject({ requeued: 1 });
    const requeued = await store.jobGet({ id: job.id });
    expect(requeued).toMatchObject({ state: 'PENDING', attempt: 1, lastError: 'lease expired (worker dies)' });
    expect(requeued.runAt).toEqual(at(16));

    await store.jobClaim({ queues: [queue], limit: 1, workerId: 'dies-again', now: at(16) });
    expect(await sweeper.runOnce(signal, { now: at(27) })).toMatchObject({ deadLettered: 1 });
    expect(await store.jobGet({ id: job.id })).toMatchObject({ state: 'DLQ', attempt: 2 });

    await store.jobRetry({ id: job.id, now: at(30) });
    const [again] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'lives', now: at(30) });
    expect(again?.attempt).toBe(1);
    const [done] = await store.jobCompleteMany({ completions: [{ id: job.id, token: again!.leaseToken!, result: { ok: true } }] });
    expect(done).toMatchObject({ accepted: true, job: { state: 'COMPLETED' } });
  });

  it('sweeps in batches until no expired lease is left', async () => {
    const { sweeper, signal } = setup({ batchSize: 7 });
    const queue = queueName();
    await store.jobSubmitMany({ jobs: Array.from({ length: 30 }, () => jobInput({ queue })), now: T0 });
    await store.jobClaim({ queues: [queue], limit: 30, workerId: 'w', now: T0 });
    await sweeper.runOnce(signal, { now: T0 });
    expect(await sweeper.runOnce(signal, { now: at(31) })).toMatchObject({ requeued: 30 });
  });

  it('an aborted signal ends the sweep before its next batch', async () => {
    const { sweeper } = setup({ batchSize: 7 });
    const queue = queueName();
    await store.jobSubmitMany({ jobs: Array.from({ length: 10 }, () => jobInput({ queue })), now: T0 });
    await store.jobClaim({ queues: [queue], limit: 10, workerId: 'w', now: T0 });
    await sweeper.runOnce(new AbortController().signal, { now: T0 });
    const stopped = new AbortController();
    stopped.abort();
    expect(await sweeper.runOnce(stopped.signal, { now: at(31) })).toEqual({ requeued: 0, deadLettered: 0, cancelled: 0 });
    expect(await sweeper.runOnce(new AbortController().signal, { now: at(31) })).toMatchObject({ requeued: 10 });
  });

  it("gives each expired lease its queue's lease length of reachable database before sweeping it, again after a new start", async () => {
    const { sweeper, signal } = setup();
    const short = queueName('short');
    const long = queueName('long');
    await store.queueUpsert({ name: short, leaseSeconds: 1 });
    await store.queueUpsert({ name: long, leaseSeconds: 10 });
    const past = new Date(Date.now() - 60_000); // both leases expired long ago
    const ids: string[] = [];
    for (const queue of [short, long]) {
      ids.push((await store.jobSubmit({ job: jobInput({ queue }), now: past })).job.id);
      await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: past });
    }
    const states = async () => Promise.all(ids.map(async (id) => (await store.jobGet({ id })).state));
    const t = Date.now();
    const later = (ms: number) => ({ now: new Date(t + ms) });
    // The first tick starts the run of reachable ticks: nothing is swept yet.
    expect(await sweeper.runOnce(signal, later(0))).toMatchObject({ requeued: 0 });
    expect(await sweeper.runOnce(signal, later(1_500))).toMatchObject({ requeued: 1 });
    expect(await states()).toEqual(['PENDING', 'RUNNING']);
    expect(await sweeper.runOnce(signal, later(9_000))).toMatchObject({ requeued: 0 });
    expect(await sweeper.runOnce(signal, later(10_500))).toMatchObject({ requeued: 1 });

    // Stopped (leadership lost) and run again: the count starts over.
    await store.jobSubmit({ job: jobInput({ queue: long }), now: past });
    expect(await store.jobClaim({ queues: [long], limit: 1, workerId: 'w', now: past })).toHaveLength(1);
    await sweeper.stop();
    const t2 = Date.now();
    expect(await sweeper.runOnce(signal, { now: new Date(t2) })).toMatchObject({ requeued: 0 });
    expect(await sweeper.runOnce(signal, { now: new Date(t2 + 9_000) })).toMatchObject({ requeued: 0 });
    expect(await sweeper.runOnce(signal, { now: new Date(t2 + 10_500) })).toMatchObject({ requeued: 1 });
  });

  it('a gap between its readings of the database clock (a stall) starts the count again', async () => {
    const { sweeper, signal } = setup({ intervalMs: 1000 });
    const queue = queueName();
    await store.queueUpsert({ name: queue, leaseSeconds: 2 });
    const past = new Date(Date.now() - 60_000);
    const { job } = await store.jobSubmit({ job: jobInput({ queue }), now: past });
    await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: past });
    const t = Date.now();
    const later = (ms: number) => ({ now: new Date(t + ms) });
    expect(await sweeper.runOnce(signal, later(0))).toMatchObject({ requeued: 0 });
    // 10 s since the last reading, over the interval (1 s) plus 5 s: a new run starts here.
    expect(await sweeper.runOnce(signal, later(10_000))).toMatchObject({ requeued: 0 });
    expect(await sweeper.runOnce(signal, later(11_000))).toMatchObject({ requeued: 0 });
    expect(await sweeper.runOnce(signal, later(12_500))).toMatchObject({ requeued: 1 });
    expect((await store.jobGet({ id: job.id })).state).toBe('PENDING');
  });

  it('a sweep statement that starts long after the reading it was given (it waited through a break) sweeps nothing', async () => {
    const queue = queueName();
    await store.queueUpsert({ name: queue, leaseSeconds: 1 });
    await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
    await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: T0 });
    const reachable = (tickAt: Date) => ({ since: T0, tickAt, maxGapSeconds: 6 });
    const swept = async (tickAt: Date) =>
      (await store.jobSweepExpired({ limit: 100, now: at(30), reachable: reachable(tickAt) })).jobs.filter((j) => j.queue === queue);
    expect(await swept(at(20))).toHaveLength(0);
    expect(await swept(at(25))).toHaveLength(1);
  });

  it('a started sweeper sweeps by itself on its interval', async () => {
    const { sweeper } = setup({ intervalMs: 20 });
    const queue = queueName();
    await store.queueUpsert({ name: queue, leaseSeconds: 1, backoffBaseSeconds: 0, backoffJitter: 0 });
    const past = new Date(Date.now() - 5_000);
    const { job } = await store.jobSubmit({ job: jobInput({ queue }), now: past });
    expect(await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: past })).toHaveLength(1);
    sweeper.start();
    await waitFor(async () => (await store.jobGet({ id: job.id })).state === 'PENDING', { what: 'the sweep' });
    expect(sweeper.state).toBe('running');
  });
});

describe('dependencies repair pass', () => {
  it('releases a WAITING job whose parents have all completed', async () => {
    const { sweeper, signal } = setup();
    const queue = queueName();
    const parent = (await store.jobSubmit({ job: jobInput({ queue }), now: T0 })).job;
    const [run] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: T0 });
    await store.jobCompleteMany({ completions: [{ id: run!.id, token: run!.leaseToken!, result: {} }], now: at(1) });
    const child = (await store.jobSubmit({ job: jobInput({ queue, dependsOn: [parent.id] }), now: at(2) })).job;
    expect(child.state).toBe('PENDING');
    // Made stuck by hand (cancelled, then WAITING by raw SQL): nothing but the repair pass moves it.
    await store.jobCancel({ id: child.id, now: at(3) });
    await sql.query(`UPDATE evora.jobs SET state = 'WAITING', finished_at = NULL WHERE id = $1`, [child.id]);
    await sweeper.runOnce(signal, { now: at(4) });
    expect((await store.jobGet({ id: child.id })).state).toBe('PENDING');
  });
});

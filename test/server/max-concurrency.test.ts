import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Queue.max_concurrency is a global limit: RUNNING jobs of the queue, counted in PostgreSQL,
 * never exceed it, whichever server claims (stream pushes, ClaimJobs, a submit's hand-off).
 * Two servers on one database, each with two SDK workers of many slots listening to both
 * limited queues. The fallback poll is set to a minute, so the jobs can only all finish in
 * time if a freed slot is refilled because the finishing job's statement woke the claimers.
 */
let a: { clients: Clients; address: string };
let b: { clients: Clients; address: string };
let databaseUrl: string;
let sql: pg.Client;

beforeAll(async () => {
  const first = await serverSetup({ pollIntervalMs: '60000' });
  databaseUrl = first.databaseUrl;
  a = first;
  b = await serverSetup({ databaseUrl, pollIntervalMs: '60000' });
  sql = new pg.Client({ connectionString: databaseUrl });
  await sql.connect();
});
afterAll(async () => {
  await sql.end();
});

describe('max_concurrency across two servers', () => {
  it('RUNNING never exceeds the limit (sampled throughout) while every job of a limit-2 and a limit-1 queue completes', async () => {
    const q2 = queueName('limit2');
    const q1 = queueName('limit1');
    const limits = new Map([
      [q2, 2],
      [q1, 1],
    ]);
    const perQueue = 60;
    const client = new EvoraClient({ address: a.address });
    const clientB = new EvoraClient({ address: b.address });
    await client.upsertQueue(q2, { maxConcurrency: 2 });
    await client.upsertQueue(q1, { maxConcurrency: 1 });

    // Concurrency as the handlers see it, per queue.
    const inHandler = new Map([...limits.keys()].map((q) => [q, 0]));
    const maxInHandler = new Map([...limits.keys()].map((q) => [q, 0]));
    const workers: EvoraWorker[] = [];
    for (const [address, name] of [
      [a.address, 'a1'],
      [a.address, 'a2'],
      [b.address, 'b1'],
      [b.address, 'b2'],
    ] as const) {
      const w = new EvoraWorker({ address, workerId: name, queues: [q2, q1], slots: 8 });
      w.handle('work', async (job) => {
        const q = job.queue;
        inHandler.set(q, (inHandler.get(q) ?? 0) + 1);
        maxInHandler.set(q, Math.max(maxInHandler.get(q) ?? 0, inHandler.get(q) ?? 0));
        // A little work, so jobs overlap if the server lets them.
        await new Promise((r) => setTimeout(r, 5));
        inHandler.set(q, (inHandler.get(q) ?? 0) - 1);
        return { by: name };
      });
      workers.push(w);
    }

    // Samples RUNNING per queue from PostgreSQL until told to stop.
    const samples: { queue: string; n: number }[] = [];
    let sampling = true;
    let sampleCount = 0;
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await sql.query<{ queue: string; n: number }>(
          `SELECT queue, count(*)::int AS n FROM evora.jobs WHERE state = 'RUNNING' AND queue = ANY($1) GROUP BY queue`,
          [[q2, q1]],
        );
        samples.push(...rows);
        sampleCount++;
      }
    })();

    try {
      // Half the jobs wait before the workers start; the other half arrive while they run
      // (through both servers, so a submit's hand-off would be tried).
      const submit = async (c: EvoraClient, from: number, n: number) => {
        for (const q of limits.keys()) {
          await c.submitMany(Array.from({ length: n }, (_, k) => ({ queue: q, type: 'work', payload: { n: from + k } })));
        }
      };
      await submit(client, 0, perQueue / 2);
      await Promise.all(workers.map((w) => w.start()));
      for (let i = perQueue / 2; i < perQueue; i++) await submit(i % 2 === 0 ? client : clientB, i, 1);

      await waitFor(
        async () => {
          const { rows } = await sql.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM evora.jobs WHERE state = 'COMPLETED' AND queue = ANY($1)`,
            [[q2, q1]],
          );
          return rows[0]!.n === 2 * perQueue;
        },
        { timeoutMs: 60_000, what: 'every job completed' },
      );
    } finally {
      sampling = false;
      await sampler;
      await Promise.all(workers.map((w) => w.stop({ timeoutMs: 5_000 })));
      client.close();
      clientB.close();
    }

    expect(sampleCount).toBeGreaterThan(10);
    for (const [q, limit] of limits) {
      const seen = samples.filter((s) => s.queue === q).map((s) => s.n);
      // The queue did run jobs while it was sampled, and never more than its limit.
      expect(seen.length).toBeGreaterThan(0);
      expect(Math.max(...seen)).toBeLessThanOrEqual(limit);
      expect(maxInHandler.get(q)).toBeLessThanOrEqual(limit);
    }
    // Every job ran once: no retries, no lease lost.
    const { rows } = await sql.query<{ state: string; n: number; max_attempt: number }>(
      `SELECT state, count(*)::int AS n, max(attempt) AS max_attempt FROM evora.jobs WHERE queue = ANY($1) GROUP BY state`,
      [[q2, q1]],
    );
    expect(rows).toEqual([{ state: 'COMPLETED', n: 2 * perQueue, max_attempt: 1 }]);
  });

  it('ClaimJobs takes at most max_concurrency, counting jobs RUNNING through either server', async () => {
    const queue = queueName('unary1');
    await call(a.clients.queues, 'upsertQueue', { name: queue, maxConcurrency: 1 });
    const job = (n: number) => ({ queue, type: 't', payload: { n }, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
    await call(a.clients.jobs, 'submitJobs', { idsOnly: false, jobs: [job(1), job(2), job(3)] });

    const first = await call(a.clients.workers, 'claimJobs', { workerId: 'u1', queues: [queue], max: 3, jobTypes: [] });
    expect(first.jobs).toHaveLength(1);
    // Full: the other server claims nothing, and neither does this one.
    expect((await call(b.clients.workers, 'claimJobs', { workerId: 'u2', queues: [queue], max: 3, jobTypes: [] })).jobs).toHaveLength(0);
    expect((await call(a.clients.workers, 'claimJobs', { workerId: 'u3', queues: [queue], max: 3, jobTypes: [] })).jobs).toHaveLength(0);

    // The job finishes: one more may run.
    const leased = first.jobs[0]!;
    await call(a.clients.workers, 'completeJob', { jobId: leased.job!.id, leaseToken: leased.leaseToken, result: {} });
    const next = await call(b.clients.workers, 'claimJobs', { workerId: 'u2', queues: [queue], max: 3, jobTypes: [] });
    expect(next.jobs).toHaveLength(1);

    // Raising the limit takes effect on the next claim.
    await call(a.clients.queues, 'upsertQueue', { name: queue, maxConcurrency: 2 });
    expect((await call(a.clients.workers, 'claimJobs', { workerId: 'u3', queues: [queue], max: 3, jobTypes: [] })).jobs).toHaveLength(1);
    const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1 AND state = 'RUNNING'`, [queue]);
    expect(rows[0]!.n).toBe(2);
  });

  it('a submit to a limited queue is not handed off past the limit: it waits PENDING', async () => {
    const queue = queueName('handoff1');
    await call(a.clients.queues, 'upsertQueue', { name: queue, maxConcurrency: 1 });
    const held: string[] = [];
    const worker = new EvoraWorker({ address: a.address, workerId: 'holder', queues: [queue], slots: 4 });
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    worker.handle('hold', async (job) => {
      held.push(job.id);
      await released;
      return {};
    });
    const client = new EvoraClient({ address: a.address });
    try {
      await worker.start();
      await client.submit({ queue, type: 'hold', payload: {} });
      await waitFor(() => held.length === 1, { what: 'the first job to run' });
      // The worker has 3 free slots on this very server, but the queue is full.
      const second = await client.submit({ queue, type: 'hold', payload: {} });
      expect(second.job.state).toBe('PENDING');
      const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1 AND state = 'RUNNING'`, [queue]);
      expect(rows[0]!.n).toBe(1);
      release();
      // The first finishing wakes the claim: the second runs (the poll is a minute away).
      await waitFor(() => held.length === 2, { what: 'the second job to run' });
    } finally {
      release();
      await worker.stop({ timeoutMs: 5_000 });
      client.close();
    }
  });
  it('raising or clearing a limit while jobs wait starts them at once on every server (the poll is a minute away)', async () => {
    const queue = queueName('raise');
    const client = new EvoraClient({ address: a.address });
    await client.upsertQueue(queue, { maxConcurrency: 1, rateLimit: { perSecond: 1 / 86_400, burst: 1 } });
    const held: string[] = [];
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const workers = [a.address, b.address].map((address, i) => {
      const w = new EvoraWorker({ address, workerId: `raise${i}`, queues: [queue], slots: 4 });
      w.handle('hold', async (job) => {
        held.push(job.id);
        await released;
        return {};
      });
      return w;
    });
    try {
      for (const w of workers) await w.start();
      for (let i = 0; i < 6; i++) await client.submit({ queue, type: 'hold', payload: { i } });
      await waitFor(() => held.length === 1, { what: 'the first job to run' });
      // Room for three more, but the bucket (one start a day) holds them back.
      await client.upsertQueue(queue, { maxConcurrency: 4 });
      const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1 AND state = 'RUNNING'`, [queue]);
      expect(rows[0]!.n).toBe(1);
      // The rate limit cleared: the waiting jobs start up to max_concurrency, then without it.
      await client.upsertQueue(queue, { rateLimit: { perSecond: 0, burst: 0 } });
      await waitFor(() => held.length === 4, { what: 'three more jobs to start', timeoutMs: 10_000 });
      await client.upsertQueue(queue, { maxConcurrency: 0 });
      await waitFor(() => held.length === 6, { what: 'every job to start', timeoutMs: 10_000 });
    } finally {
      release();
      for (const w of workers) await w.stop({ timeoutMs: 5_000 });
      client.close();
    }
  });
  it('a job completed through a server that never claimed from the limited queue still wakes the claimers of the others', async () => {
    const queue = queueName('elsewhere');
    await call(a.clients.queues, 'upsertQueue', { name: queue, maxConcurrency: 1 });
    const job = (n: number) => ({ queue, type: 'hold', payload: { n }, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
    await call(b.clients.jobs, 'submitJobs', { idsOnly: false, jobs: [job(1)] });
    // A unary worker behind a load balancer: its claim goes to b, its completion to a.
    const [leased] = (await call(b.clients.workers, 'claimJobs', { workerId: 'u1', queues: [queue], max: 1, jobTypes: [] })).jobs;
    const held: string[] = [];
    const worker = new EvoraWorker({ address: b.address, workerId: 'elsewhere', queues: [queue], slots: 4 });
    worker.handle('hold', async (j) => {
      held.push(j.id);
      return {};
    });
    try {
      await worker.start();
      await call(b.clients.jobs, 'submitJobs', { idsOnly: false, jobs: [job(2)] });
      const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1 AND state = 'PENDING'`, [queue]);
      expect(rows[0]!.n).toBe(1);
      await call(a.clients.workers, 'completeJob', { jobId: leased!.job!.id, leaseToken: leased!.leaseToken, result: {} });
      // The poll is a minute away: only a wake-up from a's completion starts the second job.
      await waitFor(() => held.length === 1, { what: 'the waiting job to start', timeoutMs: 10_000 });
    } finally {
      await worker.stop({ timeoutMs: 5_000 });
    }
  });
});

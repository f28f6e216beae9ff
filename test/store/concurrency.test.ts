import { beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { Store } from '../../src/store/store.js';
import { jobInput, jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';

let store: Store;
let sql: pg.Pool;
let url: string;
beforeAll(async () => {
  ({ store, url, sql } = await storeSetup({ maxConnections: 60 }));
});

describe('concurrency', () => {
  it('4 concurrent claimers drain 10,000 jobs: each claimed exactly once and completed', async () => {
    const queue = queueName('drain');
    for (let i = 0; i < 10; i++) await store.jobSubmitMany({ jobs: jobInputs(queue, 1000) });

    const claimedBy = new Map<string, string[]>();
    const claimer = async (workerId: string) => {
      for (;;) {
        const jobs = await store.jobClaim({ queues: [queue], limit: 50, workerId });
        if (jobs.length === 0) return;
        for (const j of jobs) claimedBy.set(j.id, [...(claimedBy.get(j.id) ?? []), workerId]);
        const out = await store.jobCompleteMany({
          completions: jobs.map((j) => ({ id: j.id, token: j.leaseToken!, result: { by: workerId } })),
        });
        expect(out.every((o) => o.accepted)).toBe(true);
      }
    };
    await Promise.all(['w1', 'w2', 'w3', 'w4'].map(claimer));

    expect(claimedBy.size).toBe(10_000);
    expect([...claimedBy.values()].every((ws) => ws.length === 1)).toBe(true);
    // More than one claimer took part: SKIP LOCKED let them work side by side.
    expect(new Set([...claimedBy.values()].map((ws) => ws[0])).size).toBeGreaterThan(1);
    const { rows } = await sql.query<{ state: string; n: number }>(
      'SELECT state, count(*)::int AS n FROM evora.jobs WHERE queue = $1 GROUP BY state',
      [queue],
    );
    expect(rows).toEqual([{ state: 'COMPLETED', n: 10_000 }]);
  });

  it('50 concurrent submits with one idempotency key make one job; exactly one caller is told it created it', async () => {
    const queue = queueName('idem');
    const results = await Promise.all(
      Array.from({ length: 50 }, () =>
        store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'order-42', payload: { order: 42 } }) }),
      ),
    );
    const ids = new Set(results.map((r) => r.job.id));
    expect(ids.size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const { rows } = await sql.query('SELECT id FROM evora.jobs WHERE queue = $1', [queue]);
    expect(rows).toHaveLength(1);

    // The same key with another payload is refused, and changes nothing.
    await expect(
      store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'order-42', payload: { order: 43 } }) }),
    ).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    await expect(
      store.jobSubmit({ job: jobInput({ queue, type: 'other', idempotencyKey: 'order-42', payload: { order: 42 } }) }),
    ).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    const after = await sql.query('SELECT id, payload, type FROM evora.jobs WHERE queue = $1', [queue]);
    expect(after.rows).toEqual([{ id: [...ids][0], payload: { order: 42 }, type: 'noop' }]);
  });

  it('concurrent first submits to a brand-new queue all succeed', async () => {
    const queue = queueName('fresh');
    const results = await Promise.all(Array.from({ length: 20 }, () => store.jobSubmit({ job: jobInput({ queue }) })));
    expect(results.every((r) => r.created && r.job.maxAttempts === 5)).toBe(true);
  });
});

describe('claims with claimAsyncCommit', () => {
  it('run on sessions that do not wait for the WAL flush, and behave like any claim', async () => {
    const asyncStore = new Store({ connectionString: url, claimAsyncCommit: true });
    try {
      const queue = queueName();
      await asyncStore.jobSubmitMany({ jobs: jobInputs(queue, 5) });
      const claimed = await asyncStore.jobClaim({ queues: [queue], limit: 5, workerId: 'async' });
      expect(claimed).toHaveLength(5);
      // The pools (private: reached into here only to read the claims' setting).
      const { claimPool, pool } = asyncStore as unknown as { claimPool: pg.Pool; pool: pg.Pool };
      expect(claimPool).not.toBe(pool);
      expect((await claimPool.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit).toBe('off');
      const done = await asyncStore.jobCompleteMany({ completions: claimed.map((j) => ({ id: j.id, token: j.leaseToken!, result: null })) });
      expect(done.every((d) => d.accepted)).toBe(true);
    } finally {
      await asyncStore.close();
    }
  });

  it('heartbeat and completion batches lock their jobs in id order, so two of them over the same jobs cannot deadlock', async () => {
    const queue = queueName('lock-order');
    await store.jobSubmitMany({ jobs: jobInputs(queue, 2) });
    const jobs = (await store.jobClaim({ queues: [queue], limit: 2, workerId: 'w' })).sort((a, b) => (a.id < b.id ? -1 : 1));
    const [low, high] = jobs as [(typeof jobs)[number], (typeof jobs)[number]];
    // Another transaction holds the lower id; each batch names the higher id first.
    const holder = await sql.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM evora.jobs WHERE id = $1 FOR UPDATE', [low.id]);
      const leases = [high, low].map((j) => ({ id: j.id, token: j.leaseToken! }));
      const heartbeat = store.jobHeartbeatMany({ leases });
      const waiting = async () =>
        (await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'`)).rows[0]!.n > 0;
      await waitFor(waiting, { what: 'the heartbeat to wait on the held job' });
      // Sorted, the batch waits on the lower id before it locks the higher one: the higher
      // one is free (unsorted, the batch would hold it while waiting, and a completion batch
      // in id order would then deadlock with it).
      const probe = await sql.query('SELECT 1 FROM evora.jobs WHERE id = $1 FOR UPDATE NOWAIT', [high.id]);
      expect(probe.rowCount).toBe(1);
      await holder.query('COMMIT');
      expect((await heartbeat).extended).toHaveLength(2);
    } finally {
      holder.release();
    }
  });
});

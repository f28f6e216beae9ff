import { beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { Store } from '../../src/store/store.js';
import { jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';

/**
 * Queues without limits are claimed by job-claim.sql, those with one by job-claim-limited.sql;
 * the store's memory of which queue is which is only a hint that each statement corrects.
 * These tests change a queue's limits between the claims of one store and check that every
 * claim obeys the limits committed before it.
 */
let store: Store;
let url: string;
let sql: pg.Pool;
beforeAll(async () => {
  ({ store, url, sql } = await storeSetup());
});

const T0 = new Date('2030-01-01T00:00:00Z');

/** A store of its own, so its prepared statements (and its memory of limited queues) start empty. */
function freshStore(): Store {
  return new Store({ connectionString: url, maxConnections: 2 });
}

async function running(queue: string): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1 AND state = 'RUNNING'`, [queue]);
  return rows[0]!.n;
}

describe('claim statements', () => {
  it('a limit set after an unlimited claim is obeyed by the next claim of the same store, and removing it frees the claim again', async () => {
    const own = freshStore();
    try {
      const queue = queueName('switch');
      await store.queueUpsert({ name: queue });
      await store.jobSubmitMany({ jobs: jobInputs(queue, 20), now: T0 });
      const claim = (limit: number) => own.jobClaim({ queues: [queue], limit, workerId: 'w', now: T0 });

      expect(await claim(2)).toHaveLength(2);
      await store.queueUpsert({ name: queue, maxConcurrency: 3 });
      // Only one more fits: 2 RUNNING, max 3, though 10 were asked.
      expect(await claim(10)).toHaveLength(1);
      expect(await claim(10)).toHaveLength(0);
      expect(await running(queue)).toBe(3);

      await store.queueUpsert({ name: queue, maxConcurrency: 0 }); // 0 clears the limit
      expect(await claim(10)).toHaveLength(10);
      expect(await running(queue)).toBe(13);
    } finally {
      await own.close();
    }
  });

  it('one claim of a limited and an unlimited queue fills its slots from both, in slot order', async () => {
    const own = freshStore();
    try {
      const plain = queueName('plain');
      const limited = queueName('limited');
      await store.queueUpsert({ name: plain });
      await store.queueUpsert({ name: limited, maxConcurrency: 2 });
      await store.jobSubmitMany({ jobs: jobInputs(plain, 3), now: T0 });
      await store.jobSubmitMany({ jobs: jobInputs(limited, 5), now: T0 });
      const workers = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
      const jobs = await own.jobClaim({ queues: [plain, limited], workerIds: workers, now: T0 });
      expect(jobs.map((j) => j.queue).sort()).toEqual([limited, limited, plain, plain, plain].sort());
      // Job i belongs to the i-th slot's worker.
      expect(jobs.map((j) => j.workerId)).toEqual(workers.slice(0, 5));
      expect(await running(limited)).toBe(2);
    } finally {
      await own.close();
    }
  });

  it('a claimed job as the store returns it is the row the claim left, field by field, from both statements', async () => {
    const own = freshStore();
    try {
      const plain = queueName('rows');
      const limited = queueName('rowslim');
      await store.queueUpsert({ name: plain, leaseSeconds: 120 });
      await store.queueUpsert({ name: limited, leaseSeconds: 45, maxConcurrency: 10 });
      // Varied values: a key, a priority, a later run_at, a payload with text to escape, a checkpoint.
      await store.jobSubmitMany({
        jobs: [
          { queue: plain, type: 'a', payload: { s: 'quote " back \\ comma , brace {', n: 1.5 }, priority: 3, idempotencyKey: 'k1' },
          { queue: plain, type: 'b', payload: {}, runAt: new Date(T0.getTime() - 60_000), maxAttempts: 7 },
          { queue: limited, type: 'c', payload: { nested: { a: [1, 2, null] } } },
        ],
        now: T0,
      });
      const claimedAt = new Date(T0.getTime() + 1234);
      const jobs = await own.jobClaim({ queues: [plain, limited], workerIds: ['w1', 'w2', 'w3'], now: claimedAt });
      expect(jobs).toHaveLength(3);
      for (const job of jobs) {
        const row = await store.jobGet({ id: job.id });
        // What the claim does not read back it knows: RUNNING, the slot's worker, nothing finished.
        expect(job).toEqual({ ...row, backoff: null, timeoutSeconds: null, concurrencyKey: null, progress: null });
        expect(job.startedAt).toEqual(claimedAt);
        expect(job.lockedUntil!.getTime() - claimedAt.getTime()).toBe((job.queue === plain ? 120 : 45) * 1000);
      }
      expect(jobs.map((j) => j.workerId)).toEqual(['w1', 'w2', 'w3']);
    } finally {
      await own.close();
    }
  });
});

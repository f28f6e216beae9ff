import { beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../../src/store/store.js';
import { jobInput, jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';

/**
 * Concurrency keys (migration 0009): the claim of a queue with max_concurrency_per_key takes
 * jobs round-robin across keys, each key at most its free slots, at explicit times so the
 * order is exact (docs/dispatcher.md "concurrency keys").
 */
let store: Store;
beforeAll(async () => {
  ({ store } = await storeSetup());
});

const T0 = new Date('2030-01-01T00:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

describe('concurrency keys', () => {
  it('takes rank 1 of every key (and of the jobs without a key) before any rank 2, each key at most its limit', async () => {
    const queue = queueName('keys');
    await store.queueUpsert({ name: queue, maxConcurrencyPerKey: 2 });
    expect((await store.queueGet({ name: queue })).maxConcurrencyPerKey).toBe(2);
    // A's backlog first, then B's, then jobs without a key; a better priority for one B job.
    await store.jobSubmitMany({ jobs: jobInputs(queue, 5, { concurrencyKey: 'A', runAt: at(-10) }), now: at(-10) });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 3, { concurrencyKey: 'B', runAt: at(-5) }), now: at(-5) });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 3, { runAt: at(-1) }), now: at(-1) });
    const claimed = await store.jobClaim({ queues: [queue], limit: 10, workerId: 'w', now: at(0) });
    const keyOf = async (id: string) => (await store.jobGet({ id })).concurrencyKey;
    const keys = await Promise.all(claimed.map((j) => keyOf(j.id)));
    // Slots are in (priority, run_at) order; the set taken is 2 of A, 2 of B, and 3 without a key.
    expect(keys.filter((k) => k === 'A')).toHaveLength(2);
    expect(keys.filter((k) => k === 'B')).toHaveLength(2);
    expect(keys.filter((k) => k === null)).toHaveLength(3);
    // Full per key: nothing more for A or B until one finishes.
    expect(await store.jobClaim({ queues: [queue], limit: 10, workerId: 'w', now: at(1) })).toHaveLength(0);
    const firstB = claimed.find((_, i) => keys[i] === 'B')!;
    await store.jobCompleteMany({ completions: [{ id: firstB.id, token: firstB.leaseToken! }], now: at(2) });
    const next = await store.jobClaim({ queues: [queue], limit: 10, workerId: 'w', now: at(3) });
    expect(next).toHaveLength(1);
    expect(await keyOf(next[0]!.id)).toBe('B');
  });

  it('with room for fewer than the offered jobs, takes by rank first: a late key is not starved by a backlog', async () => {
    const queue = queueName('fair');
    await store.queueUpsert({ name: queue, maxConcurrencyPerKey: 3, maxConcurrency: 4 });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 50, { concurrencyKey: 'big', runAt: at(-10) }), now: at(-10) });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 2, { concurrencyKey: 'small', runAt: at(-1) }), now: at(-1) });
    const claimed = await store.jobClaim({ queues: [queue], limit: 10, workerId: 'w', now: at(0) });
    expect(claimed).toHaveLength(4);
    const keys = await Promise.all(claimed.map(async (j) => (await store.jobGet({ id: j.id })).concurrencyKey));
    // Ranks 1: big, small; ranks 2: big, small (room 4 of max_concurrency).
    expect(keys.sort()).toEqual(['big', 'big', 'small', 'small']);
  });

  it('a queue without a per-key limit ignores keys; a replay with another key is refused; an oversized key is refused by the table', async () => {
    const queue = queueName('nokeylimit');
    await store.jobSubmitMany({ jobs: jobInputs(queue, 4, { concurrencyKey: 'A' }) });
    expect(await store.jobClaim({ queues: [queue], limit: 10, workerId: 'w' })).toHaveLength(4);

    const { job, created } = await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k', concurrencyKey: 'A' }) });
    expect(created).toBe(true);
    expect(job.concurrencyKey).toBe('A');
    const replay = await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k', concurrencyKey: 'A' }) });
    expect(replay.created).toBe(false);
    await expect(store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k', concurrencyKey: 'B' }) })).rejects.toThrow(
      /submitted with a different concurrency_key$/,
    );
    await expect(store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k' }) })).rejects.toThrow(
      /submitted with a different concurrency_key$/,
    );
    await expect(store.jobSubmit({ job: jobInput({ queue, concurrencyKey: 'é'.repeat(128) }) })).rejects.toThrow();
  });
});

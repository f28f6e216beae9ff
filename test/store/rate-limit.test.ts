import { beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../../src/store/store.js';
import { jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';

/**
 * The rate limit's token bucket as the claim applies it (migrations 0008 and 0016, evora.queue_limit),
 * at explicit times (the claim's `now`), so every number here is exact.
 */
let store: Store;
beforeAll(async () => {
  ({ store } = await storeSetup());
});

const T0 = new Date('2030-01-01T00:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

describe('rate limit bucket', () => {
  it('starts full at burst, refills at the rate, takes only whole tokens, and says when the next one is due', async () => {
    const queue = queueName('bucket');
    await store.queueUpsert({ name: queue, rateLimit: { perSecond: 2, burst: 3 } });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 6), now: at(-1) });
    const claim = (s: number) => store.jobClaim({ queues: [queue], limit: 10, workerId: 'w', now: at(s) });

    const first = await claim(0);
    expect(first).toHaveLength(3);
    expect(first.nextTokenAt).toEqual(at(0.5));
    const early = await claim(0.4);
    expect(early).toHaveLength(0);
    expect(early.nextTokenAt).toEqual(at(0.5));
    expect(await claim(0.5)).toHaveLength(1);
    // A claim whose time is before the last refill (another server's claim took the lock
    // first) may not use the tokens that accrued after its time.
    expect(await claim(0.45)).toHaveLength(0);
    // Long after: the bucket is capped at burst; two jobs are left, so two tokens are taken
    // and no next time is reported (nothing waits).
    const late = await claim(100);
    expect(late).toHaveLength(2);
    expect(late.nextTokenAt).toBeUndefined();
    // Tokens were not spent on jobs that were not there: one is left for a new job at once.
    await store.jobSubmitMany({ jobs: jobInputs(queue, 3), now: at(100) });
    const after = await claim(100);
    expect(after).toHaveLength(1);
    expect(after.nextTokenAt).toEqual(at(100.5));
  });

  it('a claim for other job types takes no token and is told no token time: the jobs it cannot start keep theirs', async () => {
    const queue = queueName('types');
    await store.queueUpsert({ name: queue, rateLimit: { perSecond: 1, burst: 5 } });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 10, { type: 'y' }), now: at(-1) });
    const claim = (types: string[]) => store.jobClaim({ queues: [queue], limit: 10, workerId: 'w', types, now: at(0) });

    const other = await claim(['x']);
    expect(other).toHaveLength(0);
    expect(other.nextTokenAt).toBeUndefined();
    // The bucket is still full for the jobs that are there.
    const wanted = await claim(['x', 'y']);
    expect(wanted).toHaveLength(5);
    expect(wanted.nextTokenAt).toEqual(at(1));
  });

  it('setting the same limit again keeps the bucket (no second burst); a changed limit refills it', async () => {
    const queue = queueName('again');
    await store.queueUpsert({ name: queue, rateLimit: { perSecond: 1, burst: 3 } });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 12), now: at(-1) });
    const claim = () => store.jobClaim({ queues: [queue], limit: 10, workerId: 'w', now: at(0) });
    expect(await claim()).toHaveLength(3);
    // A deploy (or every worker's start) upserting the queue's settings unchanged.
    await store.queueUpsert({ name: queue, rateLimit: { perSecond: 1, burst: 3 } });
    await store.queueUpsert({ name: queue, maxAttempts: 7 });
    const again = await claim();
    expect(again).toHaveLength(0);
    expect(again.nextTokenAt).toEqual(at(1));
    // A new limit starts with a full bucket of its own burst.
    await store.queueUpsert({ name: queue, rateLimit: { perSecond: 1, burst: 4 } });
    expect(await claim()).toHaveLength(4);
  });

  it('tokens are taken only for jobs the claim starts: a claim of several queues whose room went to better jobs elsewhere, and a per-key cut, keep the bucket', async () => {
    const limitedQ = queueName('tokensA');
    const other = queueName('tokensB');
    await store.queueUpsert({ name: limitedQ, rateLimit: { perSecond: 1, burst: 2 } });
    await store.queueUpsert({ name: other, maxConcurrency: 10 });
    await store.jobSubmitMany({ jobs: jobInputs(limitedQ, 4, { priority: 5 }), now: at(-1) });
    await store.jobSubmitMany({ jobs: jobInputs(other, 4, { priority: 0 }), now: at(-1) });
    // One slot, two limited queues: the better job (the other queue's) takes it, twice.
    for (let i = 0; i < 2; i++) {
      const got = await store.jobClaim({ queues: [limitedQ, other], limit: 1, workerId: 'w', now: at(0) });
      expect(got.map((j) => j.queue)).toEqual([other]);
    }
    // The rate-limited queue started nothing: its bucket is still full.
    expect(await store.jobClaim({ queues: [limitedQ], limit: 10, workerId: 'w', now: at(0) })).toHaveLength(2);

    // Per key: one key with three due jobs, one per key at a time: one starts, one token goes.
    const keyed = queueName('tokensK');
    await store.queueUpsert({ name: keyed, maxConcurrencyPerKey: 1, rateLimit: { perSecond: 1, burst: 3 } });
    await store.jobSubmitMany({ jobs: jobInputs(keyed, 3, { concurrencyKey: 'k' }), now: at(-1) });
    await store.jobSubmitMany({ jobs: jobInputs(keyed, 1), now: at(-1) });
    expect(await store.jobClaim({ queues: [keyed], limit: 10, workerId: 'w', now: at(0) })).toHaveLength(2);
    // One token is left for a key-less job submitted now.
    await store.jobSubmitMany({ jobs: jobInputs(keyed, 2), now: at(0) });
    expect(await store.jobClaim({ queues: [keyed], limit: 10, workerId: 'w', now: at(0) })).toHaveLength(1);
  });

  it('combines with max_concurrency (the smaller room), and clearing the limit lets every job start', async () => {
    const queue = queueName('both');
    await store.queueUpsert({ name: queue, maxConcurrency: 2, rateLimit: { perSecond: 1, burst: 5 } });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 8), now: at(-1) });
    const claim = (s: number) => store.jobClaim({ queues: [queue], limit: 10, workerId: 'w', now: at(s) });
    // max_concurrency holds these back, not the bucket: no token time is reported.
    const first = await claim(0);
    expect(first).toHaveLength(2);
    expect(first.nextTokenAt).toBeUndefined();
    await store.queueUpsert({ name: queue, maxConcurrency: 0 });
    // Three tokens left of five.
    const second = await claim(0);
    expect(second).toHaveLength(3);
    expect(second.nextTokenAt).toEqual(at(1));
    await store.queueUpsert({ name: queue, rateLimit: { perSecond: 0, burst: 0 } });
    expect((await store.queueGet({ name: queue })).rateLimit).toBeNull();
    expect(await claim(0)).toHaveLength(3);
  });
});

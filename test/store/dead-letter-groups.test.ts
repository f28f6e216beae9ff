import { beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';

/**
 * Store.jobDeadLetterGroups (sql/job-dead-letter-groups.sql) with a small scan limit: which
 * jobs are grouped and when the answer says it is incomplete. The RPC is in
 * test/grpc/dashboard-api.test.ts.
 */

let store: Store;
beforeAll(async () => {
  ({ store } = await storeSetup());
});

const T0 = new Date('2032-06-01T00:00:00Z');

/** `n` jobs of `queue` and `type` dead-lettered with `error` (max_attempts 1, failed as not retryable). */
async function deadLettered(queue: string, n: number, type: string, error: string): Promise<void> {
  await store.queueUpsert({ name: queue, maxAttempts: 1 });
  await store.jobSubmitMany({ jobs: jobInputs(queue, n, { type }), now: T0 });
  const claimed = await store.jobClaim({ queues: [queue], limit: n, workerId: 'w', now: T0 });
  await store.jobFailMany({ failures: claimed.map((j) => ({ id: j.id, token: j.leaseToken!, error, retryable: false })), now: T0 });
}

const counted = (groups: { count: number }[]) => groups.reduce((n, g) => n + g.count, 0);

describe('jobDeadLetterGroups', () => {
  it('exactly scanLimit DLQ jobs are all grouped and not truncated; one more is truncated and the newest scanLimit are grouped', async () => {
    const queue = queueName('dlq-scan');
    await deadLettered(queue, 5, 'a', 'boom');
    const exact = await store.jobDeadLetterGroups({ queue, limit: 50, scanLimit: 5 });
    expect(exact.truncated).toBe(false);
    expect(counted(exact.groups)).toBe(5);

    await deadLettered(queue, 1, 'b', 'late');
    const over = await store.jobDeadLetterGroups({ queue, limit: 50, scanLimit: 5 });
    expect(over.truncated).toBe(true);
    expect(counted(over.groups)).toBe(5);
    // The newest five: the late job and four of the first five.
    expect(over.groups.map((g) => [g.type, g.count])).toEqual([['a', 4], ['b', 1]]);
    // Under the bound, nothing is truncated.
    expect((await store.jobDeadLetterGroups({ queue, limit: 50, scanLimit: 6 })).truncated).toBe(false);
  });

  it('totalGroups counts every group of the jobs grouped, so an answer cut by limit says so', async () => {
    const queue = queueName('dlq-groups');
    await deadLettered(queue, 3, 'a', 'first');
    await deadLettered(queue, 2, 'a', 'second');
    await deadLettered(queue, 1, 'b', 'third');
    const cut = await store.jobDeadLetterGroups({ queue, limit: 2 });
    expect(cut.groups.map((g) => [g.error, g.count])).toEqual([['first', 3], ['second', 2]]);
    expect(cut.totalGroups).toBe(3);
    expect((await store.jobDeadLetterGroups({ queue, limit: 3 })).totalGroups).toBe(3);
    expect(await store.jobDeadLetterGroups({ queue: queueName('dlq-none'), limit: 3 })).toEqual({ groups: [], truncated: false, totalGroups: 0 });
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { jobInput, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';

/** Per-job backoff and attempt timeout (0007_job_policy.sql), on the store, with `now` moved by hand. */

let store: Store;
beforeAll(async () => {
  ({ store } = await storeSetup());
});

const T0 = new Date('2030-01-01T00:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

async function claimOne(queue: string, now: Date) {
  const [job] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now });
  if (!job) throw new Error('nothing claimed');
  return job;
}

describe('per-job backoff', () => {
  it("a job's own backoff spaces its retries, field by field over the queue's, on fail and on lease expiry", async () => {
    const queue = queueName();
    await store.queueUpsert({ name: queue, backoffKind: 'exponential', backoffBaseSeconds: 600, backoffJitter: 0 });
    const own = (await store.jobSubmit({ job: jobInput({ queue, backoff: { kind: 'fixed', baseSeconds: 1, capSeconds: null, jitter: 0 } }), now: T0 })).job;
    expect(own.backoff).toEqual({ kind: 'fixed', baseSeconds: 1, capSeconds: null, jitter: 0 });
    const claimed = await claimOne(queue, T0);
    await store.jobFailMany({ failures: [{ id: claimed.id, token: claimed.leaseToken!, error: 'boom', retryable: true }], now: at(2) });
    // Fixed 1 s, where the queue's policy would wait 600 s.
    expect((await store.jobGet({ id: own.id })).runAt).toEqual(at(3));

    // Only the kind set: the queue's base (600 s, jitter 0) applies with the job's kind.
    const kindOnly = (await store.jobSubmit({ job: jobInput({ queue, backoff: { kind: 'linear', baseSeconds: null, capSeconds: null, jitter: null } }), now: at(100) })).job;
    await store.jobCancel({ id: own.id });
    const c2 = await claimOne(queue, at(100));
    expect(c2.id).toBe(kindOnly.id);
    // Lease expiry (30 s lease) uses the same policy: linear, attempt 1 => 600 s.
    await store.jobSweepExpired({ limit: 10, now: at(200) });
    expect((await store.jobGet({ id: kindOnly.id })).runAt).toEqual(at(800));

    // No own backoff: the queue's.
    const plain = (await store.jobSubmit({ job: jobInput({ queue }), now: at(1000) })).job;
    expect(plain.backoff).toBeNull();
  });
});

describe('attempt timeout', () => {
  it('fails a RUNNING job past started_at + timeout (heartbeats do not extend it), retries, then dead-letters', async () => {
    const queue = queueName();
    await store.queueUpsert({ name: queue, backoffKind: 'fixed', backoffBaseSeconds: 5, backoffJitter: 0, leaseSeconds: 300 });
    const { job } = await store.jobSubmit({ job: jobInput({ queue, timeoutSeconds: 30, maxAttempts: 2 }), now: T0 });
    expect(job.timeoutSeconds).toBe(30);
    const first = await claimOne(queue, T0);
    // A heartbeat keeps the lease, not the attempt: nothing is due before the deadline.
    const beat = await store.jobHeartbeatMany({ leases: [{ id: first.id, token: first.leaseToken! }], now: at(20) });
    expect(beat.extended).toHaveLength(1);
    expect((await store.jobSweepTimedOut({ limit: 10, now: at(29) })).jobs).toEqual([]);
    const swept = await store.jobSweepTimedOut({ limit: 10, now: at(31) });
    expect(swept).toMatchObject({ requeued: 1, deadLettered: 0, cancelled: 0 });
    const retrying = await store.jobGet({ id: job.id });
    expect(retrying).toMatchObject({ state: 'PENDING', attempt: 1, lastError: 'attempt timed out after 30s', lockedUntil: null });
    expect(retrying.runAt).toEqual(at(36));
    // The holder's late completion is refused: its token no longer holds a RUNNING job.
    const late = await store.jobCompleteMany({ completions: [{ id: first.id, token: first.leaseToken!, result: {} }], now: at(32) });
    expect(late.map((o) => o.accepted)).toEqual([false]);

    const second = await claimOne(queue, at(36));
    expect((await store.jobSweepTimedOut({ limit: 10, now: at(66) })).deadLettered).toBe(1);
    expect(await store.jobGet({ id: second.id })).toMatchObject({ state: 'DLQ', attempt: 2, lastError: 'attempt timed out after 30s' });
  });

  it("a queue's attempt timeout is the default of jobs submitted without one, taken at submit; 0 clears it", async () => {
    const queue = queueName();
    const { queue: q } = await store.queueUpsert({ name: queue, attemptTimeoutSeconds: 60 });
    expect(q.attemptTimeoutSeconds).toBe(60);
    const byDefault = (await store.jobSubmit({ job: jobInput({ queue }), now: T0 })).job;
    const own = (await store.jobSubmit({ job: jobInput({ queue, timeoutSeconds: 5 }), now: T0 })).job;
    expect([byDefault.timeoutSeconds, own.timeoutSeconds]).toEqual([60, 5]);
    // Another setting leaves it as it is; 0 clears it for jobs submitted after.
    expect((await store.queueUpsert({ name: queue, maxAttempts: 3 })).queue.attemptTimeoutSeconds).toBe(60);
    expect((await store.queueUpsert({ name: queue, attemptTimeoutSeconds: 0 })).queue.attemptTimeoutSeconds).toBeNull();
    expect((await store.jobSubmit({ job: jobInput({ queue }), now: T0 })).job.timeoutSeconds).toBeNull();
    expect((await store.jobGet({ id: byDefault.id })).timeoutSeconds).toBe(60);
    // A keyed job that took the queue's default said nothing about a timeout: its replay need not either.
    await store.queueUpsert({ name: queue, attemptTimeoutSeconds: 60 });
    const keyed = await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'd' }), now: T0 });
    expect(keyed.job.timeoutSeconds).toBe(60);
    expect((await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'd' }), now: T0 })).created).toBe(false);
  });

  it('a job without a timeout is never swept by it', async () => {
    const queue = queueName();
    await store.queueUpsert({ name: queue, leaseSeconds: 86_400 });
    await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
    const claimed = await claimOne(queue, T0);
    await store.jobSweepTimedOut({ limit: 10, now: at(3600) });
    expect((await store.jobGet({ id: claimed.id })).state).toBe('RUNNING');
  });
});

describe('idempotency with a policy', () => {
  it('a replay must repeat backoff and timeout; a differing one is refused naming the field', async () => {
    const queue = queueName();
    const backoff = { kind: 'fixed' as const, baseSeconds: 1, capSeconds: null, jitter: 0 };
    const first = await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k', backoff, timeoutSeconds: 10 }), now: T0 });
    const same = await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k', backoff, timeoutSeconds: 10 }), now: at(1) });
    expect(same).toMatchObject({ created: false, job: { id: first.job.id } });
    await expect(
      store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k', backoff: { ...backoff, baseSeconds: 2 }, timeoutSeconds: 10 }) }),
    ).rejects.toThrow(/submitted with a different backoff$/);
    await expect(store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k', backoff }) })).rejects.toThrow(/submitted with a different timeout$/);
    // Batches compare the same way.
    await expect(
      store.jobSubmitMany({ jobs: [jobInput({ queue, idempotencyKey: 'k', timeoutSeconds: 10 })] }),
    ).rejects.toThrow(/submitted with a different backoff$/);
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import type { ProgressReport } from '../../src/domain/job.js';
import type { Store } from '../../src/store/store.js';
import { jobInput, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';

/**
 * The store's side of progress and attempt history (0012_progress_attempts.sql): the fenced,
 * batch-shaped progress write, the checkpoint a claim returns, the history rows the
 * statements that end an attempt write, and the completion that clears last_error.
 */

let store: Store;
beforeAll(async () => {
  ({ store } = await storeSetup());
});

const T0 = new Date('2030-01-01T00:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

/** A queue that retries at once, with one job submitted at T0 and claimed by `workerId` at T0. */
async function claimedJob(workerId = 'w1') {
  const queue = queueName();
  await store.queueUpsert({ name: queue, backoffBaseSeconds: 0, backoffJitter: 0, maxAttempts: 5 });
  await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
  const [job] = await store.jobClaim({ queues: [queue], limit: 1, workerId, now: T0 });
  if (!job) throw new Error('nothing claimed');
  return { queue, job };
}

const progress = (id: string, token: string, fields: Partial<ProgressReport> = {}): ProgressReport => ({
  id,
  token,
  percent: null,
  done: null,
  total: null,
  message: '',
  checkpoint: null,
  reportedAt: at(1),
  ...fields,
});

describe('jobProgressMany', () => {
  it('writes the reports of current leases in one statement and refuses the stale ones', async () => {
    const a = await claimedJob();
    const b = await claimedJob();
    const out = await store.jobProgressMany({
      reports: [
        progress(a.job.id, a.job.leaseToken!, { percent: 25, message: 'a', checkpoint: { step: 1 } }),
        progress(b.job.id, '00000000-0000-4000-8000-000000000000', { done: 1, total: 2 }),
      ],
      now: at(2),
    });
    expect(out.map((o) => o.accepted)).toEqual([true, false]);
    const ja = await store.jobGet({ id: a.job.id });
    expect(ja.progress).toEqual({ percent: 25, done: null, total: null, message: 'a', attempt: 1, reportedAt: at(1) });
    expect(ja.checkpoint).toEqual({ step: 1 });
    expect((await store.jobGet({ id: b.job.id })).progress).toBeNull();
  });

  it('a report without a checkpoint keeps the stored one; a finished job is never changed', async () => {
    const { queue, job } = await claimedJob();
    await store.jobProgressMany({ reports: [progress(job.id, job.leaseToken!, { checkpoint: { page: 3 } })] });
    await store.jobProgressMany({ reports: [progress(job.id, job.leaseToken!, { done: 4, total: 9 })] });
    expect(await store.jobGet({ id: job.id })).toMatchObject({ checkpoint: { page: 3 }, progress: { done: 4, total: 9 } });

    // Failed and claimed again: the new lease carries the checkpoint.
    await store.jobFailMany({ failures: [{ id: job.id, token: job.leaseToken!, error: 'e', retryable: true, retryAt: at(3) }], now: at(3) });
    const [again] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w2', now: at(4) });
    expect(again).toMatchObject({ id: job.id, attempt: 2, checkpoint: { page: 3 }, progress: null });

    await store.jobCompleteMany({ completions: [{ id: job.id, token: again!.leaseToken!, result: {} }], now: at(5) });
    const done = await store.jobGet({ id: job.id });
    const late = await store.jobProgressMany({ reports: [progress(job.id, again!.leaseToken!, { percent: 100, checkpoint: { page: 9 } })] });
    expect(late[0]!.accepted).toBe(false);
    expect(await store.jobGet({ id: job.id })).toEqual(done);
  });
});

describe('attempt history', () => {
  it('fail, snooze, lease expiry and timeout each leave a row with the time passed in; a completion leaves none and clears last_error', async () => {
    const { queue, job } = await claimedJob('w-fail');
    await store.jobFailMany({ failures: [{ id: job.id, token: job.leaseToken!, error: 'boom', retryable: true, retryAt: at(1) }], now: at(1) });
    const [second] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w-snooze', now: at(2) });
    await store.jobSnoozeMany({ snoozes: [{ id: job.id, token: second!.leaseToken!, runAt: at(3) }], now: at(3) });
    const [third] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w-gone', now: at(4) });
    await store.jobSweepExpired({ limit: 10, now: at(4 + 31) });
    const [fourth] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w-done', now: at(40) });
    expect(await store.jobAttempts({ id: job.id })).toEqual([
      { attempt: 1, workerId: 'w-fail', startedAt: T0, finishedAt: at(1), outcome: 'FAILED', error: 'boom' },
      { attempt: 2, workerId: 'w-snooze', startedAt: at(2), finishedAt: at(3), outcome: 'SNOOZED', error: null },
      { attempt: 2, workerId: 'w-gone', startedAt: at(4), finishedAt: at(35), outcome: 'LEASE_EXPIRED', error: 'lease expired (worker w-gone)' },
      { attempt: 3, workerId: 'w-done', startedAt: at(40), finishedAt: null, outcome: 'RUNNING', error: null },
    ]);
    expect(third!.attempt).toBe(2);
    await store.jobCompleteMany({ completions: [{ id: job.id, token: fourth!.leaseToken!, result: {} }], now: at(41) });
    const done = await store.jobGet({ id: job.id });
    expect(done.lastError).toBeNull();
    expect((await store.jobAttempts({ id: job.id })).at(-1)).toEqual({
      attempt: 3, workerId: 'w-done', startedAt: at(40), finishedAt: at(41), outcome: 'COMPLETED', error: null,
    });

    const timed = await claimedJob('w-slow');
    await store.jobSubmit({ job: jobInput({ queue: timed.queue, timeoutSeconds: 5 }), now: T0 });
    const [slow] = await store.jobClaim({ queues: [timed.queue], limit: 1, workerId: 'w-slow', now: T0 });
    await store.jobSweepTimedOut({ limit: 10, now: at(6) });
    expect(await store.jobAttempts({ id: slow!.id })).toEqual([
      { attempt: 1, workerId: 'w-slow', startedAt: T0, finishedAt: at(6), outcome: 'TIMED_OUT', error: 'attempt timed out after 5s' },
    ]);
  });
});

import { describe, expect, it } from 'vitest';
import type { Job } from '../../src/domain/job.js';
import { dispatcherTestSetup } from '../helpers/dispatcher-setup.js';
import { jobInputs, queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

const t = dispatcherTestSetup();
const HOUR = 3_600_000;
const setup = (opts: { queue: string; slots: number; claimCooldownMs: number }) => t.open(opts);

describe('claim cooldown: under load, claims are few and large', () => {
  it('after a claim that filled every slot it asked for, the next waits for a quarter of the slots', async () => {
    const queue = queueName();
    await t.store.jobSubmitMany({ jobs: jobInputs(queue, 1000) });
    // A cooldown that never runs out: only freed slots end the wait.
    const { dispatcher, session, claims, pushed, setOnJobs } = await setup({ queue, slots: 100, claimCooldownMs: HOUR });
    const acks: Promise<unknown>[] = [];
    // The worker finishes each job on its own, in its own tick.
    const finish = (jobs: Job[]) => {
      for (const job of jobs) {
        setImmediate(() => acks.push(dispatcher.complete(session, { id: job.id, token: job.leaseToken!, result: null })));
      }
    };
    setOnJobs(finish);
    finish(pushed);
    dispatcher.notifyQueue(queue);
    await waitFor(() => pushed.length === 1000, { what: 'every job pushed', timeoutMs: 30_000 });
    await waitFor(() => acks.length === 1000, { what: 'every completion sent' });
    const outcomes = (await Promise.all(acks)) as { accepted: boolean }[];
    expect(outcomes.every((o) => o.accepted)).toBe(true);
    expect(new Set(pushed.map((j) => j.id)).size).toBe(1000);
    // The first claim takes all 100 slots; every later one asked for at least 25.
    expect(claims[0]).toEqual({ asked: 100, got: 100 });
    expect(claims.filter((c) => c.asked < 25)).toEqual([]);
    expect(claims.length).toBeLessThanOrEqual(1 + Math.ceil(900 / 25) + 2);
  });

  it('an idle queue claims at once: a lone job is pushed without waiting for the cooldown', async () => {
    const queue = queueName();
    const { dispatcher, session, pushed } = await setup({ queue, slots: 10, claimCooldownMs: HOUR });
    for (let i = 1; i <= 3; i++) {
      await t.store.jobSubmitMany({ jobs: jobInputs(queue, 1) });
      dispatcher.notifyQueue(queue);
      await waitFor(() => pushed.length === i, { what: `job ${i} pushed` });
      const job = pushed[i - 1]!;
      expect(await dispatcher.complete(session, { id: job.id, token: job.leaseToken!, result: null })).toMatchObject({ accepted: true });
    }
  });

  it('stopping ends a cooldown at once', async () => {
    const queue = queueName();
    await t.store.jobSubmitMany({ jobs: jobInputs(queue, 8) });
    const { dispatcher, pushed } = await setup({ queue, slots: 4, claimCooldownMs: HOUR });
    dispatcher.notifyQueue(queue);
    // A full claim, then nothing finishes: the next claim waits in its cooldown.
    await waitFor(() => pushed.length === 4, { what: 'the first claim' });
    // (Without the wake-up, drainAll would wait out the hour and the test would time out.)
    expect(await dispatcher.drainAll(50)).toBe(4);
  });
});

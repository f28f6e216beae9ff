import { afterEach, describe, expect, it } from 'vitest';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import type { Job } from '../../src/domain/job.js';
import { silentLogger } from '../../src/logger.js';
import { dispatcherTestSetup } from '../helpers/dispatcher-setup.js';
import { jobInputs, queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

const t = dispatcherTestSetup();
const HOUR = 3_600_000;

let drains: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(drains.map((d) => d()));
  drains = [];
});

/**
 * One session of worker "w" on `queues` (in that order) that finishes every job pushed to it,
 * each in a tick of its own, as a worker does. No poll and no NOTIFY: the session's opening
 * wakes its queues, and freed slots do the rest.
 */
async function finishingWorker(queues: string[], slots: number, claimCooldownMs: number, pollIntervalMs = HOUR) {
  const claims: { queue: string; got: number }[] = [];
  const dispatcher = new Dispatcher({
    store: t.store,
    logger: silentLogger(),
    pollIntervalMs,
    claimCooldownMs,
    observer: { claimed: (queue, _asked, got) => claims.push({ queue, got }) },
  });
  dispatcher.start();
  drains.push(() => dispatcher.drainAll(1000));
  const pushed: Job[] = [];
  const acks: Promise<unknown>[] = [];
  const session = await dispatcher.sessionOpen({
    workerId: 'w',
    queues,
    slots,
    send: (msg) => {
      if (msg.kind !== 'jobs') return;
      pushed.push(...msg.jobs);
      for (const job of msg.jobs) {
        setImmediate(() => acks.push(dispatcher.complete(session, { id: job.id, token: job.leaseToken!, result: null })));
      }
    },
  });
  return { pushed, acks, claims };
}

describe('a worker that takes jobs from several queues', () => {
  // Found by running a mixed workload (one queue of 10,000 jobs and 200 of 50, one worker of
  // 100 slots on all of them): freed slots went to the worker's queues in the order its
  // hello listed them, and the first queue with a backlog, claiming again after every batch,
  // took them all. The queues listed after it got nothing until it was drained: their
  // median job waited 2.6 s with the big queue listed first against 0.8 s with it last.
  for (const cooldown of [0, HOUR]) {
    it(`shares freed slots among its queues: a short queue listed after a long one is not held back until the long one drains (cooldown ${cooldown ? 'on' : 'off'})`, async () => {
      const [long, short] = [queueName('long'), queueName('short')];
      await t.store.jobSubmitMany({ jobs: jobInputs(long, 60) });
      await t.store.jobSubmitMany({ jobs: jobInputs(short, 4) });
      const { pushed, acks } = await finishingWorker([long, short], 4, cooldown);
      await waitFor(() => pushed.length === 64, { what: 'every job pushed', timeoutMs: 30_000 });
      await waitFor(() => acks.length === 64, { what: 'every completion sent' });
      expect((await Promise.all(acks)).every((a) => (a as { accepted: boolean }).accepted)).toBe(true);
      // The short queue's last job went out while most of the long queue still waited.
      const lastShort = pushed.findLastIndex((j) => j.queue === short);
      expect(lastShort).toBeLessThan(20);
    });
  }

  // Found by the same workload: jobs that come due (run_at reached, a retry's backoff over)
  // get no NOTIFY; the fallback poll finds them, but it woke only queues with a free slot. A
  // worker busy with another queue's backlog never has one at a tick (a freed slot is
  // claimed again at once), so a delayed job waited until the backlog drained: with 30,000
  // jobs waiting in a queue of the same worker, jobs due over 30 s started up to 7.2 s late
  // (p99), against 1.0 s without the backlog.
  it('a job that comes due in an idle queue starts while another of its queues has a backlog', async () => {
    const [long, timed] = [queueName('long'), queueName('timed')];
    await t.store.queueUpsert({ name: timed });
    await t.store.jobSubmitMany({ jobs: jobInputs(long, 400) });
    const { pushed, acks } = await finishingWorker([long, timed], 2, 0, 10);
    await waitFor(() => pushed.length >= 20, { what: 'the backlog running' });
    // Due now, but nothing tells the dispatcher: only the poll can find it.
    await t.store.jobSubmitMany({ jobs: jobInputs(timed, 1) });
    await waitFor(() => pushed.length === 401, { what: 'every job pushed', timeoutMs: 30_000 });
    await waitFor(() => acks.length === 401, { what: 'every completion sent' });
    await Promise.all(acks);
    const at = pushed.findIndex((j) => j.queue === timed);
    expect(at, 'the delayed job went out before the backlog drained').toBeLessThan(350);
  });

  // The price of the above, kept small: asked by a claim each, 500 idle queues of a busy
  // worker cost 500 statements per tick and took the busy queue from 1,800 to 460–1,100
  // jobs/s; one statement now asks which of them have a due job.
  it("a busy worker's idle queues without due jobs are not claimed at every poll", async () => {
    const long = queueName('long');
    const empty = Array.from({ length: 20 }, (_, i) => queueName(`empty${i}`));
    for (const name of empty) await t.store.queueUpsert({ name });
    await t.store.jobSubmitMany({ jobs: jobInputs(long, 400) });
    const { pushed, acks, claims } = await finishingWorker([long, ...empty], 2, 0, 10);
    await waitFor(() => pushed.length === 400, { what: 'every job pushed', timeoutMs: 30_000 });
    await waitFor(() => acks.length === 400, { what: 'every completion sent' });
    await Promise.all(acks);
    // Each empty queue: the claim of the session's opening, and none while the worker was busy.
    for (const name of empty) expect(claims.filter((c) => c.queue === name).length, name).toBeLessThanOrEqual(2);
  });
});

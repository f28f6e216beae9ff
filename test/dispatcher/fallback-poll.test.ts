import { afterEach, describe, expect, it } from 'vitest';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import type { Job } from '../../src/domain/job.js';
import { silentLogger } from '../../src/logger.js';
import { dispatcherTestSetup } from '../helpers/dispatcher-setup.js';
import { jobInputs, queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

const t = dispatcherTestSetup();

let drains: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(drains.map((d) => d()));
  drains = [];
});

/**
 * A started dispatcher (the fallback poll runs every few ms) with one session of worker "w"
 * on `queues`, in that order. No LISTEN connection: jobs submitted to the store wake nothing,
 * so only the poll (or the test) gets them claimed. Claims are recorded per queue.
 */
async function polling(queues: string[], slots: number) {
  const claims: { queue: string; asked: number; got: number }[] = [];
  const dispatcher = new Dispatcher({
    store: t.store,
    logger: silentLogger(),
    pollIntervalMs: 10,
    claimCooldownMs: 0,
    observer: { claimed: (queue, asked, got) => claims.push({ queue, asked, got }) },
  });
  drains.push(() => dispatcher.drainAll(1000));
  dispatcher.start();
  const pushed: Job[] = [];
  const session = await dispatcher.sessionOpen({
    workerId: 'w',
    queues,
    slots,
    send: (msg) => {
      if (msg.kind === 'jobs') pushed.push(...msg.jobs);
    },
  });
  return { dispatcher, session, claims, pushed };
}

describe('the fallback poll', () => {
  // Found by the chaos suite: jobs requeued with a backoff (by the sweeper, or a failure)
  // are due later and get no NOTIFY; only the poll finds them. The poll woke the first queue
  // with free slots, whose claim reserved every free slot of the session at once, so the
  // session's other queues looked full and were never polled.
  it('claims the due jobs of every queue a session takes jobs from, not only of the first', async () => {
    const [first, second] = [queueName('first'), queueName('second')];
    for (const name of [first, second]) await t.store.queueUpsert({ name });
    const { dispatcher, session, claims, pushed } = await polling([first, second], 4);
    // The session's opening woke both queues; both came back empty and are idle.
    await waitFor(() => claims.some((c) => c.queue === second) && session.reserved === 0, { what: 'both queues claimed once' });
    expect(pushed).toEqual([]);

    // Due now, but nothing tells the dispatcher: no NOTIFY reaches it.
    await t.store.jobSubmitMany({ jobs: jobInputs(second, 2) });
    await waitFor(() => pushed.length === 2, { what: "the second queue's jobs claimed by the poll" });
    expect(pushed.every((j) => j.queue === second)).toBe(true);
    expect(claims.filter((c) => c.queue === second && c.got > 0)).toEqual([{ queue: second, asked: 4, got: 2 }]);

    // And the first queue's, as before.
    await t.store.jobSubmitMany({ jobs: jobInputs(first, 1) });
    await waitFor(() => pushed.length === 3, { what: "the first queue's job claimed by the poll" });
    expect(pushed[2]!.queue).toBe(first);
    expect(session.held.size).toBe(3);
    expect(dispatcher.sessionStats()).toMatchObject({ sessions: 1, held: 3 });
  });
});

import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Dispatcher, type SessionMessage } from '../../src/dispatcher/dispatcher.js';
import { silentLogger } from '../../src/logger.js';
import type { Job, Store } from '../../src/store/store.js';
import { jobInput, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';

let store: Store;
beforeAll(async () => {
  ({ store } = await storeSetup());
});

let stopAll: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(stopAll.map((s) => s()));
  stopAll = [];
});

/** A dispatcher and one session on a queue, with the jobs pushed to it. */
async function setup(queue: string, slots: number) {
  const dispatcher = new Dispatcher({ store, logger: silentLogger(), pollIntervalMs: 3_600_000, claimCooldownMs: 0 });
  stopAll.push(() => dispatcher.drainAll(1000));
  const pushed: Job[] = [];
  const session = await dispatcher.sessionOpen({
    workerId: 'w',
    queues: [queue],
    slots,
    send: (msg: SessionMessage) => {
      if (msg.kind === 'jobs') pushed.push(...msg.jobs);
    },
  });
  return { dispatcher, session, pushed };
}

describe('the slots a session holds follow its current leases', () => {
  it('a late write of an earlier run of a job, claimed again by the same session, does not free the new run slot', async () => {
    const queue = queueName();
    await store.queueUpsert({ name: queue, backoffBaseSeconds: 0, backoffJitter: 0, leaseSeconds: 1 });
    const { job } = await store.jobSubmit({ job: jobInput({ queue }) });
    const { dispatcher, session, pushed } = await setup(queue, 2);
    dispatcher.notifyQueue(queue);
    await waitFor(() => pushed.length === 1, { what: 'the first run pushed' });
    const first = pushed[0]!;
    // Its lease expires and the sweeper requeues it; the same session gets it again.
    await store.pool.query(`UPDATE evora.jobs SET locked_until = now() - interval '1 second' WHERE id = $1`, [job.id]);
    expect((await store.jobSweepExpired({ limit: 10 })).requeued).toBe(1);
    dispatcher.notifyQueue(queue);
    await waitFor(() => pushed.length === 2, { what: 'the second run pushed' });
    const second = pushed[1]!;
    expect(second.id).toBe(job.id);
    expect(second.leaseToken).not.toBe(first.leaseToken);
    expect(session.free).toBe(1);

    // The first run reports late: refused, and the second run keeps its slot.
    expect(await dispatcher.complete(session, { id: job.id, token: first.leaseToken!, result: null })).toMatchObject({ accepted: false });
    expect(session.free).toBe(1);
    expect(await dispatcher.complete(session, { id: job.id, token: second.leaseToken!, result: null })).toMatchObject({ accepted: true });
    expect(session.free).toBe(2);
  });
});

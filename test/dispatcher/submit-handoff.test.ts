import { describe, expect, it } from 'vitest';
import type { SessionMessage } from '../../src/dispatcher/dispatcher.js';
import type { Store } from '../../src/store/store.js';
import { claimsGated, dispatcherTestSetup } from '../helpers/dispatcher-setup.js';
import { jobInput, queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

const t = dispatcherTestSetup();

/** A dispatcher and one session on a new queue, idle: its first claim has come back empty. */
async function setup(opts: { slots: number; send?: (msg: SessionMessage) => void; store?: Store }) {
  const queue = queueName();
  await t.store.queueUpsert({ name: queue, leaseSeconds: 30 });
  const parts = await t.open({ queue, ...opts });
  await waitFor(() => parts.session.free === opts.slots, { what: 'the first claim to come back' });
  return { queue, ...parts };
}

describe('a submit hands its job to a free slot of this server', () => {
  it('pushes the job leased by the submit itself, with no claim; a full session leaves the next one to a claim', async () => {
    const { queue, dispatcher, session, pushed, claims } = await setup({ slots: 1 });
    expect(claims).toEqual([{ asked: 1, got: 0 }]); // the session's first claim, before any job
    const first = await dispatcher.submit(jobInput({ queue }));
    expect(first.job).toMatchObject({ state: 'RUNNING', attempt: 1, workerId: 'w' });
    expect(pushed.map((j) => [j.id, j.leaseToken])).toEqual([[first.job.id, first.job.leaseToken]]);
    expect(session.free).toBe(0);
    expect(claims).toHaveLength(1); // no claim ran for it

    const second = await dispatcher.submit(jobInput({ queue }));
    expect(second.job.state).toBe('PENDING');
    dispatcher.notifyQueue(queue); // what its NOTIFY does on a server: no free slot, so no claim yet

    // The first finishes; its slot claims the second as usual.
    expect(await dispatcher.complete(session, { id: first.job.id, token: first.job.leaseToken!, result: null })).toMatchObject({ accepted: true });
    await waitFor(() => pushed.length === 2, { what: 'the second job claimed' });
    expect(pushed[1]?.id).toBe(second.job.id);
    expect(claims).toEqual([{ asked: 1, got: 0 }, { asked: 1, got: 1 }]);
  });

  it('while a claim of the queue runs, a submit leaves its job to that claim', async () => {
    const gated = claimsGated(t.store);
    const { queue, dispatcher, pushed, claims } = await setup({ slots: 2, store: gated.store });
    gated.hold();
    dispatcher.notifyQueue(queue); // a claim starts and waits at the gate
    const { job } = await dispatcher.submit(jobInput({ queue }));
    expect(job.state).toBe('PENDING');
    gated.release();
    await waitFor(() => pushed.length === 1, { what: 'the job claimed' });
    expect(pushed[0]?.id).toBe(job.id);
    expect(claims.at(-1)).toEqual({ asked: 2, got: 1 });
  });

  it('a hand-off that cannot be pushed is released at once and frees its slot', async () => {
    const { queue, dispatcher, session } = await setup({
      slots: 1,
      send: (msg) => {
        if (msg.kind === 'jobs') throw new Error('the stream is gone');
      },
    });
    const { job } = await dispatcher.submit(jobInput({ queue }));
    expect(job.state).toBe('RUNNING');
    const now = await t.store.jobGet({ id: job.id });
    expect(now).toMatchObject({ state: 'PENDING', attempt: 0 });
    expect(session.free).toBe(1);
  });

  it('shutdown waits for a hand-off in flight; its job is released before the drain returns', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    // The file's store, with submits held at the gate.
    const gated = Object.create(t.store) as Store;
    gated.jobSubmit = async (params) => {
      await gate;
      return t.store.jobSubmit(params);
    };
    const { queue, dispatcher } = await setup({ slots: 1, store: gated });
    const submitted = dispatcher.submit(jobInput({ queue }));
    const atDrainEnd = dispatcher.drainAll(1000).then(async () => (await t.store.jobList({ queue, limit: 10 })).jobs);
    setImmediate(open);
    const { job } = await submitted;
    expect(job.state).toBe('RUNNING'); // as the submit committed it
    expect((await atDrainEnd).map((j) => [j.id, j.state, j.attempt])).toEqual([[job.id, 'PENDING', 0]]);
  });

  it('a submit that fails returns its reserved slot', async () => {
    const { queue, dispatcher, session } = await setup({ slots: 1 });
    const { job } = await dispatcher.submit(jobInput({ queue, idempotencyKey: 'k' }));
    await dispatcher.complete(session, { id: job.id, token: job.leaseToken!, result: null });
    await expect(dispatcher.submit(jobInput({ queue, idempotencyKey: 'k', payload: { other: true } }))).rejects.toThrow(/already names job/);
    expect(session.free).toBe(1);
  });
});

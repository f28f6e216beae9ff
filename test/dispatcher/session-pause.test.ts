import { describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { claimsGated, dispatcherTestSetup } from '../helpers/dispatcher-setup.js';
import { jobInput, jobInputs, queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

const t = dispatcherTestSetup();

/** A dispatcher and one session on a new queue, idle: its first claim has come back empty. */
async function setup(opts: { slots: number; store?: Store }) {
  const queue = queueName();
  await t.store.queueUpsert({ name: queue, leaseSeconds: 30 });
  const parts = await t.open({ queue, ...opts });
  await waitFor(() => parts.session.free === opts.slots, { what: 'the first claim to come back' });
  return { queue, ...parts };
}

describe('backpressure: a paused session gets no new pushes', () => {
  it('counts no free slot while paused (no claim, no hand-off); resume claims what came meanwhile', async () => {
    const { queue, dispatcher, session, pushed, claims } = await setup({ slots: 2 });
    dispatcher.sessionPause(session);
    expect(session.state).toBe('paused');
    expect(dispatcher.queueWorkers(queue)).toEqual({ workers: 1, freeSlots: 0 });
    expect(dispatcher.sessionStats()).toMatchObject({ sessions: 1, free: 0 });

    const { job: submitted } = await dispatcher.submit(jobInput({ queue }));
    expect(submitted.state).toBe('PENDING'); // not handed to the paused session
    await t.store.jobSubmitMany({ jobs: jobInputs(queue, 1) });
    dispatcher.notifyQueue(queue); // what the submits' NOTIFY does on a server
    expect(claims).toEqual([{ asked: 2, got: 0 }]); // no free slot: no claim

    dispatcher.sessionResume(session);
    expect(session.state).toBe('open');
    await waitFor(() => pushed.length === 2, { what: 'both jobs pushed after the resume' });
    expect(pushed.map((j) => j.id)).toContain(submitted.id);
    expect(claims.at(-1)).toEqual({ asked: 2, got: 2 });
  });

  it('still pushes the jobs claimed for slots it reserved before it paused', async () => {
    const gated = claimsGated(t.store);
    const { queue, dispatcher, session, pushed } = await setup({ slots: 2, store: gated.store });
    await t.store.jobSubmitMany({ jobs: jobInputs(queue, 2) });
    gated.hold();
    dispatcher.notifyQueue(queue); // a claim reserves both slots and waits at the gate
    expect(session.reserved).toBe(2);
    dispatcher.sessionPause(session);
    gated.release();
    await waitFor(() => pushed.length === 2, { what: 'the claimed jobs pushed' });
    expect(session).toMatchObject({ state: 'paused', reserved: 0, free: 0 });
    expect(session.held.size).toBe(2);
  });

  it('a draining or closed session stays so: pause and resume change nothing', async () => {
    const { dispatcher, session } = await setup({ slots: 1 });
    dispatcher.sessionDrain(session);
    dispatcher.sessionPause(session);
    dispatcher.sessionResume(session);
    expect(session.state).toBe('draining');
    dispatcher.sessionClose(session);
    dispatcher.sessionPause(session);
    dispatcher.sessionResume(session);
    dispatcher.sessionDrain(session);
    expect(session.state).toBe('closed');
  });
});

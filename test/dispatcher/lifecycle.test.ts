import { describe, expect, it } from 'vitest';
import { DISPATCHER_TRANSITIONS, type DispatcherState, type SessionMessage } from '../../src/dispatcher/dispatcher.js';
import { checkTransition, IllegalTransitionError } from '../../src/domain/state-machine.js';
import { dispatcherTestSetup } from '../helpers/dispatcher-setup.js';
import { jobInput, jobInputs, queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

const t = dispatcherTestSetup();
const HOUR = 3_600_000;

describe('the dispatcher: ready → polling → stopped', () => {
  it('lists its moves: started at most once, never restarted', () => {
    const states: DispatcherState[] = ['ready', 'polling', 'stopped'];
    const allowed = states.flatMap((from) =>
      states.flatMap((to) => {
        try {
          checkTransition('dispatcher', DISPATCHER_TRANSITIONS, from, to);
          return [`${from} → ${to}`];
        } catch (err) {
          expect(err).toBeInstanceOf(IllegalTransitionError);
          return [];
        }
      }),
    );
    expect(allowed).toEqual(['ready → polling', 'ready → stopped', 'polling → stopped']);
  });

  it('start is safe twice; drainAll stops it for good and ends the long-poll waits', async () => {
    const queue = queueName();
    const sent: SessionMessage[] = [];
    const { dispatcher } = await t.open({ queue, slots: 1, send: (msg) => sent.push(msg) });
    expect(dispatcher.state).toBe('ready');
    dispatcher.start();
    dispatcher.start();
    expect(dispatcher.state).toBe('polling');

    // A unary claim waiting an hour for work (the poll interval is an hour too).
    const waiting = dispatcher.claimUnary({ workerId: 'u', queues: [queueName()], max: 1, waitMs: HOUR });
    await waitFor(() => dispatcher.waitingClaims === 1, { what: 'the claim to wait' });
    expect(await dispatcher.drainAll(1000)).toBe(0);
    expect(await waiting).toEqual([]);
    expect(dispatcher.waitingClaims).toBe(0);
    expect(dispatcher.state).toBe('stopped');
    expect(sent.filter((m) => m.kind === 'drain')).toEqual([{ kind: 'drain', reason: 'server_shutdown' }]);

    dispatcher.start();
    expect(dispatcher.state).toBe('stopped');
    await dispatcher.drainAll(1000); // a second drain only waits again
    expect(sent.filter((m) => m.kind === 'drain')).toHaveLength(1);
  });

  it("a unary claim's own signal ends its wait", async () => {
    const { dispatcher } = await t.open({ queue: queueName(), slots: 1 });
    const abort = new AbortController();
    const waiting = dispatcher.claimUnary({ workerId: 'u', queues: [queueName()], max: 1, waitMs: HOUR, signal: abort.signal });
    await waitFor(() => dispatcher.waitingClaims === 1, { what: 'the claim to wait' });
    abort.abort();
    expect(await waiting).toEqual([]);
    expect(dispatcher.waitingClaims).toBe(0);
  });

  it('once stopped, nothing is claimed or handed off, even for a session opened after: that one is drained at once', async () => {
    const queue = queueName();
    await t.store.queueUpsert({ name: queue, leaseSeconds: 30 });
    const { dispatcher, claims } = await t.open({ queue: queueName(), slots: 1 });
    await dispatcher.drainAll(1000);
    await t.store.jobSubmitMany({ jobs: jobInputs(queue, 1) });
    const pushed: SessionMessage[] = [];
    const late = await dispatcher.sessionOpen({ workerId: 'late', queues: [queue], slots: 1, send: (m) => pushed.push(m) });
    dispatcher.notifyQueue(queue);
    expect((await dispatcher.submit(jobInput({ queue }))).job.state).toBe('PENDING');
    expect(claims).toHaveLength(1); // the first session's claim, before the drain
    expect(pushed).toEqual([{ kind: 'drain', reason: 'server_shutdown' }]); // and no jobs
    expect(late.state).toBe('draining');
    dispatcher.sessionClose(late);
  });
});

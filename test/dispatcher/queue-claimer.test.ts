import { describe, expect, it } from 'vitest';
import type { Job } from '../../src/domain/job.js';
import {
  CLAIMER_TRANSITIONS,
  dealToSlots,
  QueueClaimer,
  roundRobinSlots,
  type ClaimerHost,
  type ClaimerState,
} from '../../src/dispatcher/queue-claimer.js';
import { WorkerSession, heldLease } from '../../src/dispatcher/session.js';
import { checkTransition, IllegalTransitionError } from '../../src/domain/state-machine.js';
import { silentLogger } from '../../src/logger.js';
import { leasedJob } from '../helpers/dispatcher-setup.js';
import { waitFor } from '../helpers/wait.js';

const HOUR = 3_600_000;

/**
 * A claimer of queue "q" over sessions with the given slots, without a database: each claim
 * statement waits until the test answers it (`answer(jobs)` / `refuse()`); delivered jobs are
 * held by their sessions, as the dispatcher does. `finish(session, n)` frees n held slots.
 */
function setup(opts: { slots: number[]; claimCooldownMs?: number }) {
  const claims: { workerIds: string[]; resolve: (jobs: Job[]) => void; reject: (err: Error) => void }[] = [];
  const runs: Promise<void>[] = [];
  const delivered: Job[] = [];
  let next = 0;
  const host: ClaimerHost = {
    claim: (_queue, workerIds) => new Promise((resolve, reject) => claims.push({ workerIds, resolve, reject })),
    deliver: async (dealt) => {
      for (const [session, jobs] of dealt) {
        for (const job of jobs) session.hold(job.id, heldLease(job.leaseToken ?? '', job.lockedUntil?.getTime() ?? Number.NaN, 30_000));
        delivered.push(...jobs);
      }
    },
    slotUnused: () => undefined,
    track: (run) => void runs.push(run),
    loopEnded: () => undefined,
    logger: silentLogger(),
  };
  const claimer = new QueueClaimer('q', host, { maxClaimBatch: 1000, claimCooldownMs: opts.claimCooldownMs ?? 0 });
  const sessions = opts.slots.map((slots, i) => new WorkerSession(`w${i}`, ['q'], slots, () => undefined));
  for (const s of sessions) claimer.sessions.add(s);
  const claim = (i: number) => {
    const c = claims[i];
    if (!c) throw new Error(`no claim ${i} yet`);
    return c;
  };
  return {
    claimer,
    sessions,
    claims,
    runs,
    delivered,
    /** Answers the latest claim with `n` jobs. */
    answer: (n: number) => claim(claims.length - 1).resolve(Array.from({ length: n }, () => leasedJob('q', next++))),
    refuse: () => claim(claims.length - 1).reject(new Error('the database is away')),
    finish: (session: WorkerSession, n: number) => {
      for (const id of [...session.held.keys()].slice(0, n)) session.drop(id);
      claimer.slotsFreed();
    },
  };
}

const STATES: ClaimerState[] = ['idle', 'wanted', 'claiming', 'coolingDown', 'stopped'];

describe('a queue claimer moves only along its transition table', () => {
  it('starts a claim only from idle or wanted, and never leaves stopped', () => {
    const allowed: string[] = [];
    for (const from of STATES) {
      for (const to of STATES) {
        try {
          checkTransition('claimer', CLAIMER_TRANSITIONS, from, to);
          allowed.push(`${from} → ${to}`);
        } catch (err) {
          expect(err).toBeInstanceOf(IllegalTransitionError);
        }
      }
    }
    expect(allowed).toEqual([
      'idle → wanted',
      'idle → claiming',
      'idle → stopped',
      'wanted → claiming',
      'wanted → stopped',
      'claiming → idle',
      'claiming → wanted',
      'claiming → coolingDown',
      'claiming → stopped',
      'coolingDown → claiming',
      'coolingDown → stopped',
    ]);
  });
});

describe('dealing slots and jobs', () => {
  it('deals one slot per session per round, in the order given, up to max', () => {
    const [a, b, c] = [{ name: 'a', free: 3 }, { name: 'b', free: 1 }, { name: 'c', free: 2 }];
    expect(roundRobinSlots([a!, b!, c!], 10).map((s) => s.name)).toEqual(['a', 'b', 'c', 'a', 'c', 'a']);
    expect(roundRobinSlots([a!, b!, c!], 4).map((s) => s.name)).toEqual(['a', 'b', 'c', 'a']);
  });

  it('gives job i to slot i, so a short claim still reaches every session first', () => {
    const jobs = [leasedJob('q', 1), leasedJob('q', 2)];
    const dealt = dealToSlots(['a', 'b', 'a'], jobs);
    expect([...dealt].map(([s, js]) => [s, js.map((j) => j.payload.n)])).toEqual([
      ['a', [1]],
      ['b', [2]],
    ]);
  });

  it('a claim smaller than the sessions with free slots reserves only what it deals, and gives it all back', () => {
    const { claimer, sessions } = setup({ slots: [2, 2, 2] });
    const slots = claimer.reserve(2);
    expect(slots.map((s) => s.workerId)).toEqual(['w0', 'w1']);
    expect(sessions.map((s) => s.reserved)).toEqual([1, 1, 0]);
    for (const s of slots) s.unreserve();
    expect(sessions.map((s) => s.reserved)).toEqual([0, 0, 0]);
  });
});

describe('a queue claimer', () => {
  it('idle → claiming → idle: a claim reserves every free slot, round-robin, and a short one ends the loop', async () => {
    const { claimer, sessions, claims, answer } = setup({ slots: [2, 1] });
    expect(claimer.state).toBe('idle');
    claimer.wake();
    expect(claimer.state).toBe('claiming');
    expect(claims[0]?.workerIds).toEqual(['w0', 'w1', 'w0']);
    expect(sessions.map((s) => s.reserved)).toEqual([2, 1]);
    answer(2);
    await waitFor(() => claimer.state === 'idle', { what: 'the claim to come back' });
    // Job 0 to w0, job 1 to w1; the slot that got nothing is free again.
    expect(sessions.map((s) => [s.reserved, s.held.size, s.free])).toEqual([
      [0, 1, 1],
      [0, 1, 0],
    ]);
    expect(claims).toHaveLength(1);
  });

  it('a wake-up during a claim is not lost: a short claim that missed it claims again', async () => {
    const { claimer, claims, answer } = setup({ slots: [4] });
    claimer.wake();
    claimer.wake(); // a NOTIFY while the statement runs: its rows may be invisible to it
    expect(claims).toHaveLength(1);
    answer(0);
    await waitFor(() => claims.length === 2, { what: 'the claim after the wake-up' });
    answer(0);
    await waitFor(() => claimer.state === 'idle', { what: 'the queue drained' });
    expect(claims).toHaveLength(2);
  });

  it('claiming → coolingDown → claiming: after a full claim, the next waits for a quarter of the slots', async () => {
    const { claimer, sessions, claims, answer, finish } = setup({ slots: [8], claimCooldownMs: HOUR });
    const [s] = sessions as [WorkerSession];
    claimer.wake();
    answer(8);
    await waitFor(() => claimer.state === 'coolingDown', { what: 'the cooldown' });
    expect(claimer.reserveForHandOff()).toBeNull(); // a busy queue hands nothing off
    finish(s, 1);
    expect(claimer.state).toBe('coolingDown'); // 1 free < 8 / 4
    finish(s, 1);
    expect(claimer.state).toBe('claiming');
    await waitFor(() => claims.length === 2, { what: 'the next claim' });
    expect(claims[1]?.workerIds).toHaveLength(2);
    answer(0);
    await waitFor(() => claimer.state === 'idle', { what: 'the queue drained' });
  });

  it('an idle queue claims at once, cooldown or not', async () => {
    const { claimer, claims, answer } = setup({ slots: [8], claimCooldownMs: HOUR });
    claimer.wake();
    expect(claims).toHaveLength(1);
    answer(1);
    await waitFor(() => claimer.state === 'idle', { what: 'the claim to come back' });
  });

  it('idle → wanted when no slot is free; a freed slot starts the claim', async () => {
    const { claimer, sessions, claims, answer, finish } = setup({ slots: [1] });
    const [s] = sessions as [WorkerSession];
    s.hold('busy', heldLease('t', Date.now() + 60_000, 30_000));
    claimer.wake();
    expect(claimer.state).toBe('wanted');
    expect(claims).toHaveLength(0);
    expect(claimer.reserveForHandOff()).toBeNull(); // work may wait: no hand-off
    finish(s, 1);
    await waitFor(() => claimer.state === 'claiming', { what: 'the freed slot to start the claim' });
    answer(0);
    await waitFor(() => claimer.state === 'idle', { what: 'the claim to come back' });
  });

  it('slots freed together (one committed batch of writes) start one claim that asks for all of them', async () => {
    const { claimer, sessions, claims, answer } = setup({ slots: [3, 2] });
    const [a, b] = sessions as [WorkerSession, WorkerSession];
    for (let i = 0; i < 3; i++) a.hold(`a${i}`, heldLease('t', Date.now() + 60_000, 30_000));
    for (let i = 0; i < 2; i++) b.hold(`b${i}`, heldLease('t', Date.now() + 60_000, 30_000));
    claimer.wake();
    expect(claimer.state).toBe('wanted');
    for (const [s, id] of [[a, 'a0'], [b, 'b0'], [a, 'a1']] as const) {
      s.drop(id);
      claimer.slotsFreed();
    }
    expect(claims).toHaveLength(0); // not yet: the frees of this tick go together
    await waitFor(() => claims.length === 1, { what: 'the claim' });
    expect(claims[0]?.workerIds.sort()).toEqual(['w0', 'w0', 'w1']);
    answer(0);
    await waitFor(() => claimer.state === 'idle', { what: 'the claim to come back' });
  });

  it('a wake-up that starts the claim before the queued start runs: one claim, not two', async () => {
    const { claimer, sessions, claims, answer } = setup({ slots: [2] });
    const [s] = sessions as [WorkerSession];
    s.hold('busy', heldLease('t', Date.now() + 60_000, 30_000));
    s.hold('busy2', heldLease('t', Date.now() + 60_000, 30_000));
    claimer.wake();
    s.drop('busy');
    claimer.slotsFreed();
    claimer.wake(); // the queued start finds the claim running
    expect(claimer.state).toBe('claiming');
    await Promise.resolve();
    await Promise.resolve();
    expect(claims).toHaveLength(1);
    answer(0);
    await waitFor(() => claimer.state === 'idle', { what: 'the claim to come back' });
  });

  it('a failed claim gives its slots back and leaves the queue wanted (the poll retries)', async () => {
    const { claimer, sessions, claims, refuse, answer } = setup({ slots: [3] });
    claimer.wake();
    refuse();
    await waitFor(() => claimer.state === 'wanted', { what: 'the failed claim' });
    expect(sessions[0]?.reserved).toBe(0);
    claimer.wake();
    expect(claims).toHaveLength(2);
    answer(0);
    await waitFor(() => claimer.state === 'idle', { what: 'the retried claim' });
  });

  it('hands a slot to a submit only while idle, reserved like a claim reserves it', () => {
    const { claimer, sessions } = setup({ slots: [1, 1] });
    const first = claimer.reserveForHandOff();
    const second = claimer.reserveForHandOff();
    expect(new Set([first, second])).toEqual(new Set(sessions));
    expect(claimer.reserveForHandOff()).toBeNull(); // every slot reserved
    expect(sessions.map((s) => s.reserved)).toEqual([1, 1]);
  });

  it('stopping ends a cooldown at once, and a stopped claimer claims nothing more', async () => {
    const { claimer, claims, runs, answer } = setup({ slots: [4], claimCooldownMs: HOUR });
    claimer.wake();
    answer(4);
    await waitFor(() => claimer.state === 'coolingDown', { what: 'the cooldown' });
    claimer.stop();
    expect(claimer.state).toBe('stopped');
    await Promise.all(runs); // the loop ended: its cooldown timer went with it
    claimer.wake();
    claimer.slotsFreed();
    expect(claimer.state).toBe('stopped');
    expect(claims).toHaveLength(1);
  });

  it('a claim in flight when it stops still hands its jobs over (the dispatcher releases them)', async () => {
    const { claimer, runs, delivered, answer } = setup({ slots: [2] });
    claimer.wake();
    claimer.stop();
    answer(2);
    await Promise.all(runs);
    expect(delivered).toHaveLength(2);
    expect(claimer.state).toBe('stopped');
  });
});

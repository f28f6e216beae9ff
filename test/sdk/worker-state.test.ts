import { describe, expect, it } from 'vitest';
import { WORKER_TRANSITIONS, type WorkerState } from '../../src/sdk/worker/evora-worker.js';
import { HELD_JOB_TRANSITIONS, HeldJobs, type HeldJob, type HeldJobState } from '../../src/sdk/worker/held-job.js';
import { ChangeWaiters, IllegalTransitionError, StateMachine, type Transitions } from '../../src/sdk/worker/state.js';
import { CONNECTION_TRANSITIONS, type ConnectionState } from '../../src/sdk/worker/work-connection.js';
import { leasedJob } from './fake-work-server.js';

/**
 * The worker's three lifecycles move only along their tables; anything else is an SDK bug
 * and throws. Each table is pinned here move by move (a change to one must change this
 * file too), and every pair of states is tried: the listed moves succeed, the others throw
 * and leave the state where it was.
 */

/** Every (from, to) pair of a table's states, and whether `allowed` lists it. */
function pairs<S extends string>(states: readonly S[], allowed: readonly string[]): { from: S; to: S; ok: boolean }[] {
  return states.flatMap((from) => states.map((to) => ({ from, to, ok: allowed.includes(`${from} -> ${to}`) })));
}

/** The moves a table allows, as "from -> to". */
function movesOf<S extends string>(table: Transitions<S>): string[] {
  return (Object.keys(table) as S[]).flatMap((from) => table[from].map((to) => `${from} -> ${to}`)).sort();
}

/** Tries every pair on a fresh StateMachine over the real table. */
function checkMachine<S extends string>(table: Transitions<S>, allowed: string[]) {
  expect(movesOf(table)).toEqual([...allowed].sort());
  const states = Object.keys(table) as S[];
  for (const { from, to, ok } of pairs(states, allowed)) {
    const changes: string[] = [];
    const m = new StateMachine<S>('thing', from, table, (a, b) => changes.push(`${a} -> ${b}`));
    if (ok) {
      m.to(to);
      expect(m.current).toBe(to);
      expect(changes).toEqual([`${from} -> ${to}`]);
    } else {
      expect(() => m.to(to), `${from} -> ${to}`).toThrow(IllegalTransitionError);
      expect(() => m.to(to)).toThrow(`thing: illegal transition ${from} -> ${to}`);
      expect(m.current).toBe(from);
      expect(changes).toEqual([]);
    }
  }
}

describe('the worker lifecycle table', () => {
  it('idle -> starting -> started -> stopping -> stopped; stop() from any state before stopping', () => {
    checkMachine<WorkerState>(WORKER_TRANSITIONS, [
      'idle -> starting',
      'idle -> stopping',
      'starting -> started',
      'starting -> stopping',
      'started -> stopping',
      'stopping -> stopped',
    ]);
  });
});

describe('the Work stream table', () => {
  it('idle -> connecting -> open -> draining -> closing -> stopped, backoff between streams', () => {
    checkMachine<ConnectionState>(CONNECTION_TRANSITIONS, [
      'idle -> connecting',
      'idle -> stopped',
      'connecting -> open',
      'connecting -> draining',
      'connecting -> backoff',
      'connecting -> closing',
      'connecting -> stopped',
      'open -> draining',
      'open -> backoff',
      'open -> closing',
      'open -> stopped',
      'draining -> backoff',
      'draining -> closing',
      'draining -> stopped',
      'backoff -> connecting',
      'backoff -> stopped',
      'closing -> stopped',
    ]);
  });
});

describe('the held job table', () => {
  const ALLOWED = [
    'running -> reporting',
    'running -> lost',
    'reporting -> awaitingAck',
    'reporting -> done',
    'reporting -> lost',
    'awaitingAck -> reporting',
    'awaitingAck -> done',
    'awaitingAck -> lost',
    'awaitingAck -> lostAwaitingAck',
    'lostAwaitingAck -> done',
    'lostAwaitingAck -> lost',
  ];
  /** How a new job reaches each state along allowed moves. */
  const PATH: Record<HeldJobState, HeldJobState[]> = {
    running: [],
    reporting: ['reporting'],
    awaitingAck: ['reporting', 'awaitingAck'],
    lostAwaitingAck: ['reporting', 'awaitingAck', 'lostAwaitingAck'],
    done: ['reporting', 'done'],
    lost: ['lost'],
  };

  function jobIn(state: HeldJobState) {
    let changes = 0;
    const jobs = new HeldJobs(() => changes++);
    const leased = leasedJob(0);
    const h = jobs.add(leased, leased.job!, 30_000, Date.now());
    for (const s of PATH[state]) h.to(s);
    return { jobs, h, changes: () => changes };
  }

  /** Where the table's indexes have the job, by state. */
  function indexed(jobs: HeldJobs, h: HeldJob) {
    return { running: jobs.running.get(h.job.id) === h, report: jobs.reportUnder(h.job.id, h.token) === h, held: jobs.held, reports: jobs.reportCount, leases: jobs.leases().length };
  }
  const INDEXED: Record<HeldJobState, ReturnType<typeof indexed>> = {
    running: { running: true, report: false, held: 1, reports: 0, leases: 1 },
    reporting: { running: false, report: true, held: 1, reports: 1, leases: 1 },
    awaitingAck: { running: false, report: true, held: 1, reports: 1, leases: 1 },
    // Its lease is lost: no slot, no lease to renew, but its ack is still awaited.
    lostAwaitingAck: { running: false, report: true, held: 0, reports: 1, leases: 0 },
    done: { running: false, report: false, held: 0, reports: 0, leases: 0 },
    lost: { running: false, report: false, held: 0, reports: 0, leases: 0 },
  };

  it('allows exactly the moves of its diagram, and the indexes follow each move', () => {
    expect(movesOf(HELD_JOB_TRANSITIONS)).toEqual([...ALLOWED].sort());
    const states = Object.keys(HELD_JOB_TRANSITIONS) as HeldJobState[];
    for (const { from, to, ok } of pairs(states, ALLOWED)) {
      const { jobs, h, changes } = jobIn(from);
      expect(indexed(jobs, h)).toEqual(INDEXED[from]);
      const before = changes();
      if (ok) {
        h.to(to);
        expect(h.state).toBe(to);
        expect(indexed(jobs, h), `${from} -> ${to}`).toEqual(INDEXED[to]);
        expect(changes()).toBe(before + 1);
      } else {
        expect(() => h.to(to), `${from} -> ${to}`).toThrow(IllegalTransitionError);
        expect(() => h.to(to)).toThrow(`job job-0: illegal transition ${from} -> ${to}`);
        expect(h.state).toBe(from);
        expect(indexed(jobs, h)).toEqual(INDEXED[from]);
        expect(changes()).toBe(before);
      }
    }
  });

  it("keeps one job's reports under several leases, oldest first, whichever settles first", () => {
    const jobs = new HeldJobs(() => undefined);
    const leases = ['a', 'b', 'c'].map((t) => ({ ...leasedJob(0), leaseToken: `token-${t}` }));
    const [a, b, c] = leases.map((l) => {
      const h = jobs.add(l, l.job!, 30_000, Date.now());
      h.to('reporting');
      return h;
    }) as [HeldJob, HeldJob, HeldJob];
    expect([...jobs.reports()]).toEqual([a, b, c]);
    expect([...jobs.reportingJobIds()]).toEqual(['job-0']);
    expect(jobs.reportCount).toBe(3);
    // An ack without a token answers the oldest; with one, its own.
    expect(jobs.reportAcked('job-0', '')).toBe(a);
    expect(jobs.reportAcked('job-0', 'token-b')).toBe(b);
    expect(jobs.reportAcked('job-0', 'token-x')).toBeUndefined();
    // The middle one settles, then the oldest: the newest is left, and then is the oldest.
    b.to('awaitingAck');
    b.to('done');
    expect([...jobs.reports()]).toEqual([a, c]);
    a.to('lost');
    expect([...jobs.reports()]).toEqual([c]);
    expect(jobs.reportAcked('job-0', '')).toBe(c);
    expect(jobs.leases()).toEqual([{ jobId: 'job-0', leaseToken: 'token-c' }]);
    c.to('done');
    expect([...jobs.reports()]).toEqual([]);
    expect({ held: jobs.held, reports: jobs.reportCount }).toEqual({ held: 0, reports: 0 });
  });
});

describe('ChangeWaiters', () => {
  it('resolves true once the condition holds after a change, false when the time runs out', async () => {
    const waiters = new ChangeWaiters();
    let n = 0;
    const reached = waiters.until(() => n >= 2, 60_000);
    n = 1;
    waiters.changed();
    n = 2;
    waiters.changed();
    expect(await reached).toBe(true);
    expect(await waiters.until(() => n >= 3, 0)).toBe(false);
    expect(await waiters.until(() => n >= 2, 0)).toBe(true);
  });
});

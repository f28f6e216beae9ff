import { describe, expect, it } from 'vitest';
import { SESSION_TRANSITIONS, WorkerSession, heldLease, type SessionMessage, type SessionState } from '../../src/dispatcher/session.js';
import { BrokenInvariantError, checkTransition, IllegalTransitionError } from '../../src/domain/state-machine.js';

/** A session of worker "w" on queue "q"; what it is sent is collected in `sent`. */
function setup(slots = 3) {
  const sent: SessionMessage[] = [];
  const session = new WorkerSession('w', ['q'], slots, (msg) => sent.push(msg));
  return { session, sent };
}

const STATES: SessionState[] = ['open', 'paused', 'draining', 'closed'];

describe('a worker session moves only along its transition table', () => {
  it('lists every move a session may make, and refuses every other', () => {
    const allowed: string[] = [];
    for (const from of STATES) {
      for (const to of STATES) {
        try {
          checkTransition('worker session', SESSION_TRANSITIONS, from, to);
          allowed.push(`${from} → ${to}`);
        } catch (err) {
          expect(err).toBeInstanceOf(IllegalTransitionError);
        }
      }
    }
    expect(allowed).toEqual([
      'open → paused',
      'open → draining',
      'open → closed',
      'paused → open',
      'paused → draining',
      'paused → closed',
      'draining → closed',
    ]);
  });

  it('open → paused → open: a paused session has no free slot, and resume gives them back', () => {
    const { session } = setup(3);
    expect(session.state).toBe('open');
    expect(session.free).toBe(3);
    expect(session.pause()).toBe(true);
    expect(session).toMatchObject({ state: 'paused', free: 0, deliverable: true });
    expect(session.pause()).toBe(false); // already paused
    expect(session.resume()).toBe(true);
    expect(session).toMatchObject({ state: 'open', free: 3 });
    expect(session.resume()).toBe(false); // not paused
  });

  it('draining is for good: pause and resume change nothing, and it only closes', () => {
    const { session } = setup(3);
    session.pause();
    expect(session.drain()).toBe(true);
    expect(session).toMatchObject({ state: 'draining', draining: true, free: 0, deliverable: false });
    expect(session.drain()).toBe(false);
    expect(session.resume()).toBe(false);
    expect(session.pause()).toBe(false);
    expect(session.state).toBe('draining');
    expect(session.close()).toBe(true);
    expect(session).toMatchObject({ state: 'closed', closed: true, draining: false, free: 0 });
  });

  it('a closed session never moves again: closing twice is one close, anything else is a bug', () => {
    const { session } = setup();
    expect(session.close()).toBe(true);
    expect(session.close()).toBe(false);
    expect(() => session.drain()).toThrow(IllegalTransitionError);
    expect(() => session.pause()).toThrow(BrokenInvariantError);
    expect(() => session.resume()).toThrow(BrokenInvariantError);
    expect(session.state).toBe('closed');
  });
});

describe('a session counts its slots', () => {
  it('free = slots − held − reserved, never below 0', () => {
    const { session } = setup(3);
    session.reserve();
    session.hold('a', heldLease('t1', Date.now() + 60_000, 30_000));
    expect(session).toMatchObject({ reserved: 1, free: 1 });
    session.reserve();
    expect(session.free).toBe(0);
    session.unreserve();
    session.unreserve();
    expect(session).toMatchObject({ reserved: 0, free: 2 });
  });

  it('refuses to reserve a slot that is not free, or to give back one never reserved', () => {
    const { session } = setup(1);
    session.reserve();
    expect(() => session.reserve()).toThrow(BrokenInvariantError);
    session.unreserve();
    expect(() => session.unreserve()).toThrow(BrokenInvariantError);
    session.pause();
    expect(() => session.reserve()).toThrow(BrokenInvariantError); // a paused session has no free slot
  });

  it('reserves and gives back several slots at once, never more than are free or reserved', () => {
    const { session } = setup(3);
    session.hold('a', heldLease('t1', Date.now() + 60_000, 30_000));
    expect(() => session.reserve(3)).toThrow(BrokenInvariantError);
    session.reserve(2);
    expect(session).toMatchObject({ reserved: 2, free: 0 });
    expect(() => session.unreserve(3)).toThrow(BrokenInvariantError);
    expect(() => session.reserve(0)).toThrow(BrokenInvariantError);
    session.unreserve(2);
    expect(session).toMatchObject({ reserved: 0, free: 2 });
  });

  it('a reservation is given back whatever the session became meanwhile', () => {
    const { session } = setup(2);
    session.reserve();
    session.close();
    session.unreserve();
    expect(session.reserved).toBe(0);
  });

  it('holds jobs only while open or paused', () => {
    const { session } = setup(2);
    session.pause();
    session.hold('a', heldLease('t1', Date.now() + 60_000, 30_000));
    session.drain();
    expect(() => session.hold('b', heldLease('t2', Date.now() + 60_000, 30_000))).toThrow(BrokenInvariantError);
    expect([...session.held.keys()]).toEqual(['a']);
  });

  it('drops a lease only with its own token: a late write of an earlier run keeps the current one', () => {
    const { session } = setup(2);
    session.hold('a', heldLease('second-run', Date.now() + 60_000, 30_000));
    expect(session.drop('a', 'first-run')).toBe(false);
    expect(session.held.size).toBe(1);
    expect(session.drop('a', 'second-run')).toBe(true);
    expect(session.drop('a', 'second-run')).toBe(false);
    expect(session.free).toBe(2);
  });
});

describe('a session holds a lease until it ends', () => {
  const T = 1_900_000_000_000;

  it('ends at its expiry when its worker stops renewing it', () => {
    const { session } = setup(2);
    session.hold('a', heldLease('t', T + 30_000, 30_000));
    expect(session.dropExpired(T + 30_000)).toEqual([]);
    expect(session.dropExpired(T + 30_001)).toEqual([{ id: 'a', token: 't' }]);
  });

  it('a renewal asked for during an outage (not written) holds it a lease length from the ask, and only with its own token', () => {
    const { session } = setup(2);
    session.hold('a', heldLease('t', T + 30_000, 30_000));
    expect(session.asked('a', 'stale', T + 50_000)).toBe(false);
    expect(session.asked('a', 't', T + 20_000)).toBe(true);
    expect(session.asked('a', 't', T + 10_000)).toBe(true); // an older ask moves nothing back
    expect(session.dropExpired(T + 50_000)).toEqual([]);
    expect(session.dropExpired(T + 50_001)).toEqual([{ id: 'a', token: 't' }]);
  });

  it('a written renewal later than the asks wins: the end is whichever is later', () => {
    const { session } = setup(2);
    session.hold('a', heldLease('t', T + 30_000, 30_000));
    session.asked('a', 't', T + 20_000);
    expect(session.extend('a', 't', T + 90_000)).toBe(true);
    expect(session.dropExpired(T + 90_000)).toEqual([]);
    expect(session.dropExpired(T + 90_001)).toEqual([{ id: 'a', token: 't' }]);
  });
});

describe('jobs on their way to the worker (inTransit: the server renews their leases for it)', () => {
  it('lists a pushed lease the worker has not named once it is a sixth of its length old, until maxAgeMs; never a named one', () => {
    const { session } = setup(3);
    session.hold('young', heldLease('t1', Date.now() + 30_000, 30_000));
    session.hold('named', heldLease('t2', Date.now() + 30_000, 30_000));
    session.hold('hello', heldLease('t3', Date.now() + 30_000, 30_000, true)); // named in the hello
    const pushed = session.held.get('young')!.pushedAt!;
    session.asked('named', 't2', performance.now());
    // A near worker's job, ending in milliseconds, costs no renewal.
    expect(session.inTransit(pushed + 1_000, 120_000)).toEqual([]);
    expect(session.inTransit(pushed + 5_000, 120_000)).toEqual([{ id: 'young', token: 't1' }]);
    expect(session.inTransit(pushed + 120_000, 120_000)).toEqual([]);
    // Awaited while unnamed and within maxAgeMs, young or not: renewals go on for it.
    expect(session.awaitsNaming(pushed + 1_000, 120_000)).toBe(true);
    expect(session.awaitsNaming(pushed + 120_000, 120_000)).toBe(false);
    session.asked('young', 't1', performance.now());
    expect(session.awaitsNaming(pushed + 1_000, 120_000)).toBe(false);
  });
});

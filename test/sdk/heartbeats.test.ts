import { afterEach, describe, expect, it, vi } from 'vitest';
import { Heartbeats } from '../../src/sdk/worker/heartbeats.js';
import type { HeldJob, HeldJobs } from '../../src/sdk/worker/held-job.js';
import type { TimerSet } from '../../src/sdk/worker/timers.js';
import type { ServerWelcome } from '../../src/gen/evora/v1/worker.js';

/**
 * Heartbeats' pairing of acks with send times (pure: fake clock, no server): a beat the
 * server could not write is never answered, and acks carry no id, so an unanswered beat's
 * send time must not stand for the later beats' answers.
 */

afterEach(() => {
  vi.useRealTimers();
});

function setup() {
  const job = { token: 't1', leaseMs: 30_000, leaseDeadline: 0, leaseExpiresAt: null } as unknown as HeldJob;
  let next: (() => void) | null = null;
  const timers = {
    after: (_ms: number, fn: () => void) => {
      next = fn;
      return null;
    },
    clear: () => null,
  } as unknown as TimerSet;
  const jobs = { running: new Map([['j', job]]), reportUnder: () => undefined, leases: () => [], shortestLeaseMs: () => 30_000 } as unknown as HeldJobs;
  const beats = new Heartbeats({
    timers,
    jobs,
    log: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined } as never,
    send: () => true,
    lastHeardAt: () => Date.now(),
    silent: () => undefined,
    cancelRequested: () => undefined,
  });
  const welcome = { leaseSeconds: 30, heartbeatIntervalMs: 10_000 } as ServerWelcome;
  return { job, beats, welcome, beatAgain: () => next?.() };
}

describe('Heartbeats', () => {
  it('an ack after beats that were never answered renews from the beat it answers, not from theirs', () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const { job, beats, welcome, beatAgain } = setup();
    beats.start(welcome); // a beat at 1,000,000 ms: its database away, never answered
    vi.setSystemTime(1_010_000);
    beatAgain(); // never answered either
    vi.setSystemTime(1_040_000);
    beatAgain(); // this one is
    vi.setSystemTime(1_040_050);
    beats.acked({ leases: [{ jobId: 'j', leaseToken: 't1', leaseExpiresAt: new Date(), cancelRequested: false }] }, false);
    // Paired by order alone it would take 1,000,000's send time: 1,030,000, already past.
    expect(job.leaseDeadline).toBe(1_040_000 + 30_000);
  });
});

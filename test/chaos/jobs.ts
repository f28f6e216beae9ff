import { Prng } from './options.js';

/**
 * The chaos run's jobs, decided before the run from the seed: which queue, which kind, how
 * long the handler takes. Shared by the submitter (what to submit), the worker (what the
 * handler does, read from the payload) and the checks (how many must end in the DLQ).
 * Must stay true: a job's content depends only on the seed and its index, so a retried
 * submit sends exactly the same job under the same idempotency key.
 */

/** The queues every job goes to (alternating) and every worker takes from. */
export const CHAOS_QUEUES = ['chaos-a', 'chaos-b'] as const;

/**
 * fast: a few ms; slow: seconds (held across faults, and what a SIGSTOPped worker is
 * caught holding); flaky: fails its first attempt, then completes; doomed: always fails,
 * with few attempts, and must end in the DLQ.
 */
export type ChaosJobKind = 'fast' | 'slow' | 'flaky' | 'doomed';

/** Attempts of every job but the doomed: enough that faults alone never exhaust them. */
export const MAX_ATTEMPTS = 25;
/** Attempts of a doomed job. */
export const DOOMED_MAX_ATTEMPTS = 3;

/** One planned job. */
export interface ChaosJob {
  index: number;
  key: string;
  queue: string;
  kind: ChaosJobKind;
  maxAttempts: number;
  payload: { i: number; ms: number };
}

/** How many doomed jobs a run of `jobs` has: known in advance, checked against the DLQ. */
export function doomedCount(jobs: number): number {
  return Math.max(1, Math.round(jobs / 400));
}

/** The whole plan of a run. */
export function jobsPlan(jobs: number, seed: number): ChaosJob[] {
  const rng = new Prng(seed).fork(0x10b5);
  const doomed = doomedCount(jobs);
  const doomedEvery = Math.floor(jobs / doomed);
  const out: ChaosJob[] = [];
  for (let i = 0; i < jobs; i++) {
    let kind: ChaosJobKind;
    if (i % doomedEvery === doomedEvery - 1 && out.filter((j) => j.kind === 'doomed').length < doomed) kind = 'doomed';
    else {
      const r = rng.next();
      kind = r < 0.15 ? 'slow' : r < 0.25 ? 'flaky' : 'fast';
    }
    const ms = kind === 'slow' ? rng.int(3000, 5000) : rng.int(0, 30);
    out.push({
      index: i,
      key: `chaos-${seed}-${i}`,
      queue: CHAOS_QUEUES[i % CHAOS_QUEUES.length]!,
      kind,
      maxAttempts: kind === 'doomed' ? DOOMED_MAX_ATTEMPTS : MAX_ATTEMPTS,
      payload: { i, ms },
    });
  }
  return out;
}

import { afterEach, beforeAll } from 'vitest';
import { Dispatcher, type SessionMessage } from '../../src/dispatcher/dispatcher.js';
import { silentLogger } from '../../src/logger.js';
import type { Store } from '../../src/store/store.js';
import type { Job } from '../../src/domain/job.js';
import { storeSetup } from './store-setup.js';

/**
 * A job as a claim returns it (RUNNING, attempt 1, a lease token), for tests of the
 * dispatcher's parts that run without a database.
 */
export function leasedJob(queue: string, n: number, workerId = 'w'): Job {
  const now = new Date();
  return {
    id: `00000000-0000-7000-8000-${String(n).padStart(12, '0')}`,
    queue,
    type: 'noop',
    payload: { n },
    state: 'RUNNING',
    priority: 0,
    runAt: now,
    attempt: 1,
    maxAttempts: 3,
    leaseToken: `token-${n}`,
    lockedUntil: new Date(now.getTime() + 30_000),
    workerId,
    idempotencyKey: null,
    result: null,
    lastError: null,
    cancelRequestedAt: null,
    createdAt: now,
    startedAt: now,
    finishedAt: null,
    backoff: null,
    timeoutSeconds: null,
    concurrencyKey: null,
    parentIds: null,
  };
}

/**
 * A dispatcher test file's parts: a store on a database of its own, and `open()`, which
 * makes a dispatcher with one session on one queue. The fallback poll is off (only what the
 * test does wakes a queue); every dispatcher is drained after each test, so none outlives it.
 * Call at the top of the file (it registers beforeAll/afterEach hooks).
 */
export function dispatcherTestSetup() {
  let store: Store | undefined;
  beforeAll(async () => {
    ({ store } = await storeSetup());
  });
  let stopAll: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    await Promise.all(stopAll.map((s) => s()));
    stopAll = [];
  });

  const storeOf = (): Store => {
    if (!store) throw new Error('dispatcherTestSetup: the store is made in beforeAll');
    return store;
  };

  /**
   * A dispatcher (claims recorded in `claims`) and a session of worker "w" on `queue`.
   * Pushed jobs are collected in `pushed` and passed to the hook set with `setOnJobs`, unless
   * `send` replaces the session's sender. `store` replaces the file's store (to slow or fail a call).
   * `localClock` replaces this process's clock (one that runs ahead of the database's).
   */
  async function open(opts: {
    queue: string;
    slots: number;
    claimCooldownMs?: number;
    send?: (msg: SessionMessage) => void;
    store?: Store;
    localClock?: () => number;
  }) {
    const claims: { asked: number; got: number }[] = [];
    const dispatcher = new Dispatcher({
      store: opts.store ?? storeOf(),
      logger: silentLogger(),
      pollIntervalMs: 3_600_000,
      claimCooldownMs: opts.claimCooldownMs ?? 0,
      observer: { claimed: (_q, asked, got) => claims.push({ asked, got }) },
      ...(opts.localClock ? { localClock: opts.localClock } : {}),
    });
    stopAll.push(() => dispatcher.drainAll(1000));
    const pushed: Job[] = [];
    let onJobs: (jobs: Job[]) => void = () => undefined;
    const session = await dispatcher.sessionOpen({
      workerId: 'w',
      queues: [opts.queue],
      slots: opts.slots,
      send:
        opts.send ??
        ((msg) => {
          if (msg.kind !== 'jobs') return;
          pushed.push(...msg.jobs);
          onJobs(msg.jobs);
        }),
    });
    return { dispatcher, session, claims, pushed, setOnJobs: (f: (jobs: Job[]) => void) => (onJobs = f) };
  }

  return {
    get store(): Store {
      return storeOf();
    },
    open,
  };
}

/**
 * The store with its claims held at a gate once `hold()` is called, until `release()`: so a
 * test can act while a claim is in flight (a real claim, run by the real store, just later).
 */
export function claimsGated(store: Store): { store: Store; hold(): void; release(): void } {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let holding = false;
  const gated = Object.create(store) as Store;
  gated.jobClaim = async (params) => {
    if (holding) await gate;
    return store.jobClaim(params);
  };
  return { store: gated, hold: () => (holding = true), release: () => release() };
}

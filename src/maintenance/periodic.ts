import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from '../logger.js';
import { Lifecycle, type LifecycleState } from './lifecycle.js';
import { isUnavailable } from '../domain/errors.js';

/** How a periodic service is paced. */
export interface PeriodicOptions {
  /** Time between the end of one tick and the start of the next. */
  intervalMs: number;
  /**
   * Upper bound of the random wait before the first tick, so that many processes started
   * together do not tick in lockstep. Default: 10% of the interval, at most 1 s; 0: none.
   */
  startJitterMaxMs?: number;
  /** Milliseconds, monotonic, for the failure log's throttle (TickFailureLog); tests pass their own. */
  clock?: () => number;
}

/** The default start jitter bound of a service ticking every `intervalMs`. */
export function startJitterDefaultMs(intervalMs: number): number {
  return Math.min(intervalMs * 0.1, 1000);
}

/**
 * The shape of every background service (sweeper, projector, elector, ...): after a small
 * random delay, one loop that calls `runOnce(signal)` every `intervalMs`. `start()` and
 * `stop()` are safe to call twice; `stop()` aborts the signal of the tick in progress, so
 * long work ends promptly, and resolves once that tick has returned. The lifecycle states
 * (`stopped → starting → running → stopping`) are checked (lifecycle.ts).
 *
 * A service does not know about leadership: the maintainer starts the leader-only ones when
 * this process is elected and stops them when it is not. Tests call `runOnce()` directly.
 */
export abstract class PeriodicService {
  private readonly lifecycle: Lifecycle;
  private controller: AbortController | null = null;
  private loop: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;
  protected readonly intervalMs: number;
  private readonly startJitterMaxMs: number;
  private readonly failures: TickFailureLog;

  protected constructor(
    readonly name: string,
    opts: PeriodicOptions,
    protected readonly logger: Logger,
  ) {
    this.lifecycle = new Lifecycle(name);
    this.intervalMs = opts.intervalMs;
    this.startJitterMaxMs = opts.startJitterMaxMs ?? startJitterDefaultMs(opts.intervalMs);
    this.failures = new TickFailureLog(name, logger, opts.clock);
  }

  /**
   * One unit of work. `signal` is aborted when the service is stopped: work that takes long
   * checks it and returns (or throws) early, leaving nothing half done that a later tick
   * cannot finish. Errors are logged (a failure that repeats tick after tick at error once
   * per TICK_FAILURE_LOG_INTERVAL_MS: TickFailureLog); the loop goes on at the next interval.
   */
  abstract runOnce(signal: AbortSignal): Promise<unknown>;

  /** Where the service is in its lifecycle. */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /**
   * Starts the loop; a no-op while starting or running. Starting a service that is still
   * stopping is a caller's bug and throws: await `stop()` first.
   */
  start(): void {
    const state = this.lifecycle.state;
    if (state === 'starting' || state === 'running') return;
    this.lifecycle.to('starting');
    const controller = new AbortController();
    this.controller = controller;
    this.loop = this.run(controller.signal);
  }

  /**
   * Stops the loop: aborts the tick in progress, waits for it to return, then releases
   * what the service holds (`onStop`, also when only `runOnce()` was used). Safe to call
   * twice; a second call while stopping waits for the same end.
   */
  stop(): Promise<void> {
    const state = this.lifecycle.state;
    if (state === 'stopping') return this.stopping!;
    if (state === 'stopped') return this.onStop();
    this.lifecycle.to('stopping');
    this.controller!.abort();
    const loop = this.loop;
    this.stopping = (async () => {
      try {
        await loop;
        await this.onStop();
      } finally {
        this.controller = null;
        this.loop = null;
        this.stopping = null;
        this.lifecycle.to('stopped');
      }
    })();
    return this.stopping;
  }

  /**
   * The signal of the running loop (the one its ticks get), or null when the loop is not
   * running. For work a service starts between its ticks (the elector's attempt when its
   * lock is lost), so that stop() ends that work too.
   */
  protected get loopSignal(): AbortSignal | null {
    return this.controller?.signal ?? null;
  }

  /** Releases resources after the loop has ended; must be idempotent. */
  protected async onStop(): Promise<void> {}

  private async run(signal: AbortSignal): Promise<void> {
    await abortableDelay(Math.random() * this.startJitterMaxMs, signal);
    if (signal.aborted) return;
    this.lifecycle.to('running');
    while (!signal.aborted) {
      try {
        await this.runOnce(signal);
        this.failures.succeeded();
      } catch (err) {
        this.failures.caught(err, signal);
      }
      await abortableDelay(this.intervalMs, signal);
    }
  }
}

/** How often a failure that repeats tick after tick is logged again at error; the ticks between are counted. */
export const TICK_FAILURE_LOG_INTERVAL_MS = 5 * 60_000;

/**
 * The error log of a periodic service's failing ticks (every PeriodicService has one), so
 * that a failure that is not an outage (a bug, a broken row, a permission missing) and
 * repeats every tick for hours is one line, not one a tick (a pruner fails each minute, a
 * scheduler each second).
 *
 * What must stay true:
 * - the first failed tick is logged at error with its error, and so is every failure that
 *   differs from the one before (another error class, code or message);
 * - the same failure again is logged at debug, and at error again (with its error, and how
 *   many came since the last line) once TICK_FAILURE_LOG_INTERVAL_MS has passed since that
 *   line, so a failure that lasts stays visible to an alert on error lines;
 * - the first tick that succeeds after failures logs one line at info: how many ticks
 *   failed, over how long. Outages and stops are the caller's to log (they never reach here)
 *   and neither end nor extend a run of failures.
 */
export class TickFailureLog {
  /** The failures since the last success: the last one's key, when its run began and was last logged at error, counts. */
  private run: { key: string; firstAt: number; loggedAt: number; failures: number; since: number } | null = null;

  /** `clock`: milliseconds, monotonic. */
  constructor(
    private readonly name: string,
    private readonly logger: Logger,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /**
   * A tick threw `err`: a stop (`signal` aborted) or an outage (logged once by the store; the
   * next tick retries) at debug, anything else as `failed`.
   */
  caught(err: unknown, signal: AbortSignal): void {
    if (signal.aborted) this.logger.debug({ err }, `${this.name}: tick ended by stop`);
    else if (isUnavailable(err)) this.logger.debug({ err }, `${this.name}: tick failed: database unavailable`);
    else this.failed(err);
  }

  /** A tick failed with `err` (not an outage, not a stop). */
  failed(err: unknown): void {
    const now = this.clock();
    const key = failureKey(err);
    const run = this.run;
    if (run === null) {
      this.run = { key, firstAt: now, loggedAt: now, failures: 1, since: 0 };
      this.logger.error({ err }, `${this.name}: tick failed`);
      return;
    }
    run.failures++;
    if (run.key === key && now - run.loggedAt < TICK_FAILURE_LOG_INTERVAL_MS) {
      run.since++;
      this.logger.debug({ err }, `${this.name}: tick failed again`);
      return;
    }
    const repeat = run.key === key;
    const more = run.since;
    Object.assign(run, { key, loggedAt: now, since: 0 });
    if (!repeat) this.logger.error({ err, failed_ticks: run.failures }, `${this.name}: tick failed`);
    else this.logger.error({ err, failed_ticks: run.failures, more_since_last_line: more }, `${this.name}: tick still failing (and ${more} more since the last line)`);
  }

  /** A tick succeeded: ends a run of failures with one line. */
  succeeded(): void {
    const run = this.run;
    if (run === null) return;
    this.run = null;
    const seconds = Math.round((this.clock() - run.firstAt) / 100) / 10;
    const ticks = run.failures === 1 ? '1 failed tick' : `${run.failures} failed ticks`;
    this.logger.info({ failed_ticks: run.failures, failing_seconds: seconds }, `${this.name}: ticks succeed again after ${ticks} over ${seconds} s`);
  }
}

/** What makes two failures the same one: the error's class, code and message. */
function failureKey(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  return `${err.name}\u0000${typeof code === 'string' || typeof code === 'number' ? code : ''}\u0000${err.message}`;
}

/** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).catch((err: unknown) => {
    if (!signal.aborted) throw err;
  });
}

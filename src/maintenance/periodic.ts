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

  protected constructor(
    readonly name: string,
    opts: PeriodicOptions,
    protected readonly logger: Logger,
  ) {
    this.lifecycle = new Lifecycle(name);
    this.intervalMs = opts.intervalMs;
    this.startJitterMaxMs = opts.startJitterMaxMs ?? startJitterDefaultMs(opts.intervalMs);
  }

  /**
   * One unit of work. `signal` is aborted when the service is stopped: work that takes long
   * checks it and returns (or throws) early, leaving nothing half done that a later tick
   * cannot finish. Errors are logged; the loop goes on at the next interval.
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
      } catch (err) {
        if (signal.aborted) this.logger.debug({ err }, `${this.name}: tick ended by stop`);
        // An outage is logged once by the store; the next tick retries.
        else if (isUnavailable(err)) this.logger.debug({ err }, `${this.name}: tick failed: database unavailable`);
        else this.logger.error({ err }, `${this.name}: tick failed`);
      }
      await abortableDelay(this.intervalMs, signal);
    }
  }
}

/** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).catch((err: unknown) => {
    if (!signal.aborted) throw err;
  });
}

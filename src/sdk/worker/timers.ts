/**
 * The longest delay setTimeout honours (about 24.8 days): Node fires a longer one, or a
 * non-finite one, after 1 ms (with a TimeoutOverflowWarning). grpc-js does no better with
 * such deadlines (see EvoraClient's unary calls).
 */
export const TIMER_MAX_MS = 2 ** 31 - 1;

/**
 * A timer for any delay the SDK takes from a caller (a stop or start timeout, a deadline):
 * NaN or Infinity means never (no timer is set), and a delay above TIMER_MAX_MS waits in
 * steps of at most TIMER_MAX_MS. What must stay true: it never fires before its delay has
 * passed, and cleared it never fires.
 */
export class LongTimer {
  private handle: NodeJS.Timeout | null = null;

  private constructor(ms: number, private readonly fn: () => void) {
    this.arm(Math.max(0, ms));
  }

  /** Runs `fn` after `ms`; null (no timer) when `ms` is NaN or Infinity. */
  static after(ms: number, fn: () => void): LongTimer | null {
    return ms < Infinity ? new LongTimer(ms, fn) : null;
  }

  /** Cancels it (a no-op once it fired). */
  clear(): void {
    if (this.handle) clearTimeout(this.handle);
    this.handle = null;
  }

  /** Lets the process exit while only this timer waits. */
  unref(): this {
    this.handle?.unref();
    return this;
  }

  private arm(ms: number): void {
    const step = Math.min(ms, TIMER_MAX_MS);
    this.handle = setTimeout(() => {
      if (ms > step) return this.arm(ms - step);
      this.handle = null;
      this.fn();
    }, step);
  }
}

/**
 * Timers bound to an AbortSignal: every timer a part of the worker sets goes through one of
 * these sets, so aborting the worker's lifetime signal clears them all at once and no timer
 * outlives stop(). One abort listener per set, however many timers it holds.
 */
export class TimerSet {
  private readonly timers = new Set<LongTimer>();

  constructor(private readonly signal: AbortSignal) {
    signal.addEventListener('abort', () => this.clearAll(), { once: true });
  }

  /**
   * Runs `fn` after `ms` unless the signal fires first; returns the handle for clear(). Null
   * once aborted, and for a delay of NaN or Infinity (never); see LongTimer.
   */
  after(ms: number, fn: () => void): LongTimer | null {
    if (this.signal.aborted) return null;
    const timer = LongTimer.after(ms, () => {
      this.timers.delete(timer!);
      fn();
    });
    if (timer) this.timers.add(timer);
    return timer;
  }

  /** Cancels one timer (null is a no-op); returns null, to reset the caller's handle. */
  clear(timer: LongTimer | null): null {
    if (timer) {
      timer.clear();
      this.timers.delete(timer);
    }
    return null;
  }

  private clearAll(): void {
    for (const t of this.timers) t.clear();
    this.timers.clear();
  }
}

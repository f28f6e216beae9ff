/**
 * Timers bound to an AbortSignal: every timer a part of the worker sets goes through one of
 * these sets, so aborting the worker's lifetime signal clears them all at once and no timer
 * outlives stop(). One abort listener per set, however many timers it holds.
 */
export class TimerSet {
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(private readonly signal: AbortSignal) {
    signal.addEventListener('abort', () => this.clearAll(), { once: true });
  }

  /** Runs `fn` after `ms` unless the signal fires first; returns the handle for clear(). Null once aborted. */
  after(ms: number, fn: () => void): NodeJS.Timeout | null {
    if (this.signal.aborted) return null;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
    return timer;
  }

  /** Cancels one timer (null is a no-op); returns null, to reset the caller's handle. */
  clear(timer: NodeJS.Timeout | null): null {
    if (timer) {
      clearTimeout(timer);
      this.timers.delete(timer);
    }
    return null;
  }

  private clearAll(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}

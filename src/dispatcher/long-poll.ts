/**
 * Unary claims (ClaimJobs with a wait) that found nothing and wait for work. A waiter ends
 * on a wake-up for one of its queues (a NOTIFY), on its timeout, or when any of its signals
 * aborts (the caller went away, or the dispatcher stopped). What must stay true: every wait
 * ends, and its timer and abort listeners go with it, so none outlives the dispatcher.
 */
export class LongPollWaiters {
  readonly #waiters = new Set<{ queues: ReadonlySet<string>; wake: () => void }>();

  /** How many claims are waiting now. */
  get size(): number {
    return this.#waiters.size;
  }

  /** Waits up to `ms` for a wake-up of one of `queues`; resolves at once if a signal has aborted. */
  wait(queues: ReadonlySet<string>, ms: number, signals: readonly (AbortSignal | undefined)[]): Promise<void> {
    const live = signals.filter((s): s is AbortSignal => s !== undefined);
    if (live.some((s) => s.aborted)) return Promise.resolve();
    return new Promise((resolve) => {
      const waiter = { queues, wake: done };
      const timer = setTimeout(done, ms);
      for (const s of live) s.addEventListener('abort', done, { once: true });
      this.#waiters.add(waiter);
      const waiters = this.#waiters;
      function done() {
        clearTimeout(timer);
        for (const s of live) s.removeEventListener('abort', done);
        waiters.delete(waiter);
        resolve();
      }
    });
  }

  /** Work may be claimable in this queue: its waiters try again. */
  wakeQueue(queue: string): void {
    for (const w of this.#waiters) if (w.queues.has(queue)) w.wake();
  }

  /** Work may be claimable anywhere (notifications may have been missed): every waiter tries again. */
  wakeAll(): void {
    for (const w of this.#waiters) w.wake();
  }
}

/**
 * Group commit for worker writes: items that arrive while a flush is in flight wait and go
 * together in the next one. An idle system writes each item at once (no added latency); a
 * busy one writes in batches as large as the load makes them. `settle` is told of each
 * batch once, after the flush that carried it has committed (or failed), so nothing is
 * acknowledged before it is durable. It is one call per batch, not a promise per item:
 * a busy server writes thousands of items a second.
 */
export class Batcher<I, O> {
  private queue: I[] = [];
  private flushing: Promise<void> | null = null;

  constructor(
    /** Writes a batch; returns one output per input, in order. */
    private readonly flushFn: (items: I[]) => Promise<O[]>,
    /**
     * Told each batch's outcome: its items and their outputs, or the error that failed the
     * whole batch. Must not throw (an error thrown here is lost for every item after it).
     */
    private readonly settle: (items: I[], outputs: O[] | null, err: unknown) => void,
    private readonly maxBatch = 1000,
    /**
     * Whether a failed batch's error may be one item's (a value the statement refused): then
     * each item is written again alone and settled alone, so one bad item does not fail the
     * others that happened to share its batch.
     */
    private readonly mayBeOneItems: (err: unknown) => boolean = () => false,
  ) {}

  /** Queues one item; `settle` hears of it once its batch has committed. */
  add(item: I): void {
    this.queue.push(item);
    if (!this.flushing) this.flushing = this.drain();
  }

  /** Resolves when everything queued so far has been written and settled. */
  async idle(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async drain(): Promise<void> {
    try {
      // Let the current tick's arrivals join the first batch.
      await new Promise<void>((r) => setImmediate(r));
      while (this.queue.length > 0) {
        let batch: I[];
        if (this.queue.length <= this.maxBatch) {
          batch = this.queue;
          this.queue = [];
        } else {
          batch = this.queue.splice(0, this.maxBatch);
        }
        await this.flushSettle(batch);
      }
    } finally {
      this.flushing = null;
    }
  }

  /** Writes one batch and settles it; a batch failed by one item's value, each item alone. */
  private async flushSettle(batch: I[]): Promise<void> {
    let outputs: O[];
    try {
      outputs = await this.flushFn(batch);
    } catch (err) {
      if (batch.length > 1 && this.mayBeOneItems(err)) {
        for (const item of batch) await this.flushSettle([item]);
      } else {
        this.settle(batch, null, err);
      }
      return;
    }
    this.settle(batch, outputs, undefined);
  }
}

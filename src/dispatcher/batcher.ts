/**
 * Group commit for worker writes: items that arrive while a flush is in flight wait and go
 * together in the next one. An idle system writes each item at once (no added latency); a
 * busy one writes in batches as large as the load makes them. Each caller's promise settles
 * only after the flush that carried its item has committed, so nothing is acknowledged
 * before it is durable.
 */
export class Batcher<I, O> {
  private queue: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];
  private flushing: Promise<void> | null = null;

  constructor(
    /** Writes a batch; returns one output per input, in order. */
    private readonly flushFn: (items: I[]) => Promise<O[]>,
    private readonly maxBatch = 1000,
  ) {}

  /** Queues one item; resolves with its output once its batch has committed. */
  add(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.flushing) this.flushing = this.drain();
    });
  }

  /** Resolves when everything queued so far has been written. */
  async idle(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async drain(): Promise<void> {
    // Let the current tick's arrivals join the first batch.
    await new Promise<void>((r) => setImmediate(r));
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      try {
        const outputs = await this.flushFn(batch.map((b) => b.item));
        batch.forEach((b, i) => b.resolve(outputs[i] as O));
      } catch (err) {
        for (const b of batch) b.reject(err);
      }
    }
    this.flushing = null;
  }
}

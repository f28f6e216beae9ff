/**
 * The one way messages are written to a server stream, honouring backpressure.
 *
 * A gRPC server stream is a Node Writable: `write()` returning false says its buffer is
 * full (the peer is not reading fast enough, and HTTP/2 flow control holds the rest). From
 * then on this writer keeps further messages in its own queue, in order, and hands them
 * over on `'drain'`; nothing is dropped, only delayed. `onBlocked` is told when the writer
 * blocks and when it flows again, so the caller can stop producing (the Work stream takes
 * no new jobs while blocked). The signal ends it: once aborted (the stream closed),
 * queued messages are discarded and later writes are ignored.
 *
 * States: flowing → blocked → flowing …; blocked → ending (end() asked while messages are
 * queued: they go first) → ended; flowing → ended (end()); any → closed (the signal
 * aborted, or grpc-js ended the stream itself, e.g. with an error status). A write after
 * end() is a bug and throws; a write after close is dropped (nobody is listening).
 */

/** The part of a server stream the writer uses (grpc-js's ServerDuplexStream has it). */
export interface WritableCall<T> {
  write(message: T): boolean;
  end(): void;
  once(event: 'drain', listener: () => void): unknown;
  removeListener(event: 'drain', listener: () => void): unknown;
  readonly writableEnded: boolean;
  readonly destroyed: boolean;
}

/** Where the writer is; see the class comment for the transitions. */
export type StreamWriterState = 'flowing' | 'blocked' | 'ending' | 'ended' | 'closed';

const TRANSITIONS: Record<StreamWriterState, readonly StreamWriterState[]> = {
  flowing: ['blocked', 'ended', 'closed'],
  blocked: ['flowing', 'ending', 'closed'],
  ending: ['ended', 'closed'],
  ended: ['closed'],
  closed: [],
};

/** Writes to one server stream in order, queueing while it is blocked; see the module comment. */
export class StreamWriter<T> {
  private current: StreamWriterState = 'flowing';
  private readonly queue: T[] = [];
  private readonly onDrain = () => this.flush();

  constructor(
    private readonly call: WritableCall<T>,
    private readonly opts: {
      /** Aborted when the stream closes: pending writes are discarded. */
      signal: AbortSignal;
      /** Told `true` when writes start to queue here, `false` when they flow again. */
      onBlocked?: (blocked: boolean) => void;
    },
  ) {
    if (opts.signal.aborted) this.current = 'closed';
    else opts.signal.addEventListener('abort', () => this.abort(), { once: true });
  }

  get state(): StreamWriterState {
    return this.current;
  }

  /** True while messages wait here for the stream's buffer to drain. */
  get blocked(): boolean {
    return this.current === 'blocked' || this.current === 'ending';
  }

  /** Messages waiting here (not counting the stream's own buffer, which is bounded). */
  get queued(): number {
    return this.queue.length;
  }

  /** Writes a message now, or queues it behind those already waiting. */
  write(message: T): void {
    switch (this.current) {
      case 'flowing':
        if (this.gone()) return;
        if (!this.call.write(message)) this.block();
        return;
      case 'blocked':
        this.queue.push(message);
        return;
      case 'ending':
      case 'ended':
        throw new Error(`stream writer: write after end (${this.current})`);
      case 'closed':
        return;
    }
  }

  /** Ends the stream once every queued message is written. Safe to call twice. */
  end(): void {
    switch (this.current) {
      case 'flowing':
        this.to('ended');
        if (!this.gone()) this.call.end();
        return;
      case 'blocked':
        this.to('ending');
        return;
      case 'ending':
      case 'ended':
      case 'closed':
        return;
    }
  }

  private block(): void {
    this.to('blocked');
    this.call.once('drain', this.onDrain);
    this.opts.onBlocked?.(true);
  }

  /** The stream's buffer drained: hand over what waits here, until it is full again. */
  private flush(): void {
    if (this.current !== 'blocked' && this.current !== 'ending') return;
    if (this.gone()) return;
    let sent = 0;
    while (sent < this.queue.length) {
      if (!this.call.write(this.queue[sent++] as T)) {
        this.queue.splice(0, sent);
        this.call.once('drain', this.onDrain);
        return;
      }
    }
    this.queue.length = 0;
    if (this.current === 'ending') {
      this.to('ended');
      this.call.end();
      return;
    }
    this.to('flowing');
    this.opts.onBlocked?.(false);
  }

  private abort(): void {
    if (this.current === 'closed') return;
    this.call.removeListener('drain', this.onDrain);
    this.queue.length = 0;
    this.to('closed');
  }

  /** True (and closed) when the stream takes no more writes: grpc-js ended or destroyed it. */
  private gone(): boolean {
    if (!this.call.writableEnded && !this.call.destroyed) return false;
    this.abort();
    return true;
  }

  private to(next: StreamWriterState): void {
    if (!TRANSITIONS[this.current].includes(next)) throw new Error(`stream writer: illegal transition ${this.current} -> ${next}`);
    this.current = next;
  }
}

import { checkTransition, type Transitions } from '../domain/state-machine.js';

/**
 * The one way messages are written to a server stream, honouring backpressure.
 *
 * A gRPC server stream is a Node Writable: `write()` returning false says its buffer is
 * full. grpc-js counts messages, not bytes: its buffer holds 16, so a burst of small
 * messages (a claim's jobs, one message each, to a worker that does not take batches)
 * fills it at once even when the peer reads as fast as it can. From then on this writer
 * keeps further messages in its own queue, in order, and hands them over on `'drain'`;
 * nothing is dropped, only delayed. Only when what waits here passes `highWaterMark` (in
 * `sizeOf` units: bytes for the Work stream) is the writer blocked and `onBlocked` told, so
 * the caller stops producing (the Work stream takes no new jobs and reads no requests);
 * it is told again when everything queued here has gone. So a peer that does not read
 * makes the server buffer at most about highWaterMark here (plus what the caller had
 * already committed to send), and a peer that reads is not stopped by every burst. The
 * signal ends it: once aborted (the stream closed), queued messages are discarded and
 * later writes are ignored.
 *
 * States: flowing → queueing (the stream's buffer is full: messages wait here) → flowing
 * (all handed over) …; queueing → blocked (past highWaterMark: the caller is told) →
 * flowing; queueing or blocked → ending (end() asked while messages are queued: they go
 * first) → ended; flowing → ended (end()); any → closed (the signal aborted, or grpc-js
 * ended the stream itself, e.g. with an error status). A write after end() is a bug and
 * throws; a write after close is dropped (nobody is listening).
 */

/** The part of a server stream the writer uses (grpc-js's ServerDuplexStream has it). */
export interface WritableCall<T> {
  write(message: T, callback?: (err?: Error | null) => void): boolean;
  end(): void;
  once(event: 'drain', listener: () => void): unknown;
  removeListener(event: 'drain', listener: () => void): unknown;
  readonly writableEnded: boolean;
  readonly destroyed: boolean;
}

/** Where the writer is; see the class comment for the transitions. */
export type StreamWriterState = 'flowing' | 'queueing' | 'blocked' | 'ending' | 'ended' | 'closed';

const TRANSITIONS: Transitions<StreamWriterState> = {
  flowing: ['queueing', 'ended', 'closed'],
  queueing: ['blocked', 'flowing', 'ending', 'closed'],
  blocked: ['flowing', 'ending', 'closed'],
  ending: ['ended', 'closed'],
  ended: ['closed'],
  closed: [],
};

/** Options of a StreamWriter. */
export interface StreamWriterOptions<T> {
  /** Aborted when the stream closes: pending writes are discarded. */
  signal: AbortSignal;
  /** Told `true` when the writer blocks (past highWaterMark), `false` when it flows again. */
  onBlocked?: (blocked: boolean) => void;
  /** How much a queued message weighs (default 1: highWaterMark counts messages). */
  sizeOf?: (message: T) => number;
  /** The writer blocks once more than this waits here (default 0: at the first queued message). */
  highWaterMark?: number;
}

/** Writes to one server stream in order, queueing while it is blocked; see the module comment. */
export class StreamWriter<T> {
  private current: StreamWriterState = 'flowing';
  private readonly queue: T[] = [];
  /** What the queued messages weigh, in sizeOf units. */
  private weight = 0;
  /** Messages the stream has sent on so far (each write's callback: the transport took it). */
  private handed = 0;
  private readonly onWritten = () => {
    this.handed++;
  };
  private readonly onDrain = () => this.flush();
  private readonly sizeOf: (message: T) => number;
  private readonly highWaterMark: number;

  constructor(
    private readonly call: WritableCall<T>,
    private readonly opts: StreamWriterOptions<T>,
  ) {
    this.sizeOf = opts.sizeOf ?? (() => 1);
    this.highWaterMark = opts.highWaterMark ?? 0;
    if (opts.signal.aborted) this.current = 'closed';
    else opts.signal.addEventListener('abort', () => this.abort(), { once: true });
  }

  get state(): StreamWriterState {
    return this.current;
  }

  /** True while the caller should produce nothing new: past highWaterMark, or ending. */
  get blocked(): boolean {
    return this.current === 'blocked' || this.current === 'ending';
  }

  /**
   * How many messages the stream has sent on so far (their write callbacks ran). On a stream
   * backed up by HTTP/2 flow control it grows only as the peer reads, one message at a time,
   * so an unchanged count says the peer read nothing meanwhile.
   */
  get handedOver(): number {
    return this.handed;
  }

  /** Messages waiting here (not counting the stream's own buffer, which is bounded). */
  get queued(): number {
    return this.queue.length;
  }

  /** What the messages waiting here weigh, in sizeOf units. */
  get queuedSize(): number {
    return this.weight;
  }

  /** Writes a message now, or queues it behind those already waiting. */
  write(message: T): void {
    switch (this.current) {
      case 'flowing':
        if (this.gone()) return;
        if (!this.call.write(message, this.onWritten)) {
          this.to('queueing');
          this.call.once('drain', this.onDrain);
        }
        return;
      case 'queueing':
        this.enqueue(message);
        if (this.weight > this.highWaterMark) {
          this.to('blocked');
          this.opts.onBlocked?.(true);
        }
        return;
      case 'blocked':
        this.enqueue(message);
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
      case 'queueing':
      case 'blocked':
        this.to('ending');
        return;
      case 'ending':
      case 'ended':
      case 'closed':
        return;
    }
  }

  private enqueue(message: T): void {
    this.queue.push(message);
    this.weight += this.sizeOf(message);
  }

  /** The stream's buffer drained: hand over what waits here, until it is full again. */
  private flush(): void {
    if (this.current !== 'queueing' && this.current !== 'blocked' && this.current !== 'ending') return;
    if (this.gone()) return;
    let sent = 0;
    while (sent < this.queue.length) {
      const message = this.queue[sent++] as T;
      this.weight -= this.sizeOf(message);
      if (!this.call.write(message, this.onWritten)) {
        this.queue.splice(0, sent);
        this.call.once('drain', this.onDrain);
        return;
      }
    }
    this.queue.length = 0;
    this.weight = 0;
    if (this.current === 'ending') {
      this.to('ended');
      this.call.end();
      return;
    }
    const wasBlocked = this.current === 'blocked';
    this.to('flowing');
    if (wasBlocked) this.opts.onBlocked?.(false);
  }

  private abort(): void {
    if (this.current === 'closed') return;
    this.call.removeListener('drain', this.onDrain);
    this.queue.length = 0;
    this.weight = 0;
    this.to('closed');
  }

  /** True (and closed) when the stream takes no more writes: grpc-js ended or destroyed it. */
  private gone(): boolean {
    if (!this.call.writableEnded && !this.call.destroyed) return false;
    this.abort();
    return true;
  }

  private to(next: StreamWriterState): void {
    this.current = checkTransition('stream writer', TRANSITIONS, this.current, next);
  }
}

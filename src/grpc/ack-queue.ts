import type { AckResult } from '../domain/codes.js';
import type { ServerAck, WorkResponse } from '../gen/evora/v1/worker.js';
import { ACK_RESULT_TO_PB } from './convert.js';

/**
 * The acks of one Work stream on their way out. To a worker that accepts batches, the acks
 * that become ready in the same tick (the reports one statement committed) go as one
 * `acks` message on setImmediate; to any other, each goes at once as `ack`. Every ack
 * carries its result code; `accepted` is `result === accepted`, for older workers.
 *
 * Whoever writes anything else to the stream calls flush() first, so the worker sees the
 * acks and the other messages in the order they were made.
 */
export class AckQueue {
  private queued: ServerAck[] = [];

  constructor(
    /** Writes one message to the stream. */
    private readonly write: (out: WorkResponse) => void,
    /** The worker said hello.accepts_batches. */
    private readonly batches: () => boolean,
    /** Runs the deferred flush (so its errors are handled like the stream's others). */
    private readonly later: (flush: () => void) => void,
  ) {}

  /**
   * Answers one report (named by its job and the lease token it carried) with a result.
   * `databaseUnavailable`: a retry_later because the database cannot be reached (the worker
   * then resends for as long as the outage lasts: ServerAck.database_unavailable).
   */
  add(jobId: string, leaseToken: string, result: AckResult, reason: string, databaseUnavailable = false): void {
    const ack: ServerAck = {
      jobId,
      leaseToken,
      accepted: result === 'accepted',
      reason,
      result: ACK_RESULT_TO_PB[result],
      databaseUnavailable: result === 'retry_later' && databaseUnavailable,
    };
    if (!this.batches()) return this.write({ msg: { $case: 'ack', value: ack } });
    this.queued.push(ack);
    if (this.queued.length === 1) setImmediate(() => this.later(() => this.flush()));
  }

  /** Writes the acks queued so far (one `ack`, or one `acks` message). */
  flush(): void {
    if (this.queued.length === 0) return;
    const acks = this.queued;
    this.queued = [];
    if (acks.length === 1) this.write({ msg: { $case: 'ack', value: acks[0] as ServerAck } });
    else this.write({ msg: { $case: 'acks', value: { acks } } });
  }
}

import { LEASE_LOST_TEXT, type AckResult } from '../domain/codes.js';
import type { Job, JobWritten, JsonObject, LeaseRef, LeaseWriteOutcome } from '../domain/job.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import { isValueRefused } from '../store/availability.js';
import { Batcher } from './batcher.js';
import type { ProgressWrites } from './progress-writes.js';
import type { WorkerSession } from './session.js';

/** Most reports of one kind in one statement. */
const WRITE_BATCH_MAX = 1000;

/** The answer to one complete, fail or snooze. */
export interface WriteAck<J extends JobWritten = JobWritten> {
  jobId: string;
  accepted: boolean;
  /** What became of the write; `accepted` is `result === 'accepted'`. */
  result: AckResult;
  /** Words for people and logs; empty when accepted. */
  reason: string;
  /** The job as the write left it (a completion reports JobWritten; fail and snooze the whole Job). */
  job?: J;
}

/**
 * A completion as a worker reports it: its result, or the result's JSON text as the worker
 * sent it (checked, stored as it is; then `result` is null and not read).
 */
export type CompleteWrite = LeaseRef & { result: JsonObject | null; resultJson?: string };
/** A failure as a worker reports it. */
export type FailWrite = LeaseRef & { error: string; retryable: boolean; retryAt: Date | null };
/** A snooze as a worker reports it. */
export type SnoozeWrite = LeaseRef & { runAt: Date | null };

/** The kinds of worker write. */
export type WriteKind = 'complete' | 'fail' | 'snooze';

/**
 * Who hears the answers of worker writes. A Work stream has one for all its reports (so a
 * report costs no closure or promise of its own); the promise-returning calls make one each.
 */
export interface WriteListener<W extends LeaseRef = LeaseRef, J extends JobWritten = JobWritten> {
  /** The write's statement committed (the write was accepted or refused): its answer. */
  written(request: WriteRequest<W, J>, ack: WriteAck<J>): void;
  /** The write's statement failed: nothing is known of the write (the worker may send it again). */
  failed(request: WriteRequest<W, J>, err: unknown): void;
}

/** One worker write on its way through group commit. Its listener is told of it exactly once. */
export interface WriteRequest<W extends LeaseRef = LeaseRef, J extends JobWritten = JobWritten> {
  readonly kind: WriteKind;
  /** The write as the store takes it. */
  readonly write: W;
  /** The session whose slot the lease occupies (null for a write without a stream). */
  readonly session: WorkerSession | null;
  readonly listener: WriteListener<W, J>;
}

/** A complete, fail or snooze, as WorkerWrites.add takes it. */
export type WorkerWriteRequest =
  | (WriteRequest<CompleteWrite, JobWritten> & { kind: 'complete' })
  | (WriteRequest<FailWrite, Job> & { kind: 'fail' })
  | (WriteRequest<SnoozeWrite, Job> & { kind: 'snooze' });

/**
 * The workers' complete, fail and snooze reports, each kind through a Batcher (group
 * commit: one statement for the reports that arrive together). What must stay true: a
 * report is answered only after the statement that carries it has committed, and every
 * report is answered exactly once (its listener hears `written` or `failed`). A statement
 * that PostgreSQL fails for a value it carries is written again report by report, so a
 * bad report fails alone, never the other workers' reports that shared its batch. `committed`
 * (the dispatcher: the slot frees, the observer hears of it) runs before the listener.
 */
export class WorkerWrites {
  private readonly completions: Batcher<WriteRequest<CompleteWrite, JobWritten>, LeaseWriteOutcome<JobWritten>>;
  private readonly failures: Batcher<WriteRequest<FailWrite, Job>, LeaseWriteOutcome>;
  private readonly snoozes: Batcher<WriteRequest<SnoozeWrite, Job>, LeaseWriteOutcome>;
  /** Fails and snoozes waiting for their lease's progress report to be written first. */
  private readonly afterProgress = new Set<Promise<void>>();

  constructor(
    store: Store,
    private readonly logger: Logger,
    /** Told of each write whose statement committed, before its listener. */
    private readonly committed: (request: WriteRequest, ack: WriteAck) => void,
    /** The coalesced progress reports, settled before a lease's own end (see add). */
    private readonly progress: ProgressWrites,
  ) {
    this.completions = new Batcher(
      (batch) => store.jobCompleteMany({ completions: batch.map((r) => r.write) }),
      (batch, outcomes, err) => this.settle(batch, outcomes, err),
      WRITE_BATCH_MAX,
      isValueRefused,
    );
    this.failures = new Batcher(
      (batch) => store.jobFailMany({ failures: batch.map((r) => r.write) }),
      (batch, outcomes, err) => this.settle(batch, outcomes, err),
      WRITE_BATCH_MAX,
      isValueRefused,
    );
    this.snoozes = new Batcher(
      (batch) => store.jobSnoozeMany({ snoozes: batch.map((r) => r.write) }),
      (batch, outcomes, err) => this.settle(batch, outcomes, err),
      WRITE_BATCH_MAX,
      isValueRefused,
    );
  }

  /**
   * Completes, fails (retry, DLQ, or CANCELLED if an operator asked) or snoozes a job; its
   * listener hears after the commit. A progress report of the same lease still waiting to be
   * written is dropped by a completion (the job is done), and written (or its flush awaited)
   * before a fail or snooze, so its checkpoint reaches the next attempt: the cost of that one
   * statement falls only on a job that reported progress within the last second.
   */
  add(request: WorkerWriteRequest): void {
    if (request.kind === 'complete') {
      this.progress.drop(request.write);
    } else {
      const first = this.progress.settleFirst(request.write);
      if (first) {
        const after = first.then(() => {
          this.afterProgress.delete(after);
          this.addNow(request);
        });
        this.afterProgress.add(after);
        return;
      }
    }
    this.addNow(request);
  }

  private addNow(request: WorkerWriteRequest): void {
    switch (request.kind) {
      case 'complete':
        return this.completions.add(request);
      case 'fail':
        return this.failures.add(request);
      case 'snooze':
        return this.snoozes.add(request);
    }
  }

  /** Resolves when every write queued so far has been written and answered. */
  async idle(): Promise<void> {
    await Promise.all(this.afterProgress);
    await Promise.all([this.completions.idle(), this.failures.idle(), this.snoozes.idle()]);
  }

  /**
   * Answers each write of a batch. One item's trouble (a bug in `committed` or a listener)
   * is that item's alone: it is logged and the item is told `failed` if it was not told yet.
   */
  private settle<W extends LeaseRef, J extends JobWritten>(
    batch: WriteRequest<W, J>[],
    outcomes: LeaseWriteOutcome<J>[] | null,
    err: unknown,
  ): void {
    for (let i = 0; i < batch.length; i++) {
      const request = batch[i] as WriteRequest<W, J>;
      const kind = request.kind;
      const outcome = outcomes?.[i];
      let told = false;
      try {
        if (!outcome) {
          told = true;
          request.listener.failed(request, err ?? new Error(`${kind}: the store returned no outcome for job ${request.write.id}`));
          continue;
        }
        const ack = answer(request.write, outcome);
        this.committed(request as WriteRequest, ack);
        told = true;
        request.listener.written(request, ack);
      } catch (bug) {
        this.logger.error({ err: bug, job_id: request.write.id, write: kind }, 'answering a worker write failed');
        if (!told) {
          try {
            request.listener.failed(request, bug);
          } catch (again) {
            this.logger.error({ err: again, job_id: request.write.id, write: kind }, 'answering a worker write failed');
          }
        }
      }
    }
  }
}

function answer<J extends JobWritten>(lease: LeaseRef, outcome: LeaseWriteOutcome<J>): WriteAck<J> {
  const jobId = lease.id;
  return outcome.accepted
    ? { jobId, accepted: true, result: 'accepted', reason: '', job: outcome.job }
    : { jobId, accepted: false, result: 'lease_lost', reason: LEASE_LOST_REASON };
}

const LEASE_LOST_REASON = `lease lost: ${LEASE_LOST_TEXT.expired}`;

import { LEASE_LOST_TEXT, type AckResult } from '../domain/codes.js';
import type { Job, JobWritten, JsonObject, LeaseRef, LeaseWriteOutcome } from '../domain/job.js';
import type { Store } from '../store/store.js';
import { Batcher } from './batcher.js';

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

/** A completion as a worker reports it. */
export type CompleteWrite = LeaseRef & { result: JsonObject | null };
/** A failure as a worker reports it. */
export type FailWrite = LeaseRef & { error: string; retryable: boolean; retryAt: Date | null };
/** A snooze as a worker reports it. */
export type SnoozeWrite = LeaseRef & { runAt: Date | null };

/**
 * The workers' complete, fail and snooze reports, each kind through a Batcher (group
 * commit: one statement for the reports that arrive together). What must stay true: a
 * report is answered only after the statement that carries it has committed.
 */
export class WorkerWrites {
  private readonly completions: Batcher<CompleteWrite, LeaseWriteOutcome<JobWritten>>;
  private readonly failures: Batcher<FailWrite, LeaseWriteOutcome>;
  private readonly snoozes: Batcher<SnoozeWrite, LeaseWriteOutcome>;

  constructor(store: Store) {
    this.completions = new Batcher((completions) => store.jobCompleteMany({ completions }));
    this.failures = new Batcher((failures) => store.jobFailMany({ failures }));
    this.snoozes = new Batcher((snoozes) => store.jobSnoozeMany({ snoozes }));
  }

  /** Completes a job; resolves after the commit. */
  async complete(p: CompleteWrite): Promise<WriteAck<JobWritten>> {
    return this.answer(p, await this.completions.add(p));
  }

  /** Fails a job (retry, DLQ, or CANCELLED if an operator asked); resolves after the commit. */
  async fail(p: FailWrite): Promise<WriteAck<Job>> {
    return this.answer(p, await this.failures.add(p));
  }

  /** Snoozes a job until runAt; resolves after the commit. */
  async snooze(p: SnoozeWrite): Promise<WriteAck<Job>> {
    return this.answer(p, await this.snoozes.add(p));
  }

  /** Resolves when every write queued so far has been written. */
  async idle(): Promise<void> {
    await Promise.all([this.completions.idle(), this.failures.idle(), this.snoozes.idle()]);
  }

  private answer<J extends JobWritten>(lease: LeaseRef, outcome: LeaseWriteOutcome<J>): WriteAck<J> {
    const jobId = lease.id;
    return outcome.accepted
      ? { jobId, accepted: true, result: 'accepted', reason: '', job: outcome.job }
      : { jobId, accepted: false, result: 'lease_lost', reason: `lease lost: ${LEASE_LOST_TEXT.expired}` };
  }
}

import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import type { SweepResult } from '../domain/job.js';
import { PeriodicService } from './periodic.js';

/** Which sweep moved a batch: leases that expired, or attempts past their job's timeout. */
export type SweepCause = 'lease_expired' | 'timed_out';

/** What one sweep did, summed over its batches. */
export interface SweepSummary {
  requeued: number;
  deadLettered: number;
  cancelled: number;
}

/**
 * The visibility sweeper (leader-only: the maintainer runs it on the elected process): it
 * returns RUNNING jobs whose lease expired to PENDING (after backoff), or to DLQ once their
 * attempts are used up, in batches until none are left. Workers that died or hung lose
 * their jobs this way. Each batch commits on its own, so a sweep stopped between batches
 * leaves the rest to the next one. The same tick fails RUNNING jobs past their attempt
 * timeout (SubmitJobRequest.timeout; job-sweep-timed-out.sql), so a job's timeout is
 * enforced within about one interval. It also runs the dependencies' repair pass
 * (job-waiting-repair.sql): a WAITING job whose parents have all completed is released.
 */
export class Sweeper extends PeriodicService {
  private readonly batchSize: number;

  constructor(
    private readonly opts: {
      store: Store;
      logger: Logger;
      intervalMs?: number;
      /** See PeriodicOptions.startJitterMaxMs. */
      startJitterMaxMs?: number;
      batchSize?: number;
      /** Called with each batch's jobs after it commits (for metrics and logs), and which sweep moved them. */
      onSwept?: (result: SweepResult, cause: SweepCause) => void;
    },
  ) {
    super(
      'sweeper',
      { intervalMs: opts.intervalMs ?? 1000, startJitterMaxMs: opts.startJitterMaxMs },
      opts.logger.child({ component: 'sweeper' }),
    );
    this.batchSize = opts.batchSize ?? 500;
  }

  /**
   * One sweep, batch after batch until a short one, or until `signal` aborts. `now` lets
   * tests move time instead of sleeping.
   */
  async runOnce(signal: AbortSignal, params: { now?: Date } = {}): Promise<SweepSummary> {
    const summary: SweepSummary = { requeued: 0, deadLettered: 0, cancelled: 0 };
    const sweeps: [SweepCause, (limit: number) => Promise<SweepResult>][] = [
      ['lease_expired', (limit) => this.opts.store.jobSweepExpired({ limit, now: params.now })],
      ['timed_out', (limit) => this.opts.store.jobSweepTimedOut({ limit, now: params.now })],
    ];
    for (const [cause, sweep] of sweeps) {
      while (!signal.aborted) {
        const batch = await sweep(this.batchSize);
        summary.requeued += batch.requeued;
        summary.deadLettered += batch.deadLettered;
        summary.cancelled += batch.cancelled;
        if (batch.jobs.length > 0) this.opts.onSwept?.(batch, cause);
        if (batch.jobs.length < this.batchSize) break;
      }
    }
    while (!signal.aborted) {
      const released = await this.opts.store.jobWaitingRepair({ limit: this.batchSize, now: params.now });
      if (released.length > 0) this.logger.warn({ jobs: released.length }, 'released WAITING jobs whose parents had all completed');
      if (released.length < this.batchSize) break;
    }
    if (summary.requeued + summary.deadLettered + summary.cancelled > 0) this.logger.debug(summary, 'sweep done');
    return summary;
  }
}

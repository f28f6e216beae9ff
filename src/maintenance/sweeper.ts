import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import type { SweepResult } from '../domain/job.js';
import { PeriodicService } from './periodic.js';

/** What one sweep did, summed over its batches. */
export interface SweepSummary {
  /** False when this process is not the leader and did nothing. */
  ran: boolean;
  requeued: number;
  deadLettered: number;
  cancelled: number;
}

/**
 * The visibility sweeper: on the elected leader only, it returns RUNNING jobs whose lease
 * expired to PENDING (after backoff), or to DLQ once their attempts are used up, in
 * batches until none are left. Workers that died or hung lose their jobs this way.
 */
export class Sweeper extends PeriodicService {
  private readonly batchSize: number;

  constructor(
    private readonly opts: {
      store: Store;
      isLeader: () => boolean;
      logger: Logger;
      intervalMs?: number;
      batchSize?: number;
      /** Called with each batch's jobs after it commits (for the dispatcher and metrics). */
      onSwept?: (result: SweepResult) => void;
    },
  ) {
    super('sweeper', opts.intervalMs ?? 1000, opts.logger.child({ component: 'sweeper' }));
    this.batchSize = opts.batchSize ?? 500;
  }

  /** One sweep; `now` lets tests move time instead of sleeping. */
  async runOnce(params: { now?: Date } = {}): Promise<SweepSummary> {
    const summary: SweepSummary = { ran: false, requeued: 0, deadLettered: 0, cancelled: 0 };
    if (!this.opts.isLeader()) return summary;
    summary.ran = true;
    for (;;) {
      const batch = await this.opts.store.jobSweepExpired({ limit: this.batchSize, now: params.now });
      summary.requeued += batch.requeued;
      summary.deadLettered += batch.deadLettered;
      summary.cancelled += batch.cancelled;
      if (batch.jobs.length > 0) this.opts.onSwept?.(batch);
      if (batch.jobs.length < this.batchSize) break;
    }
    if (summary.requeued + summary.deadLettered + summary.cancelled > 0) this.logger.debug(summary, 'sweep done');
    return summary;
  }
}

import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import type { SweepResult } from '../domain/job.js';
import { PeriodicService } from './periodic.js';
import { isUnavailable } from '../domain/errors.js';

/** Which sweep moved a batch: leases that expired, or attempts past their job's timeout. */
export type SweepCause = 'lease_expired' | 'timed_out';

/** What one sweep did, summed over its batches. */
export interface SweepSummary {
  requeued: number;
  deadLettered: number;
  cancelled: number;
}

/**
 * Readings of the database's clock this much further apart than the interval say the
 * sweeper (its process, or the database) was stalled.
 */
const TICK_GAP_MS = 5000;

/**
 * The visibility sweeper (leader-only: the maintainer runs it on the elected process): it
 * returns RUNNING jobs whose lease expired to PENDING (after backoff), or to DLQ once their
 * attempts are used up, in batches until none are left. Workers that died or hung lose
 * their jobs this way. Each batch commits on its own, so a sweep stopped between batches
 * leaves the rest to the next one. The same tick fails RUNNING jobs past their attempt
 * timeout (SubmitJobRequest.timeout; job-sweep-timed-out.sql), so a job's timeout is
 * enforced within about one interval. It also runs the dependencies' repair pass
 * (job-waiting-repair.sql): a WAITING job whose parents have all completed is released.
 *
 * A lease is swept only once the sweeper has reached the database without a break for its
 * queue's lease length, counted on the database's clock (job-sweep-expired.sql): after a
 * tick failed for an outage, after a stall (of this process or of the database), and after
 * it starts (a new leader does not know what came before), every lease gets one lease
 * length for its worker to renew it. A database outage
 * longer than a lease therefore does not requeue the jobs of workers that are alive and
 * renewing; the dispatcher holds their leases meanwhile too (Dispatcher.dropExpiredLeases).
 * The price: a dead worker's jobs wait up to one more lease length after such an event.
 */
export class Sweeper extends PeriodicService {
  private readonly batchSize: number;
  /**
   * Since when (the database's clock) every reading of that clock has come within the
   * interval plus TICK_GAP_MS of the one before; null: the next reading starts a new run.
   */
  private reachableSince: Date | null = null;
  /** The database's clock at the last reading (Store.dbNow, or a test's `now`). */
  private lastReadingAt: Date | null = null;

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
   * tests move time instead of sleeping (it stands for the database's clock too).
   */
  async runOnce(signal: AbortSignal, params: { now?: Date } = {}): Promise<SweepSummary> {
    try {
      return await this.sweep(signal, params.now);
    } catch (err) {
      // Only an outage breaks the run: a failure of the tick's own (a bug, a bad row) must
      // not hold every expired lease back for good.
      if (isUnavailable(err)) this.reachableSince = null;
      throw err;
    }
  }

  /**
   * Reads the database's clock (a test's `now` stands for it) before a batch of the lease
   * sweep, and returns that batch's bound. A reading more than the interval plus TICK_GAP_MS
   * after the one before (this process or the database stalled) starts a new run, as a
   * failed tick does. Measured on the database's clock, the clock the leases are judged by,
   * so a server clock apart from it, or a step of it, moves nothing.
   */
  private async reachable(now: Date | undefined): Promise<{ since: Date; tickAt: Date; maxGapSeconds: number }> {
    const at = now ?? (await this.opts.store.dbNow());
    const maxGapMs = this.intervalMs + TICK_GAP_MS;
    const gapMs = this.lastReadingAt === null ? 0 : at.getTime() - this.lastReadingAt.getTime();
    if (this.reachableSince !== null && gapMs > maxGapMs) {
      this.logger.info({ gap_ms: gapMs }, 'the sweeper did not reach the database for a while: each expired lease gets one lease length to be renewed before it is swept');
      this.reachableSince = null;
    }
    this.lastReadingAt = at;
    this.reachableSince ??= at;
    return { since: this.reachableSince, tickAt: at, maxGapSeconds: maxGapMs / 1000 };
  }

  /** A new leadership term: the next tick starts a new run of reachable ticks. */
  protected override async onStop(): Promise<void> {
    this.reachableSince = null;
    this.lastReadingAt = null;
  }

  private async sweep(signal: AbortSignal, now: Date | undefined): Promise<SweepSummary> {
    const summary: SweepSummary = { requeued: 0, deadLettered: 0, cancelled: 0 };
    const sweeps: [SweepCause, (limit: number) => Promise<SweepResult>][] = [
      ['lease_expired', async (limit) => this.opts.store.jobSweepExpired({ limit, now, reachable: await this.reachable(now) })],
      ['timed_out', (limit) => this.opts.store.jobSweepTimedOut({ limit, now })],
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
      const released = await this.opts.store.jobWaitingRepair({ limit: this.batchSize, now });
      if (released.length > 0) this.logger.warn({ jobs: released.length }, 'released WAITING jobs whose parents had all completed');
      if (released.length < this.batchSize) break;
    }
    if (summary.requeued + summary.deadLettered + summary.cancelled > 0) this.logger.debug(summary, 'sweep done');
    return summary;
  }
}

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

/** A tick that starts this much later than its interval says the sweeper's process was stalled. */
const TICK_GAP_MS = 2000;

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
 * queue's lease length (job-sweep-expired.sql): after a tick failed for an outage,
 * after a stall of this process, and after it starts (a new leader does not know what came
 * before), every lease gets one lease length for its worker to renew it. A database outage
 * longer than a lease therefore does not requeue the jobs of workers that are alive and
 * renewing; the dispatcher holds their leases meanwhile too (Dispatcher.dropExpiredLeases).
 * The price: a dead worker's jobs wait up to one more lease length after such an event.
 */
export class Sweeper extends PeriodicService {
  private readonly batchSize: number;
  /**
   * Since when (Date.now() clock) every tick has reached the database, with no gap between
   * ticks longer than the interval plus TICK_GAP_MS; null when the next tick starts a new run.
   */
  private reachableSince: number | null = null;
  /** When the last tick ended (Date.now() clock), whether it succeeded or not. */
  private lastTickEndedAt: number | null = null;

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
   * tests move time instead of sleeping (the time the database has been reachable counts up
   * to it).
   */
  async runOnce(signal: AbortSignal, params: { now?: Date } = {}): Promise<SweepSummary> {
    const startedAt = Date.now();
    const gapMs = this.lastTickEndedAt === null ? 0 : startedAt - this.lastTickEndedAt;
    if (gapMs > this.intervalMs + TICK_GAP_MS && this.reachableSince !== null) {
      this.logger.info({ gap_ms: gapMs }, 'the sweeper was stalled: each expired lease gets one lease length to be renewed before it is swept');
      this.reachableSince = null;
    }
    const since = (this.reachableSince ??= startedAt);
    try {
      return await this.sweep(signal, params.now, ((params.now?.getTime() ?? startedAt) - since) / 1000);
    } catch (err) {
      // Only an outage breaks the run: a failure of the tick's own (a bug, a bad row) must
      // not hold every expired lease back for good.
      if (isUnavailable(err)) this.reachableSince = null;
      throw err;
    } finally {
      this.lastTickEndedAt = Date.now();
    }
  }

  /** A new leadership term: the next tick starts a new run of reachable ticks. */
  protected override async onStop(): Promise<void> {
    this.reachableSince = null;
    this.lastTickEndedAt = null;
  }

  private async sweep(signal: AbortSignal, now: Date | undefined, reachableSeconds: number): Promise<SweepSummary> {
    const summary: SweepSummary = { requeued: 0, deadLettered: 0, cancelled: 0 };
    const sweeps: [SweepCause, (limit: number) => Promise<SweepResult>][] = [
      ['lease_expired', (limit) => this.opts.store.jobSweepExpired({ limit, now, reachableSeconds })],
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

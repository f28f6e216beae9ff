import type { Logger } from '../logger.js';
import type { ScheduleFireResult, Store } from '../store/store.js';
import { abortableDelay, PeriodicService } from './periodic.js';

/**
 * The scheduler (leader-only: the maintainer runs it on the elected process, like the
 * sweeper): submits the jobs of recurring schedules when their fire times come.
 *
 * Each tick waits until the earliest next_run_at it learnt (by the database's clock, at
 * most `maxSleepMs`, or less when `wake()` is called: the server calls it when a schedule
 * is created, changed or resumed on any process, through evora_schedule_changed), then runs
 * passes of the store's scheduleFireDue until a short one. A pass locks due schedules
 * (SKIP LOCKED), submits their jobs with the per-fire idempotency key and moves them on in
 * one transaction, so a fire gets one job even when two schedulers overlap during a change
 * of leader; the misfire policy (domain/schedule.ts) decides what a late pass submits.
 *
 * What must stay true: the loop's own pause between ticks is zero (the tick sleeps), and
 * every sleep ends when the signal aborts.
 */
export class Scheduler extends PeriodicService {
  private readonly batchSize: number;
  private readonly maxSleepMs: number;
  /** When the next schedule is due, in this process's clock (null: none is). */
  private dueAtLocalMs: number | null = null;
  /** The next tick looks at once (the first one, and after wake()). */
  private lookNow = true;
  /** Ends the current sleep early. */
  private wakeUp: AbortController = new AbortController();

  constructor(
    private readonly opts: {
      store: Store;
      logger: Logger;
      /** Longest sleep between passes (a schedule changed where no NOTIFY reached us is seen by then); default 1 s. */
      maxSleepMs?: number;
      /** See PeriodicOptions.startJitterMaxMs; default 0 (a per-second schedule must not wait). */
      startJitterMaxMs?: number;
      /** Schedules locked per pass; default 100. */
      batchSize?: number;
      /** Told of every pass that submitted jobs, after it commits (metrics, logs). */
      onFired?: (result: ScheduleFireResult) => void;
    },
  ) {
    super('scheduler', { intervalMs: 0, startJitterMaxMs: opts.startJitterMaxMs ?? 0 }, opts.logger.child({ component: 'scheduler' }));
    this.batchSize = opts.batchSize ?? 100;
    this.maxSleepMs = opts.maxSleepMs ?? 1000;
  }

  /** Ends the current wait: a schedule changed, so the next due time may be earlier. */
  wake(): void {
    this.lookNow = true;
    this.wakeUp.abort();
  }

  /**
   * One tick: unless `now` is given (tests), waits until the next schedule is due (at most
   * maxSleepMs) or wake(); then fires every due schedule, pass after pass until a short
   * one or until `signal` aborts. Returns the passes' results.
   */
  async runOnce(signal: AbortSignal, params: { now?: Date } = {}): Promise<ScheduleFireResult[]> {
    if (params.now === undefined) await this.sleepUntilDue(signal);
    // Unknown until a pass succeeds: a failing pass (the database away) is retried after
    // maxSleepMs, not at once.
    this.dueAtLocalMs = null;
    const passes: ScheduleFireResult[] = [];
    while (!signal.aborted) {
      const pass = await this.opts.store.scheduleFireDue({ limit: this.batchSize, now: params.now });
      passes.push(pass);
      if (pass.fired.length > 0) {
        this.opts.onFired?.(pass);
        for (const f of pass.fired) {
          if (f.error !== null) {
            this.logger.warn(
              { schedule: f.name, error: f.error, next_run_at: f.nextRunAt },
              `schedule ${f.name} could not fire: ${f.error}; tried again at ${f.nextRunAt.toISOString()} (fix it with UpsertSchedule)`,
            );
            continue;
          }
          this.logger.debug({ schedule: f.name, jobs: f.jobs.length, skipped: f.skipped, next_run_at: f.nextRunAt }, 'schedule fired');
        }
      }
      const localNow = Date.now();
      this.dueAtLocalMs = pass.nextDueAt === null ? null : localNow + (pass.nextDueAt.getTime() - pass.clock.getTime());
      if (pass.fired.length < this.batchSize) break;
    }
    return passes;
  }

  private async sleepUntilDue(signal: AbortSignal): Promise<void> {
    const wake = new AbortController();
    this.wakeUp = wake;
    if (this.lookNow) {
      this.lookNow = false;
      return;
    }
    // A couple of milliseconds late rather than early: an early pass finds nothing due.
    const waitMs = this.dueAtLocalMs === null ? this.maxSleepMs : Math.min(this.maxSleepMs, this.dueAtLocalMs - Date.now() + 2);
    if (waitMs <= 0) return;
    await abortableDelay(waitMs, AbortSignal.any([signal, wake.signal]));
  }
}

import { unavailable } from '../domain/errors.js';
import type { LeaseRef, ProgressReport } from '../domain/job.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import { isValueRefused } from '../store/availability.js';

/** Who hears what became of a progress report. */
export interface ProgressListener {
  /** The statement that carried the report committed: `accepted` = the lease was current. */
  written(accepted: boolean): void;
  /** The statement failed: nothing is known of the report. */
  failed(err: unknown): void;
}

/** The latest report of one lease waiting to be written, and everyone waiting on it. */
export interface PendingProgress {
  report: ProgressReport;
  listeners: ProgressListener[];
}

/** How long reports are gathered before they are written (and so the most writes per job per second). */
export const PROGRESS_FLUSH_MS = 1000;

/**
 * Progress reports, coalesced (docs/api.md "Progress and checkpoints"). A worker may report
 * as often as it likes; this keeps only the latest report per lease and writes all that wait
 * in one statement every intervalMs, so a chatty worker costs at most one write per job per
 * interval. What must stay true:
 * - a later report replaces an earlier one of the same lease, but a checkpoint the later one
 *   lacks is taken from the earlier (a checkpoint is never lost to a mere percentage);
 * - every listener hears exactly once: `written` with the flush's outcome for its lease, or
 *   `failed`; a report dropped by `drop` (the job completed) is answered `written(true)`:
 *   it was current and the completion supersedes it;
 * - `settleFirst` writes a lease's waiting report, or waits for the flush that carries it,
 *   before the fail or snooze of that lease is written (so its checkpoint reaches the next
 *   attempt: a fail that committed first would leave the job PENDING, and the report fenced out);
 * - the store's fencing (job-progress-many.sql) keeps a report from touching a job whose
 *   lease is no longer the report's.
 */
export class ProgressWrites {
  private pending = new Map<string, PendingProgress>();
  /** The leases in the flush being written, and that flush. */
  private inFlight: { keys: Set<string>; done: Promise<void> } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  /** close() ran (server shutdown): no timer is started again; later reports are refused UNAVAILABLE. */
  private closed = false;

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    private readonly intervalMs = PROGRESS_FLUSH_MS,
  ) {}

  /** Keeps `report` as its lease's latest; it is written with the next flush. */
  add(report: ProgressReport, listener: ProgressListener): void {
    if (this.closed) {
      tellAll([listener], this.logger, (l) => l.failed(unavailable('the server is shutting down; progress is not stored')));
      return;
    }
    const key = leaseKey(report);
    const before = this.pending.get(key);
    if (before) {
      before.report = { ...report, checkpoint: report.checkpoint ?? before.report.checkpoint };
      before.listeners.push(listener);
    } else {
      this.pending.set(key, { report, listeners: [listener] });
    }
    if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = null;
        void this.flush();
      }, this.intervalMs);
      this.timer.unref();
    }
  }

  /** Removes and returns the lease's waiting report (null when none waits). */
  take(lease: LeaseRef): PendingProgress | null {
    const key = leaseKey(lease);
    const p = this.pending.get(key);
    if (!p) return null;
    this.pending.delete(key);
    return p;
  }

  /** Forgets the lease's waiting report (its job completed); its listeners hear written(true). */
  drop(lease: LeaseRef): void {
    const p = this.take(lease);
    if (p) tellAll(p.listeners, this.logger, (l) => l.written(true));
  }

  /**
   * Before a lease's fail or snooze: writes its waiting report now, or returns the flush in
   * flight that carries it; null when there is nothing to wait for. Never rejects.
   */
  settleFirst(lease: LeaseRef): Promise<void> | null {
    const waiting = this.take(lease);
    if (waiting) return this.write([waiting]);
    if (this.inFlight?.keys.has(leaseKey(lease))) return this.inFlight.done;
    return null;
  }

  /** Writes everything that waits now, and resolves when it and any flush in flight are done. */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.pending.size === 0) return;
    const keys = new Set(this.pending.keys());
    const batch = [...this.pending.values()];
    this.pending = new Map();
    const done = this.write(batch);
    this.inFlight = { keys, done };
    this.flushing = done.finally(() => {
      this.flushing = null;
      this.inFlight = null;
    });
    await this.flushing;
  }

  /** Stops the timer for good and writes what waits (shutdown). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.flush();
  }

  /**
   * One statement for `batch`; each listener hears its lease's outcome. A statement that
   * PostgreSQL fails for a value it carries is written again report by report, so a bad
   * report fails alone (see Batcher).
   */
  private async write(batch: PendingProgress[]): Promise<void> {
    let outcomes: { accepted: boolean }[];
    try {
      outcomes = await this.store.jobProgressMany({ reports: batch.map((p) => p.report) });
    } catch (err) {
      if (batch.length > 1 && isValueRefused(err)) {
        for (const p of batch) await this.write([p]);
        return;
      }
      for (const p of batch) tellAll(p.listeners, this.logger, (l) => l.failed(err));
      return;
    }
    batch.forEach((p, i) => {
      const accepted = outcomes[i]?.accepted === true;
      tellAll(p.listeners, this.logger, (l) => l.written(accepted));
    });
  }
}

/** Tells each listener; one listener's bug is logged and does not stop the others. */
function tellAll(listeners: ProgressListener[], logger: Logger, tell: (l: ProgressListener) => void): void {
  for (const l of listeners) {
    try {
      tell(l);
    } catch (err) {
      logger.error({ err }, 'answering a progress report failed');
    }
  }
}

function leaseKey(l: LeaseRef): string {
  return `${l.id} ${l.token}`;
}

import type { PruneCount } from '../domain/job.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import { abortableDelay, PeriodicService } from './periodic.js';

/** What one pruner run did: the jobs it deleted per queue and state, summed over its batches. */
export interface PruneSummary {
  /** Jobs deleted in all. */
  pruned: number;
  /** Batches run (the last one short, unless the run was stopped). */
  batches: number;
  /** Non-zero counts per queue and state. */
  counts: PruneCount[];
  /** Worker sessions of dead servers deleted (stale rows of evora.worker_sessions). */
  staleSessions: number;
  /** Audit events past the audit retention deleted (0 when they are kept forever). */
  auditEvents: number;
}

/**
 * Retention (leader-only: the maintainer runs it on the elected process, like the sweeper):
 * deletes COMPLETED, CANCELLED and DLQ jobs once their queue's retention for that state has
 * passed since they finished (`evora.queues.*_retention_seconds`; null = kept forever).
 * Each run also deletes the worker sessions of servers that stopped recording them (died)
 * more than 30 s ago (0014_worker_sessions.sql), and, when `auditRetentionDays` is set,
 * the audit events older than that (sql/audit-prune.sql; never one younger than 30 days,
 * which the database itself refuses: 0022_audit_retention.sql).
 *
 * What must stay true:
 * - only finished jobs are deleted, and never one whose events telemetry has not projected
 *   (the statement, sql/job-prune.sql, checks both); no event is written, so the telemetry
 *   counts are left exactly as they were;
 * - no long locks: each batch is one short statement over at most `batchSize` rows (SKIP
 *   LOCKED, by primary key; audit events, which nothing updates, oldest first by their time
 *   index) that commits on its own; the run goes on while batches come back
 *   full, pausing `batchPauseMs` between them so that the queue's own statements get the
 *   database in between, and stops between batches when its signal aborts (the rest is left
 *   to the next run, here or on the next leader).
 */
export class Pruner extends PeriodicService {
  private readonly batchSize: number;
  private readonly batchPauseMs: number;

  constructor(
    private readonly opts: {
      store: Store;
      logger: Logger;
      /** Time between runs; default one minute. */
      intervalMs?: number;
      /** See PeriodicOptions.startJitterMaxMs. */
      startJitterMaxMs?: number;
      /** Jobs (or audit events) deleted per statement (default 1,000; at least 1). */
      batchSize?: number;
      /** Audit events older than this many days are deleted; null (default): kept forever. */
      auditRetentionDays?: number | null;
      /** Pause between two batches of one run (default 10 ms; 0: none). */
      batchPauseMs?: number;
      /** Called with each batch's counts after it commits (metrics). */
      onPruned?: (counts: PruneCount[]) => void;
    },
  ) {
    super(
      'pruner',
      { intervalMs: opts.intervalMs ?? 60_000, startJitterMaxMs: opts.startJitterMaxMs },
      opts.logger.child({ component: 'pruner' }),
    );
    // At least 1: a batch of 0 would never come back short.
    this.batchSize = Math.max(1, opts.batchSize ?? 1000);
    this.batchPauseMs = opts.batchPauseMs ?? 10;
  }

  /**
   * One run: the stale worker sessions, then jobs and then audit events, each batch after
   * batch until a short one, or until `signal` aborts. `now` lets tests make jobs and events
   * old instead of waiting.
   */
  async runOnce(signal: AbortSignal, params: { now?: Date } = {}): Promise<PruneSummary> {
    const summary: PruneSummary = { pruned: 0, batches: 0, counts: [], staleSessions: 0, auditEvents: 0 };
    // Dead servers' worker sessions (not seen for 30 s): one short statement.
    summary.staleSessions = await this.opts.store.workerSessionPrune({ now: params.now });
    if (summary.staleSessions > 0) this.logger.info({ sessions: summary.staleSessions }, 'worker sessions of servers not heard from deleted');
    const byKey = new Map<string, PruneCount>();
    const jobs = await this.inBatches(signal, async () => {
      const counts = await this.opts.store.jobPrune({ limit: this.batchSize, now: params.now });
      let n = 0;
      for (const c of counts) {
        n += c.jobs;
        const key = `${c.queue}\u0000${c.state}`;
        const sum = byKey.get(key);
        if (sum) sum.jobs += c.jobs;
        else byKey.set(key, { ...c });
      }
      if (n > 0) this.opts.onPruned?.(counts);
      return n;
    });
    summary.pruned = jobs.deleted;
    summary.batches = jobs.batches;
    summary.counts = [...byKey.values()];
    if (summary.pruned > 0) this.logger.info({ pruned: summary.pruned, batches: summary.batches, counts: summary.counts }, 'finished jobs past their retention deleted');
    const retentionDays = this.opts.auditRetentionDays ?? null;
    if (retentionDays !== null && !signal.aborted) {
      const audit = await this.inBatches(signal, () => this.opts.store.auditPrune({ retentionDays, limit: this.batchSize, now: params.now }));
      summary.auditEvents = audit.deleted;
      if (audit.deleted > 0) {
        this.logger.info({ events: audit.deleted, batches: audit.batches, retention_days: retentionDays }, 'audit events past their retention deleted');
      }
    }
    return summary;
  }

  /**
   * Runs `batch` (one short statement that deletes at most batchSize rows and returns how
   * many) until it comes back short or `signal` aborts, pausing batchPauseMs in between.
   */
  private async inBatches(signal: AbortSignal, batch: () => Promise<number>): Promise<{ deleted: number; batches: number }> {
    let deleted = 0;
    let batches = 0;
    while (!signal.aborted) {
      const n = await batch();
      batches++;
      deleted += n;
      if (n < this.batchSize) break;
      if (this.batchPauseMs > 0) await abortableDelay(this.batchPauseMs, signal);
    }
    return { deleted, batches };
  }
}

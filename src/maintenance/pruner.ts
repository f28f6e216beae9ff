import type { PruneCount } from '../domain/job.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import { abortableDelay, PeriodicService, TickFailureLog } from './periodic.js';

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
  /** The parts of the run that failed (the others ran all the same), in run order. */
  failed: PrunePart[];
}

/**
 * The parts of a pruner run. Each runs whatever happened to the one before it: a failure is
 * logged under its own part (a TickFailureLog each, so one part failing every minute does
 * not hide another's failure) and the next part runs.
 */
export type PrunePart = 'worker sessions' | 'jobs' | 'audit events';

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
 * - the parts (stale worker sessions, jobs, audit events) fail alone: one that fails is
 *   logged (at error, throttled per part: TickFailureLog; an outage at debug, as any tick's)
 *   and listed in the summary's `failed`, and the parts after it still run, so a job prune
 *   that fails every minute does not stop audit retention, nor the other way round;
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
  /** Each part's failure log. */
  private readonly partFailures: Record<PrunePart, TickFailureLog>;

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
      /** Called with each audit batch's count of deleted events after it commits, when not 0 (metrics). */
      onAuditPruned?: (events: number) => void;
    },
  ) {
    super(
      'pruner',
      { intervalMs: opts.intervalMs ?? 60_000, startJitterMaxMs: opts.startJitterMaxMs },
      opts.logger.child({ component: 'pruner' }),
    );
    const log = (part: PrunePart) => new TickFailureLog(`pruner (${part})`, this.logger);
    this.partFailures = { 'worker sessions': log('worker sessions'), jobs: log('jobs'), 'audit events': log('audit events') };
    // At least 1: a batch of 0 would never come back short.
    this.batchSize = Math.max(1, opts.batchSize ?? 1000);
    this.batchPauseMs = opts.batchPauseMs ?? 10;
  }

  /**
   * One run: the stale worker sessions, then jobs and then audit events, each batch after
   * batch until a short one, or until `signal` aborts. A part that fails is logged and listed
   * in `failed`, and the next part runs (the run itself does not throw). `now` lets tests
   * make jobs and events old instead of waiting.
   */
  async runOnce(signal: AbortSignal, params: { now?: Date } = {}): Promise<PruneSummary> {
    const summary: PruneSummary = { pruned: 0, batches: 0, counts: [], staleSessions: 0, auditEvents: 0, failed: [] };
    // Dead servers' worker sessions (not seen for 30 s): one short statement.
    await this.part('worker sessions', summary, signal, async () => {
      summary.staleSessions = await this.opts.store.workerSessionPrune({ now: params.now });
      if (summary.staleSessions > 0) this.logger.info({ sessions: summary.staleSessions }, 'worker sessions of servers not heard from deleted');
    });
    await this.part('jobs', summary, signal, async () => {
      const byKey = new Map<string, PruneCount>();
      try {
        await this.inBatches(signal, async () => {
          const counts = await this.opts.store.jobPrune({ limit: this.batchSize, now: params.now });
          summary.batches++;
          let n = 0;
          for (const c of counts) {
            n += c.jobs;
            const key = `${c.queue}\u0000${c.state}`;
            const sum = byKey.get(key);
            if (sum) sum.jobs += c.jobs;
            else byKey.set(key, { ...c });
          }
          summary.pruned += n;
          if (n > 0) this.opts.onPruned?.(counts);
          return n;
        });
      } finally {
        // What the batches that committed deleted, also when a later one failed.
        summary.counts = [...byKey.values()];
        if (summary.pruned > 0) this.logger.info({ pruned: summary.pruned, batches: summary.batches, counts: summary.counts }, 'finished jobs past their retention deleted');
      }
    });
    const retentionDays = this.opts.auditRetentionDays ?? null;
    if (retentionDays !== null && !signal.aborted) {
      await this.part('audit events', summary, signal, async () => {
        let batches = 0;
        try {
          await this.inBatches(signal, async () => {
            const n = await this.opts.store.auditPrune({ retentionDays, limit: this.batchSize, now: params.now });
            batches++;
            summary.auditEvents += n;
            if (n > 0) this.opts.onAuditPruned?.(n);
            return n;
          });
        } finally {
          if (summary.auditEvents > 0) {
            this.logger.info({ events: summary.auditEvents, batches, retention_days: retentionDays }, 'audit events past their retention deleted');
          }
        }
      });
    }
    return summary;
  }

  /**
   * Runs one part of a run: a failure is logged in that part's TickFailureLog (an outage or
   * a stop at debug, as PeriodicService logs a tick's: TickFailureLog.caught) and added to
   * `summary.failed`, never thrown, so the parts after it run.
   */
  private async part(name: PrunePart, summary: PruneSummary, signal: AbortSignal, work: () => Promise<void>): Promise<void> {
    const failures = this.partFailures[name];
    try {
      await work();
      failures.succeeded();
    } catch (err) {
      summary.failed.push(name);
      failures.caught(err, signal);
    }
  }

  /**
   * Runs `batch` (one short statement that deletes at most batchSize rows and returns how
   * many) until it comes back short or `signal` aborts, pausing batchPauseMs in between.
   */
  private async inBatches(signal: AbortSignal, batch: () => Promise<number>): Promise<void> {
    while (!signal.aborted) {
      const n = await batch();
      if (n < this.batchSize) break;
      if (this.batchPauseMs > 0) await abortableDelay(this.batchPauseMs, signal);
    }
  }
}

import { performance } from 'node:perf_hooks';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import { projectEvents, type TelemetrySink } from '../telemetry/projection.js';
import { PeriodicService } from './periodic.js';

/** What one projector run did. */
export interface ProjectorRun {
  batches: number;
  events: number;
}

/**
 * The projector (leader-only: the maintainer runs it on the elected process): it moves
 * outbox events into the telemetry sink, a batch at a time, until the outbox is empty.
 *
 * Exactly once, through any crash (docs/telemetry.md):
 * 1. open a batch: the batch a crash left open, with exactly its rows, or a new one;
 * 2. apply it to the sink, which changes each document at most once per batch id;
 * 3. close it: delete its rows from the outbox.
 * A crash before 3 makes the next run apply the same batch again, which changes only the
 * documents the first attempt did not reach. A stop (the signal) is handled like a crash:
 * a batch it interrupts stays open and the next run, here or on the next leader, finishes it.
 *
 * Retention: after its batches, a run whose last retention pass is `retentionIntervalMs`
 * old runs the sink's (`retain`): bounded passes until a short one, as the pruner does, so
 * minute buckets older than every read and bookkeeping no longer needed do not grow forever.
 */
export class Projector extends PeriodicService {
  private readonly batchSize: number;
  private sinkReady = false;

  constructor(
    private readonly opts: {
      store: Store;
      sink: TelemetrySink;
      logger: Logger;
      intervalMs?: number;
      /** See PeriodicOptions.startJitterMaxMs. */
      startJitterMaxMs?: number;
      /**
       * About this many events per batch (whole outbox rows; default 20,000). A batch costs
       * about nine statements and three commits whatever its size, so a burst should take
       * few: in a 100,000-job burn-down, 2,000 made 748 projector statements, 20,000 made 97.
       */
      batchSize?: number;
      /** Time between two retention runs (default one minute: buckets age by the minute). */
      retentionIntervalMs?: number;
      /** Rows or documents one retention pass deletes at most (default 1,000; at least 1). */
      retentionBatchSize?: number;
    },
  ) {
    super(
      'projector',
      { intervalMs: opts.intervalMs ?? 1000, startJitterMaxMs: opts.startJitterMaxMs },
      opts.logger.child({ component: 'projector' }),
    );
    this.batchSize = opts.batchSize ?? 20_000;
    this.retentionIntervalMs = opts.retentionIntervalMs ?? 60_000;
    this.retentionBatchSize = Math.max(1, opts.retentionBatchSize ?? 1000);
  }

  private readonly retentionIntervalMs: number;
  private readonly retentionBatchSize: number;
  /**
   * When retention last ran, on the monotonic clock (performance.now(): a step of the wall
   * clock back would otherwise hold retention off for as long); null: not yet, so the first run does.
   */
  private retainedAtMs: number | null = null;

  /**
   * Projects until the outbox is empty (or a short new batch), or until `signal` aborts;
   * then runs retention if it is due.
   */
  async runOnce(signal: AbortSignal): Promise<ProjectorRun> {
    const run = await this.project(signal);
    if (!signal.aborted && (this.retainedAtMs === null || performance.now() - this.retainedAtMs >= this.retentionIntervalMs)) {
      await this.retain(signal);
    }
    return run;
  }

  /**
   * One retention run: the sink's bounded passes (TelemetrySink.prune) until a short one, or
   * until `signal` aborts, all as of the database's clock when it starts (the events' and
   * buckets' times are the database's; this process's clock may be off); `now` lets tests
   * make them old instead of waiting. Returns the rows or documents deleted.
   */
  async retain(signal: AbortSignal, params: { now?: Date } = {}): Promise<number> {
    let deleted = 0;
    const now = params.now ?? (await this.opts.store.dbNow());
    while (!signal.aborted) {
      const n = await this.opts.sink.prune({ limit: this.retentionBatchSize, now });
      deleted += n;
      if (n < this.retentionBatchSize) break;
    }
    this.retainedAtMs = performance.now();
    // Debug: a busy server deletes a minute's worth each run.
    if (deleted > 0) this.logger.debug({ deleted }, 'telemetry past its retention deleted');
    return deleted;
  }

  private async project(signal: AbortSignal): Promise<ProjectorRun> {
    const run: ProjectorRun = { batches: 0, events: 0 };
    // The telemetry store may be down: the queue does not wait for it; events wait in the
    // outbox and this loop tries again on its next run.
    if (!this.sinkReady) {
      await this.opts.sink.init();
      this.sinkReady = true;
    }
    while (!signal.aborted) {
      const batch = await this.opts.store.projectorBatchOpen({
        sink: this.opts.sink.name,
        limit: this.batchSize,
        details: this.opts.sink.storesEvents,
      });
      if (!batch || signal.aborted) return run;
      await this.opts.sink.apply(batch.batchId, projectEvents(batch.rows, batch.outbox), signal);
      await this.opts.store.projectorBatchClose({ batchId: batch.batchId });
      run.batches++;
      const events = batch.rows.reduce((n, r) => n + r.n, 0);
      run.events += events;
      // A new batch that came back short took everything there was: stop until the next
      // interval rather than chase each trickle of new events with a commit of its own. (A
      // reopened batch says nothing about what waits behind it, so go on after one.)
      if (!batch.reopened && events < this.batchSize) return run;
    }
    return run;
  }
}

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
    },
  ) {
    super(
      'projector',
      { intervalMs: opts.intervalMs ?? 1000, startJitterMaxMs: opts.startJitterMaxMs },
      opts.logger.child({ component: 'projector' }),
    );
    this.batchSize = opts.batchSize ?? 20_000;
  }

  /** Projects until the outbox is empty (or a short new batch), or until `signal` aborts. */
  async runOnce(signal: AbortSignal): Promise<ProjectorRun> {
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

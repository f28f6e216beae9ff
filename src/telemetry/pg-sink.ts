import { MINUTES_KEPT, type ProjectionUpdate, type TelemetryRows, type TelemetrySink } from './projection.js';
import type { JobState } from '../domain/job.js';
import type { Store } from '../store/store.js';

/**
 * The embedded telemetry sink: the projection kept in PostgreSQL tables of its own (see
 * src/store/migrations/0001_baseline.sql), for when MONGODB_URL is not set. Its SQL is the
 * store's (Store.telemetryApply, Store.telemetryRead): a batch is applied in one transaction
 * together with its id, so applying it again after a crash is a no-op.
 */
export class PostgresTelemetrySink implements TelemetrySink {
  readonly name = 'postgres';
  /** Recent events are copied from the outbox in SQL (apply). */
  readonly storesEvents = false;

  constructor(
    private readonly store: Store,
    /** How long recent job events are kept. */
    private readonly eventRetentionSeconds = 86_400,
  ) {}

  async init(): Promise<void> {
    // The tables come with the migrations.
  }

  async close(): Promise<void> {
    // The store's pool belongs to the store.
  }

  async apply(batchId: number, update: ProjectionUpdate): Promise<void> {
    await this.store.telemetryApply({
      batchId,
      counts: [...update.counts].flatMap(([queue, byState]) =>
        Object.entries(byState).map(([state, n]) => ({ queue, state: state as JobState, n: n ?? 0 })),
      ),
      minutes: [...update.minutes.values()],
      outbox: update.outbox,
    });
  }

  async read(params: { queues: string[] | null; since: Date }): Promise<TelemetryRows> {
    return this.store.telemetryRead(params);
  }

  /**
   * Old minute buckets, the applied-batch markers of closed batches (only an open batch is
   * applied, so only its marker is needed), and recent events past their retention
   * (Store.telemetryPrune).
   */
  async prune(params: { limit: number; now: Date }): Promise<number> {
    const { minutes, batches, events } = await this.store.telemetryPrune({
      keepMinutes: MINUTES_KEPT,
      eventRetentionSeconds: this.eventRetentionSeconds,
      limit: params.limit,
      now: params.now,
    });
    return minutes + batches + events;
  }
}

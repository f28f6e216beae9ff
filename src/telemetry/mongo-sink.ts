import { MongoBulkWriteError, MongoClient, type AnyBulkWriteOperation, type Db } from 'mongodb';
import type { JobState } from '../store/store.js';
import {
  queueTelemetryFrom,
  type Histogram,
  type MinuteDelta,
  type ProjectionUpdate,
  type QueueTelemetry,
  type TelemetrySink,
} from './projection.js';

/** MongoDB's duplicate key error: the guard of a guarded upsert found the batch applied. */
const DUPLICATE_KEY = 11000;
/** A server that does not implement a feature (FerretDB refuses TTL indexes with it). */
const NOT_IMPLEMENTED = 238;

interface CountsDoc {
  _id: string;
  counts: Partial<Record<JobState, number>>;
  lastBatch: number;
}

interface EventDoc {
  _id: number;
  jobId: string;
  queue: string;
  type: string;
  kind: string;
  fromState: JobState | null;
  toState: JobState;
  attempt: number;
  workerId: string | null;
  at: Date;
  waitMs: number | null;
  runMs: number | null;
}

interface MinuteDoc {
  _id: string;
  queue: string;
  minute: Date;
  submitted?: number;
  completed?: number;
  failed?: number;
  deadLettered?: number;
  wait?: Histogram;
  run?: Histogram;
  lastBatch: number;
}

/**
 * The MongoDB telemetry sink (MONGODB_URL), through the official driver. Collections:
 * `queue_counts` (per queue: jobs by state), `queue_minutes` (per queue and minute:
 * counters and latency histograms), `job_events` (recent events, removed by a TTL index).
 *
 * Exactly once without multi-document transactions: every document records the last batch
 * applied to it (`lastBatch`), and each batch changes each document with one guarded
 * upsert `{ _id, lastBatch: { $lt: batch } }`. Applying a batch again (after a crash in
 * the middle of it) skips the documents that already have it: the upsert's filter does not
 * match and its insert fails with a duplicate key, which means "done". Events are inserted
 * with the outbox id as `_id`, so a replay's duplicates are refused the same way.
 * Only operations that both MongoDB and FerretDB support are used (docs/ferretdb.md).
 */
export class MongoTelemetrySink implements TelemetrySink {
  readonly name = 'mongodb';
  private readonly client: MongoClient;
  private readonly db: Db;
  /** Test hook: stop after this many document writes of an apply, as a crash would. */
  crashAfterWrites: number | null = null;

  constructor(
    url: string,
    private readonly opts: { eventRetentionSeconds?: number; serverSelectionTimeoutMs?: number } = {},
  ) {
    this.client = new MongoClient(url, {
      serverSelectionTimeoutMS: opts.serverSelectionTimeoutMs ?? 5000,
      appName: 'evora',
    });
    this.db = this.client.db();
  }

  /** False when the server refused the TTL index: apply() then removes old events itself. */
  private ttlIndex = true;

  async init(): Promise<void> {
    await this.db.collection('queue_minutes').createIndex({ queue: 1, minute: 1 });
    await this.db.collection('job_events').createIndex({ queue: 1, at: -1 });
    await this.db.collection('job_events').createIndex({ jobId: 1 });
    try {
      await this.db.collection('job_events').createIndex({ at: 1 }, { expireAfterSeconds: this.retentionSeconds });
    } catch (err) {
      if ((err as { code?: unknown }).code !== NOT_IMPLEMENTED) throw err;
      this.ttlIndex = false;
      await this.db.collection('job_events').createIndex({ at: 1 });
    }
  }

  private get retentionSeconds(): number {
    return this.opts.eventRetentionSeconds ?? 86_400;
  }

  async close(): Promise<void> {
    await this.client.close();
  }

  async apply(batchId: number, update: ProjectionUpdate): Promise<void> {
    const counts: AnyBulkWriteOperation<CountsDoc>[] = [...update.counts].map(([queue, byState]) => ({
      updateOne: {
        filter: { _id: queue, lastBatch: { $lt: batchId } },
        update: {
          $inc: Object.fromEntries(Object.entries(byState).map(([state, n]) => [`counts.${state}`, n])),
          $set: { lastBatch: batchId },
        },
        upsert: true,
      },
    }));
    const minutes: AnyBulkWriteOperation<MinuteDoc>[] = [...update.minutes].map(([key, m]) => ({
      updateOne: {
        filter: { _id: key, lastBatch: { $lt: batchId } },
        update: {
          $inc: minuteIncrements(m),
          $set: { lastBatch: batchId, queue: m.queue, minute: m.minute },
        },
        upsert: true,
      },
    }));
    const events: EventDoc[] = update.events.map((e) => ({
      _id: e.id,
      jobId: e.jobId,
      queue: e.queue,
      type: e.type,
      kind: e.kind,
      fromState: e.fromState,
      toState: e.toState,
      attempt: e.attempt,
      workerId: e.workerId,
      at: e.at,
      waitMs: e.waitMs,
      runMs: e.runMs,
    }));
    let budget = this.crashAfterWrites;
    const take = <T>(ops: T[]): T[] => {
      if (budget === null) return ops;
      const some = ops.slice(0, budget);
      budget -= some.length;
      return some;
    };
    const countsColl = this.db.collection<CountsDoc>('queue_counts');
    const minutesColl = this.db.collection<MinuteDoc>('queue_minutes');
    await this.guardedUpdates(take(counts), (ops) => countsColl.bulkWrite(ops, { ordered: false }));
    await this.guardedUpdates(take(minutes), (ops) => minutesColl.bulkWrite(ops, { ordered: false }));
    const newEvents = take(events);
    if (newEvents.length > 0) {
      try {
        await this.db.collection<EventDoc>('job_events').insertMany(newEvents, { ordered: false });
      } catch (err) {
        if (!onlyDuplicates(err)) throw err;
      }
    }
    if (budget !== null) throw new Error('telemetry sink: simulated crash in the middle of a batch');
    if (!this.ttlIndex) {
      await this.db.collection('job_events').deleteMany({ at: { $lt: new Date(Date.now() - this.retentionSeconds * 1000) } });
    }
  }

  /**
   * Runs guarded upserts in one bulk write. If any hit a duplicate key (a replayed batch),
   * runs each one alone: an unordered bulk stops at its first error on FerretDB, so the
   * operations after it may not have run; alone, each either applies or finds the batch
   * already applied.
   */
  private async guardedUpdates<T extends CountsDoc | MinuteDoc>(
    ops: AnyBulkWriteOperation<T>[],
    bulk: (ops: AnyBulkWriteOperation<T>[]) => Promise<unknown>,
  ): Promise<void> {
    if (ops.length === 0) return;
    try {
      await bulk(ops);
      return;
    } catch (err) {
      if (!onlyDuplicates(err)) throw err;
    }
    for (const op of ops) {
      try {
        await bulk([op]);
      } catch (err) {
        if (!onlyDuplicates(err)) throw err;
      }
    }
  }

  async queueStats(params: { queue: string; now?: Date }): Promise<QueueTelemetry | null> {
    const [stats] = await this.read([params.queue], params.now ?? new Date());
    return stats ?? null;
  }

  async queueStatsAll(params: { now?: Date }): Promise<QueueTelemetry[]> {
    return this.read(null, params.now ?? new Date());
  }

  private async read(queues: string[] | null, now: Date): Promise<QueueTelemetry[]> {
    const countDocs = await this.db
      .collection<CountsDoc>('queue_counts')
      .find(queues ? { _id: { $in: queues } } : {})
      .toArray();
    const minuteDocs = await this.db
      .collection<MinuteDoc>('queue_minutes')
      .find({ ...(queues ? { queue: { $in: queues } } : {}), minute: { $gt: new Date(now.getTime() - 61 * 60_000) } })
      .toArray();
    const byQueue = new Map<string, { counts: Partial<Record<JobState, number>>; minutes: MinuteDelta[] }>();
    const entry = (q: string) => {
      let e = byQueue.get(q);
      if (!e) byQueue.set(q, (e = { counts: {}, minutes: [] }));
      return e;
    };
    for (const d of countDocs) entry(d._id).counts = d.counts ?? {};
    for (const d of minuteDocs) {
      entry(d.queue).minutes.push({
        queue: d.queue,
        minute: d.minute,
        submitted: d.submitted ?? 0,
        completed: d.completed ?? 0,
        failed: d.failed ?? 0,
        deadLettered: d.deadLettered ?? 0,
        wait: d.wait ?? {},
        run: d.run ?? {},
      });
    }
    return [...byQueue]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([q, e]) => queueTelemetryFrom(q, e.counts, e.minutes, now));
  }
}

function minuteIncrements(m: MinuteDelta): Record<string, number> {
  const inc: Record<string, number> = {
    submitted: m.submitted,
    completed: m.completed,
    failed: m.failed,
    deadLettered: m.deadLettered,
  };
  for (const [bin, n] of Object.entries(m.wait)) inc[`wait.${bin}`] = n;
  for (const [bin, n] of Object.entries(m.run)) inc[`run.${bin}`] = n;
  return inc;
}

/** True when every failure of a write is a duplicate key (work a replayed batch already did). */
function onlyDuplicates(err: unknown): boolean {
  if (err instanceof MongoBulkWriteError) {
    const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
    return errors.length > 0 && errors.every((e) => e.code === DUPLICATE_KEY);
  }
  return (err as { code?: unknown }).code === DUPLICATE_KEY;
}

import {
  MongoBulkWriteError,
  MongoClient,
  MongoDriverError,
  MongoNetworkError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  type AnyBulkWriteOperation,
  type Collection,
  type Db,
  type Filter,
} from 'mongodb';
import { unavailable } from '../domain/errors.js';
import { abortRace } from '../domain/abort.js';
import type { JobState } from '../domain/job.js';
import type { Logger } from '../logger.js';
import { MINUTES_KEPT, type Histogram, type JobEvent, type MinuteDelta, type ProjectionUpdate, type TelemetryRows, type TelemetrySink } from './projection.js';

/** MongoDB's duplicate key error: the guard of a guarded upsert found the batch applied. */
const DUPLICATE_KEY = 11000;
/** A server that does not implement a feature (FerretDB refuses TTL indexes with it). */
const NOT_IMPLEMENTED = 238;

interface CountsDoc {
  _id: string;
  counts: Partial<Record<JobState, number>>;
  lastBatch: number;
}

/**
 * A recent event, keyed by its event id: written as a bigint, stored as an Int64 (read back
 * as a number while it fits in one exactly, as the driver does by default).
 */
type EventDoc = Omit<JobEvent, 'id'> & { _id: bigint | number };

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
 * counters and latency histograms; old ones deleted by prune), `job_events` (recent
 * events, removed by a TTL index, or by prune where the server has no TTL: FerretDB).
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
  readonly storesEvents = true;
  /** Replaced after MongoDB was unreachable (see reached()). */
  private client: MongoClient;

  constructor(
    private readonly url: string,
    private readonly opts: { eventRetentionSeconds?: number; serverSelectionTimeoutMs?: number; readTimeoutMs?: number; logger?: Logger } = {},
  ) {
    try {
      this.client = this.clientNew();
      // Its database name too (no '.', '$', space...), checked by db(): else every use failed
      // (the projector for ever, stats INTERNAL) while the server ran as if all were well.
      this.client.db();
    } catch (err) {
      // A URL the driver cannot parse; its message may quote the URL, password and all.
      throw urlRefused(url, err);
    }
  }

  private clientNew(): MongoClient {
    return new MongoClient(this.url, {
      serverSelectionTimeoutMS: this.opts.serverSelectionTimeoutMs ?? 5000,
      // A frozen server does not hold a projector tick or a stats read for long.
      socketTimeoutMS: 30_000,
      appName: 'evora',
    });
  }

  /**
   * Runs `work` against the database. When MongoDB cannot be reached, the error is
   * UNAVAILABLE (the caller retries later; stats answer UNAVAILABLE, not INTERNAL), and the
   * next call gets a new client: the driver keeps a client whose first connect failed closed
   * for good ("Topology is closed"), even once MongoDB is back.
   */
  private async reached<T>(work: (db: Db) => Promise<T>): Promise<T> {
    const client = this.client;
    try {
      const out = await work(client.db());
      if (this.down) this.opts.logger?.info('telemetry store (MongoDB) available again');
      this.down = false;
      return out;
    } catch (err) {
      if (!(err instanceof Error) || !unreachable(err)) throw err;
      // Once per outage; the projector and stats reads log it at debug.
      if (!this.down) this.opts.logger?.warn({ reason: err.message }, 'telemetry store (MongoDB) unavailable: events wait in the outbox');
      this.down = true;
      if (this.client === client) {
        this.client = this.clientNew();
        client.close().catch(() => undefined);
      }
      throw unavailable(`telemetry store unavailable: ${err.message.split('\n')[0]}`, { cause: err });
    }
  }

  /** Whether the last call found MongoDB unreachable (an outage is logged once). */
  private down = false;

  /** False when the server refused the TTL index: prune() then removes old events itself. */
  private ttlIndex = true;

  init(): Promise<void> {
    return this.reached((db) => this.indexesEnsure(db));
  }

  private async indexesEnsure(db: Db): Promise<void> {
    await db.collection('queue_minutes').createIndex({ queue: 1, minute: 1 });
    // Retention finds the oldest minutes of every queue (prune).
    await db.collection('queue_minutes').createIndex({ minute: 1 });
    await db.collection('job_events').createIndex({ queue: 1, at: -1 });
    await db.collection('job_events').createIndex({ jobId: 1 });
    try {
      await db.collection('job_events').createIndex({ at: 1 }, { expireAfterSeconds: this.retentionSeconds });
    } catch (err) {
      if ((err as { code?: unknown }).code !== NOT_IMPLEMENTED) throw err;
      this.ttlIndex = false;
      await db.collection('job_events').createIndex({ at: 1 });
    }
  }

  private get retentionSeconds(): number {
    return this.opts.eventRetentionSeconds ?? 86_400;
  }

  /**
   * Closes the client, waiting at most CLOSE_WAIT_MS: the driver's close ends the server's
   * sessions over a new connection, which a MongoDB that stopped answering (frozen,
   * partitioned) leaves hanging for the 30 s connect timeout, holding the server's shutdown.
   */
  async close(): Promise<void> {
    const late = new Error('close: MongoDB did not answer');
    await abortRace(this.client.close(), AbortSignal.timeout(CLOSE_WAIT_MS), () => late).catch((err: unknown) => {
      if (err !== late) throw err;
    });
  }

  /**
   * Applies a batch: the counts, then the minute buckets, then the events, each write
   * guarded by the batch id. An abort (`signal`) between those writes leaves the batch
   * partly applied, which is what a crash does: applying it again completes it. An abort
   * in the middle of a write ends the call at once too (a MongoDB that stopped answering
   * would otherwise hold the projector's stop, and the server's shutdown, until the socket
   * timeout): the write goes on unobserved and may still land, as a crashed process's may;
   * each write is guarded by the batch id, so applying the batch again completes it either way.
   */
  apply(batchId: number, update: ProjectionUpdate, signal?: AbortSignal): Promise<void> {
    return abortRace(this.reached((db) => this.applyTo(db, batchId, update, signal)), signal, () => signal?.reason as Error);
  }

  private async applyTo(db: Db, batchId: number, update: ProjectionUpdate, signal?: AbortSignal): Promise<void> {
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
    const events: EventDoc[] = update.events.map(({ id, ...rest }) => ({ _id: id, ...rest }));
    const countsColl = db.collection<CountsDoc>('queue_counts');
    const minutesColl = db.collection<MinuteDoc>('queue_minutes');
    signal?.throwIfAborted();
    await this.guardedUpdates(counts, (ops) => countsColl.bulkWrite(ops, { ordered: false }));
    signal?.throwIfAborted();
    await this.guardedUpdates(minutes, (ops) => minutesColl.bulkWrite(ops, { ordered: false }));
    signal?.throwIfAborted();
    if (events.length > 0) {
      try {
        await db.collection<EventDoc>('job_events').insertMany(events, { ordered: false });
      } catch (err) {
        if (!onlyDuplicates(err)) throw err;
      }
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

  /**
   * Deletes up to `limit` minute documents older than MINUTES_KEPT, and without a TTL index
   * up to `limit` events older than their retention, both as of `now` (the database's clock,
   * which the events' `at` comes from) and oldest first, through the `{minute}` and `{at}`
   * indexes: their ids, then those documents. No marker is kept here: each document's
   * `lastBatch` recognises a batch applied again, and a replay that finds a deleted old
   * minute gone writes it anew, older than any read, deleted by the next pass.
   */
  prune(params: { limit: number; now: Date }): Promise<number> {
    return this.reached(async (db) => {
      const minutes = await oldestDelete(db.collection<MinuteDoc>('queue_minutes'), 'minute', new Date(params.now.getTime() - MINUTES_KEPT * 60_000), params.limit);
      if (this.ttlIndex) return minutes;
      const events = await oldestDelete(db.collection<EventDoc>('job_events'), 'at', new Date(params.now.getTime() - this.retentionSeconds * 1000), params.limit);
      return minutes + events;
    });
  }

  /**
   * The counts and minute buckets, or UNAVAILABLE once MongoDB has not answered within
   * `readTimeoutMs` (default 5 s, as long as the driver looks for an unreachable server): a
   * server that stopped answering without closing its connections (frozen, a partition)
   * would otherwise hold a stats read until the socket timeout (30 s), past every caller's
   * deadline (the CLI's 10 s: DEADLINE_EXCEEDED, blaming the Evora server). The read goes
   * on unobserved and fails or ends by itself.
   */
  async read(params: { queues: string[] | null; since: Date }): Promise<TelemetryRows> {
    const waitMs = this.opts.readTimeoutMs ?? 5000;
    return abortRace(this.reached((db) => this.readFrom(db, params)), AbortSignal.timeout(waitMs), () =>
      unavailable(`telemetry store unavailable: MongoDB did not answer within ${waitMs} ms`),
    );
  }

  private async readFrom(db: Db, params: { queues: string[] | null; since: Date }): Promise<TelemetryRows> {
    const { queues } = params;
    const countDocs = await db
      .collection<CountsDoc>('queue_counts')
      .find(queues ? { _id: { $in: queues } } : {})
      .toArray();
    const minuteDocs = await db
      .collection<MinuteDoc>('queue_minutes')
      .find({ ...(queues ? { queue: { $in: queues } } : {}), minute: { $gt: params.since } })
      .toArray();
    return {
      counts: countDocs.flatMap((d) =>
        Object.entries(d.counts ?? {}).map(([state, n]) => ({ queue: d._id, state: state as JobState, n: n ?? 0 })),
      ),
      minutes: minuteDocs.map((d) => ({
        queue: d.queue,
        minute: d.minute,
        submitted: d.submitted ?? 0,
        completed: d.completed ?? 0,
        failed: d.failed ?? 0,
        deadLettered: d.deadLettered ?? 0,
        wait: d.wait ?? {},
        run: d.run ?? {},
      })),
    };
  }
}

/** How long close() waits for the driver's close (which a frozen MongoDB can hold for 30 s). */
const CLOSE_WAIT_MS = 2000;

/**
 * Deletes up to `limit` documents whose `field` is before `before`, oldest first (through an
 * index on `field`): their ids, then those documents. Returns how many it deleted.
 */
async function oldestDelete<T extends MinuteDoc | EventDoc>(coll: Collection<T>, field: 'minute' | 'at', before: Date, limit: number): Promise<number> {
  const due = { [field]: { $lt: before } };
  const old = await coll.find(due as Filter<T>, { projection: { _id: 1 } }).sort({ [field]: 1 }).limit(limit).toArray();
  if (old.length === 0) return 0;
  const { deletedCount } = await coll.deleteMany({ _id: { $in: old.map((d) => d._id) }, ...due } as Filter<T>);
  return deletedCount;
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

/**
 * The error for a MONGODB_URL the driver refused: names the setting and says why, with the
 * URL and its credentials left out (the driver's message may quote the URL whole, e.g.
 * `Protocol and host list are required in "mongodb://user:password@/db"`), as the server
 * prints it and exits. Must stay true: the password never reaches stderr or a log.
 */
function urlRefused(url: string, err: unknown): Error {
  let why = err instanceof Error ? err.message : String(err);
  why = why.split(url).join('the URL');
  const userinfo = /^[^:/]+:\/\/([^/?#]*)@/.exec(url)?.[1];
  if (userinfo) why = why.split(userinfo).join('***');
  return new Error(`MONGODB_URL must be a MongoDB connection string such as mongodb://user:password@host:27017/database; the driver refused it: ${why}`);
}

/**
 * Whether `err` says MongoDB could not be reached (an outage: the caller retries later), not
 * that it refused something. A bulk write (`bulkWrite`, `insertMany`: the projector's
 * writes) wraps the driver's network error in a MongoBulkWriteError (as its `errorResponse`),
 * so that one is looked into; and a call that was still on the client `reached` replaced (a
 * call beside it met the outage first) finds that client's pool closed (the driver exports no
 * class for that error, only its name). Must stay true: an
 * outage met in the middle of applying a batch is logged as one (once, a warn), never as a
 * projector failure with a stack at every tick.
 */
function unreachable(err: Error): boolean {
  const cause = err instanceof MongoBulkWriteError && err.errorResponse instanceof Error ? err.errorResponse : err;
  return (
    cause instanceof MongoNetworkError ||
    cause instanceof MongoServerSelectionError ||
    cause instanceof MongoTopologyClosedError ||
    (cause instanceof MongoDriverError && cause.name === 'MongoPoolClosedError')
  );
}

/** True when every failure of a write is a duplicate key (work a replayed batch already did). */
function onlyDuplicates(err: unknown): boolean {
  if (err instanceof MongoBulkWriteError) {
    const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
    return errors.length > 0 && errors.every((e) => e.code === DUPLICATE_KEY);
  }
  return (err as { code?: unknown }).code === DUPLICATE_KEY;
}

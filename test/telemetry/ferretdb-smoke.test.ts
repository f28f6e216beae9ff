import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MongoBulkWriteError, MongoClient, MongoServerError, type AnyBulkWriteOperation, type Db } from 'mongodb';
import { ferretdbStart, skipWithoutFerretdb, type FerretdbHandle } from '../helpers/ferretdb.js';

/**
 * The official `mongodb` driver against FerretDB v1.24.2 (SQLite backend): the operations
 * a telemetry projector needs, and where FerretDB differs from MongoDB. Tests named
 * "FerretDB difference" pin FerretDB's behaviour where it is not MongoDB's, so that a
 * FerretDB upgrade that changes it shows up here (and docs/ferretdb.md gets updated);
 * code must rely only on what both servers do.
 */

/** MongoDB's and FerretDB's code for a duplicate key (E11000). */
const DUPLICATE_KEY = 11000;
/** What FerretDB answers for what it does not implement. */
const NOT_IMPLEMENTED = 238;

interface CountsDoc {
  _id: string;
  lastBatch: number;
  counts?: Record<string, number>;
  events?: number;
}

interface EventDoc {
  _id: number;
  queue: string;
  type: string;
  at: Date;
  runMs: number;
}

/** The projector's guarded upsert: applies batch `batch` to `queue` only if it has not yet. */
function guarded(queue: string, batch: number, completed: number): AnyBulkWriteOperation<CountsDoc> {
  return {
    updateOne: {
      filter: { _id: queue, lastBatch: { $lt: batch } },
      update: { $inc: { 'counts.completed': completed, events: 1 }, $set: { lastBatch: batch } },
      upsert: true,
    },
  };
}

/** Rejection of `p` as a MongoServerError (fails the test if `p` resolves). */
async function serverError(p: Promise<unknown>): Promise<MongoServerError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, 'expected the server to refuse').toBeInstanceOf(MongoServerError);
  return err as MongoServerError;
}

describe.skipIf(skipWithoutFerretdb())('FerretDB smoke test: the mongodb driver against FerretDB', () => {
  let fdb: FerretdbHandle | null = null;
  let client: MongoClient;
  let dbs = 0;
  /** A fresh database for each test. */
  const freshDb = (): Db => client.db(`smoke_${++dbs}`);

  beforeAll(async () => {
    fdb = await ferretdbStart();
    // skipIf let this block run, so the binary is there (or EVORA_TELEMETRY_REQUIRED made it throw).
    if (!fdb) throw new Error('FerretDB did not start');
    client = new MongoClient(fdb.url, { serverSelectionTimeoutMS: 5000 });
    await client.connect();
  });

  afterAll(async () => {
    await client?.close();
    await fdb?.stop();
    await fdb?.stop(); // safe twice
  });

  it('answers as a MongoDB 7.0 server, without a replica set', async () => {
    const admin = client.db('admin');
    expect((await admin.command({ ping: 1 })).ok).toBe(1);
    const hello = await admin.command({ hello: 1 });
    expect(hello.isWritablePrimary).toBe(true);
    expect(hello.maxWireVersion).toBeGreaterThanOrEqual(21);
    expect(hello.setName).toBeUndefined();
    const info = await admin.command({ buildInfo: 1 });
    expect(info.version).toMatch(/^7\.0\./);
    expect(fdb!.url).toMatch(/^mongodb:\/\/127\.0\.0\.1:\d+\/$/);
  });

  it('createIndex: single, compound, descending, unique, several at once; idempotent', async () => {
    const events = freshDb().collection<EventDoc>('job_events');
    expect(await events.createIndex({ queue: 1, at: -1 })).toBe('queue_1_at_-1');
    expect(await events.createIndex({ queue: 1, at: -1 })).toBe('queue_1_at_-1');
    expect(await events.createIndex({ type: 1 }, { unique: true, name: 'type_unique' })).toBe('type_unique');
    expect(await events.createIndexes([{ key: { at: 1 } }, { key: { runMs: -1 }, name: 'run' }])).toEqual(['at_1', 'run']);
    const indexes = await events.listIndexes().toArray();
    expect(indexes.map((i) => i.name).sort()).toEqual(['_id_', 'at_1', 'queue_1_at_-1', 'run', 'type_unique']);
    expect(indexes.find((i) => i.name === 'type_unique')?.unique).toBe(true);

    // The unique index is enforced with the same error as _id.
    await events.insertOne({ _id: 1, queue: 'q', type: 't', at: new Date(), runMs: 1 });
    const dup = await serverError(events.insertOne({ _id: 2, queue: 'q', type: 't', at: new Date(), runMs: 1 }));
    expect(dup.code).toBe(DUPLICATE_KEY);
  });

  it('FerretDB difference: TTL indexes (expireAfterSeconds) are refused with NotImplemented; expiry is a deleteMany', async () => {
    const events = freshDb().collection<EventDoc>('job_events');
    const ttl = await serverError(events.createIndex({ at: 1 }, { expireAfterSeconds: 3600 }));
    expect(ttl.code).toBe(NOT_IMPLEMENTED);
    expect(ttl.codeName).toBe('NotImplemented');
    expect(ttl.message).toMatch(/expireAfterSeconds/);
    // Nor can an existing index be given a TTL.
    await events.createIndex({ at: 1 });
    const collMod = await serverError(events.db.command({ collMod: 'job_events', index: { keyPattern: { at: 1 }, expireAfterSeconds: 60 } }));
    expect(collMod.code).toBe(NOT_IMPLEMENTED);
    // Other options FerretDB 1.24 refuses the same way.
    const partial = await serverError(events.createIndex({ queue: 1 }, { partialFilterExpression: { queue: { $exists: true } } }));
    expect(partial.code).toBe(NOT_IMPLEMENTED);

    // What works on both: the sink removes old events itself.
    const now = Date.now();
    await events.insertMany(
      Array.from({ length: 10 }, (_, i) => ({ _id: i, queue: 'q', type: 't', at: new Date(now - i * 60_000), runMs: i })),
    );
    const removed = await events.deleteMany({ at: { $lt: new Date(now - 4.5 * 60_000) } });
    expect(removed.deletedCount).toBe(5);
    expect(await events.countDocuments()).toBe(5);
  });

  it('bulkWrite: guarded updateOne upserts with $inc and $set apply a batch exactly once', async () => {
    const counts = freshDb().collection<CountsDoc>('queue_counts');

    // Batch 1 creates the documents: the filter's _id becomes the new document's _id.
    const b1 = await counts.bulkWrite([guarded('a', 1, 3), guarded('b', 1, 5)], { ordered: true });
    expect(b1.upsertedCount).toBe(2);
    expect(b1.matchedCount).toBe(0);
    expect(Object.values(b1.upsertedIds).sort()).toEqual(['a', 'b']);

    // Batch 2 updates them in place.
    const b2 = await counts.bulkWrite([guarded('a', 2, 1), guarded('b', 2, 1)], { ordered: true });
    expect(b2.matchedCount).toBe(2);
    expect(b2.modifiedCount).toBe(2);
    expect(b2.upsertedCount).toBe(0);

    // Batch 2 again (a replay after a crash): the guard does not match, the upsert's insert
    // collides with the existing _id, and that duplicate key means "already applied".
    const replay = await counts.bulkWrite([guarded('a', 2, 1)], { ordered: true }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(replay).toBeInstanceOf(MongoBulkWriteError);
    const err = replay as MongoBulkWriteError;
    expect(err.code).toBe(DUPLICATE_KEY);
    expect(err.writeErrors).toHaveLength(1);
    const writeErrors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
    expect(writeErrors[0]!.code).toBe(DUPLICATE_KEY);
    expect(writeErrors[0]!.errmsg).toMatch(/^E11000 duplicate key error/);

    // The same with a plain updateOne: a MongoServerError with code 11000.
    const single = await serverError(
      counts.updateOne({ _id: 'b', lastBatch: { $lt: 2 } }, { $inc: { events: 1 }, $set: { lastBatch: 2 } }, { upsert: true }),
    );
    expect(single.code).toBe(DUPLICATE_KEY);

    expect(await counts.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 'a', counts: { completed: 4 }, events: 2, lastBatch: 2 },
      { _id: 'b', counts: { completed: 6 }, events: 2, lastBatch: 2 },
    ]);
  });

  it('FerretDB difference: an update bulk stops at its first error even with ordered: false, reporting index 0', async () => {
    const counts = freshDb().collection<CountsDoc>('queue_counts');
    await counts.bulkWrite([guarded('a', 1, 1), guarded('b', 1, 1), guarded('c', 1, 1)]);

    // a: new batch; b: replay (duplicate key); c: new batch.
    const ops = [guarded('a', 2, 1), guarded('b', 1, 1), guarded('c', 2, 1)];
    const err = await counts.bulkWrite(ops, { ordered: false }).then(
      () => null,
      (e: unknown) => e as MongoBulkWriteError,
    );
    expect(err).toBeInstanceOf(MongoBulkWriteError);
    expect(err!.code).toBe(DUPLICATE_KEY);
    const writeErrors = Array.isArray(err!.writeErrors) ? err!.writeErrors : [err!.writeErrors];
    expect(writeErrors).toHaveLength(1);
    // MongoDB: index 1, and c applied. FerretDB 1.24 ignores `ordered` (FerretDB#2612), stops
    // after b, reports index 0, and loses the counts of what it applied before the error.
    expect(writeErrors[0]!.index).toBe(0);
    expect(err!.result.modifiedCount).toBe(0);
    const lastBatch = async () => Object.fromEntries((await counts.find().toArray()).map((d) => [d._id, d.lastBatch]));
    expect(await lastBatch()).toEqual({ a: 2, b: 1, c: 1 });

    // Portable recovery: the guarded upserts are idempotent, so after a bulk error replay
    // each of its operations alone, taking 11000 as "already applied". Right on both servers.
    for (const op of ops) {
      const { filter, update, upsert } = (op as { updateOne: { filter: object; update: object; upsert: boolean } }).updateOne;
      await counts.updateOne(filter, update, { upsert }).catch((e: unknown) => {
        if ((e as MongoServerError).code !== DUPLICATE_KEY) throw e;
      });
    }
    expect(await lastBatch()).toEqual({ a: 2, b: 1, c: 2 });
    expect((await counts.find().sort({ _id: 1 }).toArray()).map((d) => d.events)).toEqual([2, 1, 2]);
  });

  it('FerretDB difference: upsertedIds are keyed by the upsert count, not by the operation index', async () => {
    const counts = freshDb().collection<CountsDoc>('queue_counts');
    await counts.bulkWrite([guarded('a', 1, 1), guarded('b', 1, 1)]);
    // a: update, d: upsert, b: update, e: upsert. MongoDB reports { 1: 'd', 3: 'e' }.
    const res = await counts.bulkWrite([guarded('a', 2, 1), guarded('d', 2, 1), guarded('b', 2, 1), guarded('e', 2, 1)]);
    expect(res.upsertedCount).toBe(2);
    expect(res.matchedCount).toBe(2);
    expect(res.modifiedCount).toBe(2);
    expect(res.upsertedIds).toEqual({ 0: 'd', 1: 'e' });
  });

  it('insertMany ordered: false with duplicate _ids: code 11000, and every other document inserted', async () => {
    const events = freshDb().collection<EventDoc>('job_events');
    const at = new Date();
    const doc = (id: number, queue = 'q') => ({ _id: id, queue, type: 't', at, runMs: id });
    await events.insertOne(doc(1));

    const err = await events.insertMany([doc(1), doc(2), doc(3), doc(2, 'again'), doc(4)], { ordered: false }).then(
      () => null,
      (e: unknown) => e as MongoBulkWriteError,
    );
    expect(err).toBeInstanceOf(MongoBulkWriteError);
    expect(err!.code).toBe(DUPLICATE_KEY);
    const writeErrors = Array.isArray(err!.writeErrors) ? err!.writeErrors : [err!.writeErrors];
    expect(writeErrors.map((w) => [w.index, w.code])).toEqual([
      [0, DUPLICATE_KEY],
      [3, DUPLICATE_KEY],
    ]);
    expect(err!.result.insertedCount).toBe(3);
    expect((await events.find().sort({ _id: 1 }).toArray()).map((d) => [d._id, d.queue])).toEqual([
      [1, 'q'],
      [2, 'q'],
      [3, 'q'],
      [4, 'q'],
    ]);
  });

  it('find with filter, compound sort, skip, limit and projection', async () => {
    const events = freshDb().collection<EventDoc>('job_events');
    await events.createIndex({ queue: 1, at: -1 });
    const now = Date.now();
    await events.insertMany(
      Array.from({ length: 20 }, (_, i) => ({
        _id: i,
        queue: i % 2 ? 'odd' : 'even',
        type: `t${i % 3}`,
        at: new Date(now - i * 1000),
        runMs: i * 10,
      })),
    );
    const recent = await events
      .find({ queue: 'odd', at: { $gte: new Date(now - 10_500) } }, { projection: { _id: 1, runMs: 1 } })
      .sort({ at: -1 })
      .limit(3)
      .toArray();
    expect(recent).toEqual([
      { _id: 1, runMs: 10 },
      { _id: 3, runMs: 30 },
      { _id: 5, runMs: 50 },
    ]);
    const page = await events
      .find({ type: { $in: ['t0', 't1'] } })
      .sort({ queue: 1, runMs: -1 })
      .skip(2)
      .limit(3)
      .project<{ _id: number }>({ _id: 1 })
      .toArray();
    // even: 18 16 12 10 6 4 0 (t0/t1 only) -> skip 18, 16.
    expect(page.map((d) => d._id)).toEqual([12, 10, 6]);
    expect(await events.distinct('queue')).toEqual(['even', 'odd']);
  });

  it('aggregate with $match, $group and $sum (one accumulator per $group), $sort, $count', async () => {
    const events = freshDb().collection<EventDoc>('job_events');
    const now = Date.now();
    await events.insertMany(
      Array.from({ length: 12 }, (_, i) => ({ _id: i, queue: ['a', 'b', 'c'][i % 3]!, type: 't', at: new Date(now - i * 60_000), runMs: i })),
    );
    const perQueue = await events
      .aggregate([{ $match: { at: { $gte: new Date(now - 5.5 * 60_000) } } }, { $group: { _id: '$queue', n: { $sum: 1 } } }, { $sort: { _id: 1 } }])
      .toArray();
    expect(perQueue).toEqual([
      { _id: 'a', n: 2 },
      { _id: 'b', n: 2 },
      { _id: 'c', n: 2 },
    ]);
    const runTotals = await events.aggregate([{ $group: { _id: '$queue', total: { $sum: '$runMs' } } }, { $sort: { _id: 1 } }]).toArray();
    expect(runTotals).toEqual([
      { _id: 'a', total: 0 + 3 + 6 + 9 },
      { _id: 'b', total: 1 + 4 + 7 + 10 },
      { _id: 'c', total: 2 + 5 + 8 + 11 },
    ]);
    const byCompoundKey = await events
      .aggregate([{ $match: { queue: { $in: ['a', 'b'] } } }, { $group: { _id: { queue: '$queue', type: '$type' }, n: { $sum: 1 } } }, { $sort: { '_id.queue': 1 } }])
      .toArray();
    expect(byCompoundKey).toEqual([
      { _id: { queue: 'a', type: 't' }, n: 4 },
      { _id: { queue: 'b', type: 't' }, n: 4 },
    ]);
    expect(await events.aggregate([{ $match: { queue: 'a' } }, { $count: 'n' }]).toArray()).toEqual([{ n: 4 }]);
    expect(await events.aggregate([{ $group: { _id: null, total: { $sum: '$runMs' } } }]).toArray()).toEqual([{ _id: null, total: 66 }]);
    const reshaped = await events
      .aggregate([
        { $match: { queue: 'b' } },
        { $set: { tags: ['x', 'y'] } },
        { $unset: 'type' },
        { $project: { _id: 1, runMs: 1, tags: 1 } },
        { $sort: { runMs: -1 } },
        { $skip: 1 },
        { $limit: 2 },
      ])
      .toArray();
    expect(reshaped).toEqual([
      { _id: 7, runMs: 7, tags: ['x', 'y'] },
      { _id: 4, runMs: 4, tags: ['x', 'y'] },
    ]);
  });

  it('FerretDB difference: field paths in $set/$addFields/$project are taken literally; $unwind drops other fields', async () => {
    const events = freshDb().collection<EventDoc & { tags: string[] }>('job_events');
    await events.insertOne({ _id: 1, queue: 'a', type: 't', at: new Date(), runMs: 5, tags: ['x', 'y'] });
    // MongoDB: ms = 5 each time.
    for (const stage of [{ $set: { ms: '$runMs' } }, { $addFields: { ms: '$runMs' } }, { $project: { ms: '$runMs' } }]) {
      const [doc] = await events.aggregate([stage]).toArray();
      expect(doc?.ms, Object.keys(stage)[0]).toBe('$runMs');
    }
    // MongoDB keeps queue, type, at and runMs in each unwound document.
    expect(await events.aggregate([{ $unwind: '$tags' }]).toArray()).toEqual([
      { _id: 1, tags: 'x' },
      { _id: 1, tags: 'y' },
    ]);
  });

  it('FerretDB difference: in a $group only the first accumulator sees the documents; others give 0', async () => {
    const events = freshDb().collection<EventDoc>('job_events');
    await events.insertMany([1, 2, 3].map((i) => ({ _id: i, queue: 'a', type: 't', at: new Date(), runMs: i * 10 })));
    // MongoDB: { n: 3, total: 60 }. FerretDB 1.24 shares one iterator between accumulators.
    expect(await events.aggregate([{ $group: { _id: '$queue', n: { $sum: 1 }, total: { $sum: '$runMs' } } }]).toArray()).toEqual([
      { _id: 'a', n: 3, total: 0 },
    ]);
    expect(await events.aggregate([{ $group: { _id: '$queue', total: { $sum: '$runMs' }, n: { $sum: 1 } } }]).toArray()).toEqual([
      { _id: 'a', total: 60, n: 0 },
    ]);
  });

  it('FerretDB difference: most accumulators and expression operators are NotImplemented', async () => {
    const events = freshDb().collection<EventDoc>('job_events');
    await events.insertOne({ _id: 1, queue: 'a', type: 't', at: new Date(), runMs: 5 });
    const refused = async (pipeline: object[]) => (await serverError(events.aggregate(pipeline).toArray())).code;
    for (const acc of ['$avg', '$min', '$max', '$first', '$last', '$push', '$addToSet']) {
      expect(await refused([{ $group: { _id: null, v: { [acc]: '$runMs' } } }]), acc).toBe(NOT_IMPLEMENTED);
    }
    expect(await refused([{ $group: { _id: { $dateTrunc: { date: '$at', unit: 'minute' } }, n: { $sum: 1 } } }])).toBe(NOT_IMPLEMENTED);
    expect(await refused([{ $project: { v: { $add: ['$runMs', 1] } } }])).toBe(NOT_IMPLEMENTED);
  });

  it('countDocuments and estimatedDocumentCount', async () => {
    const events = freshDb().collection<EventDoc>('job_events');
    expect(await events.countDocuments()).toBe(0);
    await events.insertMany(Array.from({ length: 7 }, (_, i) => ({ _id: i, queue: i < 3 ? 'a' : 'b', type: 't', at: new Date(), runMs: i })));
    expect(await events.countDocuments()).toBe(7);
    expect(await events.countDocuments({ queue: 'a' })).toBe(3);
    expect(await events.countDocuments({ queue: 'b', runMs: { $gte: 5 } })).toBe(2);
    expect(await events.countDocuments({ queue: 'none' })).toBe(0);
    expect(await events.estimatedDocumentCount()).toBe(7);
  });

  it('other update operators: $setOnInsert, $max, $min, findOneAndUpdate, updateMany, replaceOne upsert', async () => {
    const docs = freshDb().collection<{ _id: string; n?: number; hi?: number; lo?: number; created?: string }>('misc');
    await docs.updateOne({ _id: 'x' }, { $setOnInsert: { created: 'now' }, $inc: { n: 1 }, $max: { hi: 5 }, $min: { lo: 5 } }, { upsert: true });
    await docs.updateOne({ _id: 'x' }, { $setOnInsert: { created: 'later' }, $inc: { n: 1 }, $max: { hi: 3 }, $min: { lo: 3 } }, { upsert: true });
    expect(await docs.findOne({ _id: 'x' })).toEqual({ _id: 'x', created: 'now', n: 2, hi: 5, lo: 3 });
    expect(await docs.findOneAndUpdate({ _id: 'x' }, { $inc: { n: 1 } }, { returnDocument: 'after' })).toMatchObject({ n: 3 });
    expect((await docs.replaceOne({ _id: 'y' }, { n: 10 }, { upsert: true })).upsertedId).toBe('y');
    expect((await docs.updateMany({ n: { $gte: 3 } }, { $inc: { n: 1 } })).modifiedCount).toBe(2);
  });

  it('acknowledged writes survive the server being killed (SIGKILL) and started again', async () => {
    // The projector's crash test (projector-mongo.test.ts) relies on this: a batch half
    // applied before the kill keeps the half that was acknowledged.
    const docs = freshDb().collection<CountsDoc>('queue_counts');
    await docs.bulkWrite([guarded('a', 1, 5), guarded('b', 1, 7)], { ordered: false });
    await fdb!.crash();
    await fdb!.resume();
    expect(await docs.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 'a', lastBatch: 1, counts: { completed: 5 }, events: 1 },
      { _id: 'b', lastBatch: 1, counts: { completed: 7 }, events: 1 },
    ]);
  });

  it('FerretDB difference: no transactions', async () => {
    const docs = freshDb().collection<{ _id: number }>('misc');
    const session = client.startSession();
    try {
      const err = await session
        .withTransaction(async () => {
          await docs.insertOne({ _id: 1 }, { session });
        })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(MongoServerError);
    } finally {
      await session.endSession();
    }
    expect(await docs.countDocuments()).toBe(0);
  });
});

import { randomUUID } from 'node:crypto';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { JobEvent, OutboxEvents } from '../../src/domain/events.js';
import type { Store } from '../../src/store/store.js';
import { MongoTelemetrySink } from '../../src/telemetry/mongo-sink.js';
import { Projector } from '../../src/maintenance/projector.js';
import { silentLogger } from '../../src/logger.js';
import { isUnavailable } from '../../src/domain/errors.js';
import { MINUTES_KEPT, projectEvents, telemetryStats, type MinuteDelta, type TelemetrySink } from '../../src/telemetry/projection.js';
import { ferretdbStart, skipWithoutFerretdb, type FerretdbHandle } from '../helpers/ferretdb.js';
import { mongoWriteGateStart } from '../helpers/mongo-write-gate.js';
import { blackholeProxy } from '../helpers/blackhole-proxy.js';
import { countsFromJobs, mixedRun } from '../helpers/mixed-run.js';
import { queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';
import { call, serverSetup } from '../helpers/server-setup.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { waitFor } from '../helpers/wait.js';

let ferret: FerretdbHandle;
let store: Store;
const sinks: MongoTelemetrySink[] = [];

/**
 * A sink on its own database of the FerretDB server, so tests do not share counts; through
 * `baseUrl` (a write gate) when given.
 */
function sinkFor(db: string, baseUrl = ferret.url) {
  const sink = new MongoTelemetrySink(`${baseUrl}${db}`, { serverSelectionTimeoutMs: 2000 });
  sinks.push(sink);
  return sink;
}

/** A projector run's signal that is never aborted. */
const signal = new AbortController().signal;

const describeFerret = describe.skipIf(skipWithoutFerretdb());

describe('a MongoDB sink given a URL the driver refuses', () => {
  it('is refused in one line that names MONGODB_URL and repeats neither the URL nor its password', () => {
    for (const url of ['http://evora:s3cr3t-pw@db/telemetry', 'mongodb://evora:s3cr3t-pw@/telemetry', 'mongodb://evora:s3cr3t-pw@db:99999/telemetry', 'mongodb://evora:s3cr3t-pw@db/tele.metry']) {
      const err = (() => {
        try {
          new MongoTelemetrySink(url);
          return null;
        } catch (e) {
          return e as Error;
        }
      })();
      expect(err?.message, url).toMatch(/^MONGODB_URL must be a MongoDB connection string .*; the driver refused it: [^\n]+$/);
      expect(err?.message).not.toContain('s3cr3t-pw');
      expect(err?.cause).toBeUndefined();
    }
  });
});

describeFerret('projector into MongoDB (FerretDB)', () => {
  beforeAll(async () => {
    ferret = (await ferretdbStart())!;
    ({ store } = await storeSetup());
  });
  afterAll(async () => {
    for (const s of sinks) await s.close();
    await ferret?.stop();
  });

  async function sinkCounts(sink: MongoTelemetrySink, queues: string[]) {
    const out: Record<string, Record<string, number>> = {};
    for (const s of await telemetryStats(sink, { queues: null, now: await store.dbNow() })) {
      if (!queues.includes(s.queue)) continue;
      for (const [state, n] of Object.entries(s.counts)) if (n) (out[s.queue] ??= {})[state] = n;
    }
    return out;
  }

  it('after a mixed run of 5,000 jobs (completions, retries, DLQ, cancels) the counts match Postgres exactly', async () => {
    const sink = sinkFor('mixed');
    const queues = await mixedRun(store, { total: 5000, prefix: queueName('mix') });
    const run = await new Projector({ store, sink, logger: silentLogger(), batchSize: 5000 }).runOnce(signal);
    expect(run.events).toBeGreaterThan(10_000);
    expect(await sinkCounts(sink, queues)).toEqual(await countsFromJobs(store, queues));
    const stats = (await telemetryStats(sink, { queues: [queues[1]!], now: await store.dbNow() }))[0]!;
    expect(stats.completed60m).toBe((await countsFromJobs(store, [queues[1]!]))[queues[1]!]!.COMPLETED);
    expect(stats.failed60m).toBeGreaterThan(0);
    expect(stats.waitMs.p99).not.toBeNull();
  }, 180_000);

  it('FerretDB killed (SIGKILL) in the middle of applying a batch, then restarted: every count stays exact', async () => {
    const queues = await mixedRun(store, { total: 1500, prefix: queueName('crash') });
    const gate = await mongoWriteGateStart(ferret.port);
    try {
      // Each round: a projector (as a restarted process would be) applies batches through the
      // gate; after `n` answered writes the next one is held, never sent, and FerretDB is
      // killed. A round's batch is left applied in part: only its first writes got through.
      for (const n of [1, 2, 5]) {
        const crashing = new Projector({ store, sink: sinkFor('crash', gate.url), logger: silentLogger(), batchSize: 800 });
        const held = gate.holdAfterWrites(n);
        const run = crashing.runOnce(signal);
        const ranOut = run.then(() => 'the run ended before a write was held');
        expect(await Promise.race([held.then(() => 'held'), ranOut])).toBe('held');
        await ferret.crash();
        gate.reset();
        // An outage, as the projector logs it (once, a warn), not a failure (an error line
        // with a stack each time): the held write was a bulk one, whose network error the
        // driver wraps in a MongoBulkWriteError.
        const err = await run.then(() => null, (e: unknown) => e);
        expect(isUnavailable(err), String(err)).toBe(true);
        await ferret.resume();
      }
    } finally {
      await gate.close();
    }
    const sink = sinkFor('crash');
    await new Projector({ store, sink, logger: silentLogger(), batchSize: 800 }).runOnce(signal);
    expect(await sinkCounts(sink, queues)).toEqual(await countsFromJobs(store, queues));
    expect(await store.outboxLag()).toMatchObject({ events: 0 });
  });

  it("the events of an outbox row past the 2^33rd keep ids of their own (past 2^53, beyond a double's exact integers)", async () => {
    const sink = sinkFor('big-ids');
    const n = 10;
    const row: OutboxEvents = {
      rowId: 2 ** 33 + 5, at: await store.dbNow(), n, queue: 'q', kind: 'submitted', fromState: null, toState: 'PENDING',
      waitMs: Array<null>(n).fill(null), runMs: Array<null>(n).fill(null),
      details: { jobIds: Array.from({ length: n }, () => randomUUID()), types: Array<string>(n).fill('t'), attempts: Array<number>(n).fill(0), workerIds: Array<null>(n).fill(null) },
    };
    await sink.init();
    await sink.apply(1, projectEvents([row], { hiId: '0', horizon: '0' }));
    const events = new MongoClient(`${ferret.url}big-ids`, { useBigInt64: true });
    try {
      const docs = await events.db().collection<{ _id: bigint; jobId: string }>('job_events').find({}, { sort: { _id: 1 } }).toArray();
      const first = BigInt(row.rowId) * 2n ** 20n + 1n;
      expect(docs.map((d) => [d._id, d.jobId])).toEqual(row.details!.jobIds.map((id, i) => [first + BigInt(i), id]));
    } finally {
      await events.close();
    }
  });

  it('a projector stopped in the middle of a write to a MongoDB that stopped answering ends at once, and the sink closes', async () => {
    await mixedRun(store, { total: 20, prefix: queueName('frozen') });
    const proxy = await blackholeProxy(ferret.port);
    const sink = new MongoTelemetrySink(`mongodb://127.0.0.1:${proxy.port}/frozen-stop`);
    await sink.init();
    let applying = (): void => undefined;
    const applied = new Promise<void>((resolve) => (applying = resolve));
    // The sink, telling when a batch's apply begins (init done above, before the partition).
    const watched: TelemetrySink = {
      name: sink.name, storesEvents: sink.storesEvents, init: async () => undefined,
      apply: (batchId, update, s) => (applying(), sink.apply(batchId, update, s)),
      read: (p) => sink.read(p), prune: (p) => sink.prune(p), close: () => sink.close(),
    };
    proxy.blackhole();
    const stop = new AbortController();
    try {
      const run = new Projector({ store, sink: watched, logger: silentLogger() }).runOnce(stop.signal).then(() => null, (e: unknown) => e);
      await applied;
      stop.abort(new Error('stopped'));
      // Not after the driver's 30 s socket timeout: that held the server's shutdown.
      expect(String(await run)).toBe('Error: stopped');
      await sink.close();
    } finally {
      proxy.resume();
    }
    // The batch it left open is finished by the next run, as after a crash.
    await new Projector({ store, sink: sinkFor('frozen-stop'), logger: silentLogger() }).runOnce(signal);
    expect(await store.outboxLag()).toMatchObject({ events: 0 });
  });

  it('retention deletes minute documents older than MINUTES_KEPT in bounded passes, and keeps the newer ones', async () => {
    const sink = sinkFor('retention');
    await sink.init();
    const now = new Date('2033-03-01T12:00:30Z');
    const minutesAgo = (m: number) => new Date(Date.parse('2033-03-01T12:00:00Z') - m * 60_000);
    const bucket = (queue: string, minute: Date): [string, MinuteDelta] => [
      `${queue}|${minute.toISOString()}`,
      { queue, minute, submitted: 1, completed: 1, failed: 0, deadLettered: 0, wait: {}, run: {} },
    ];
    const old = [1, 2, 3].flatMap((k) => ['a', 'b'].map((q) => bucket(q, minutesAgo(MINUTES_KEPT + k))));
    const kept = [bucket('a', minutesAgo(MINUTES_KEPT - 1)), bucket('b', minutesAgo(1440)), bucket('a', minutesAgo(0))];
    await sink.apply(1, { counts: new Map(), minutes: new Map([...old, ...kept]), events: [], outbox: { hiId: '0', horizon: '0' } });
    // A pass deletes at most `limit`: a full one means more may be due.
    expect(await sink.prune({ limit: 2, now })).toBe(2);
    const retained = await new Projector({ store, sink, logger: silentLogger(), retentionBatchSize: 2 }).retain(signal, { now });
    expect(retained).toBe(4);
    const left = await sink.read({ queues: null, since: new Date(0) });
    expect(left.minutes.map((m) => `${m.queue}|${m.minute.toISOString()}`).sort()).toEqual(kept.map(([k]) => k).sort());
  });

  it("recent events (FerretDB: no TTL) go by retention in bounded passes, by the database's clock, not the leader's", async () => {
    const sink = sinkFor('events-retention');
    await sink.init();
    const now = await store.dbNow();
    const hoursAgo = (h: number) => new Date(now.getTime() - h * 3600_000);
    const event = (id: number, at: Date): JobEvent => ({
      id: BigInt(id), jobId: randomUUID(), queue: 'q', type: 't', kind: 'submitted', fromState: null, toState: 'PENDING',
      attempt: 0, workerId: null, at, waitMs: null, runMs: null,
    });
    const minute = new Date(Math.floor(hoursAgo(1).getTime() / 60_000) * 60_000);
    await sink.apply(1, {
      counts: new Map(),
      minutes: new Map([[`q|${minute.toISOString()}`, { queue: 'q', minute, submitted: 1, completed: 0, failed: 0, deadLettered: 0, wait: {}, run: {} }]]),
      events: [event(1, hoursAgo(28)), event(2, hoursAgo(27)), event(3, hoursAgo(26)), event(4, hoursAgo(1)), event(5, hoursAgo(1))],
      outbox: { hiId: '0', horizon: '0' },
    });
    const events = new MongoClient(`${ferret.url}events-retention`);
    try {
      const left = async () => (await events.db().collection<{ _id: number }>('job_events').find({}, { sort: { _id: 1 } }).toArray()).map((d) => d._id);
      // The apply deletes none of them (all of a quiet day's at once could outlast the socket timeout on every retry).
      expect(await left()).toEqual([1, 2, 3, 4, 5]);
      // At most `limit` per pass, oldest first.
      expect(await sink.prune({ limit: 2, now })).toBe(2);
      expect(await left()).toEqual([3, 4, 5]);
      // The leader's clock three days ahead: retention still goes by the database's, so the
      // hour-old event and minute stay.
      vi.useFakeTimers({ toFake: ['Date'] });
      vi.setSystemTime(now.getTime() + 3 * 86_400_000);
      await new Projector({ store, sink, logger: silentLogger(), retentionBatchSize: 2 }).retain(signal);
      vi.useRealTimers();
      expect(await left()).toEqual([4, 5]);
      expect((await sink.read({ queues: ['q'], since: new Date(0) })).minutes.map((m) => m.minute)).toEqual([minute]);
    } finally {
      vi.useRealTimers();
      await events.close();
    }
  });
});

describeFerret('a server with MONGODB_URL', () => {
  let server: Awaited<ReturnType<typeof serverSetup>>;
  let telemetry: FerretdbHandle;
  beforeAll(async () => {
    telemetry = (await ferretdbStart())!;
    server = await serverSetup({ mongodbUrl: `${telemetry.url}served`, projectIntervalMs: '200' });
  });
  afterAll(async () => {
    await telemetry?.stop();
  });

  const submit = (queue: string, n: number) =>
    call(server.clients.jobs, 'submitJobs', { idsOnly: false,
      jobs: Array.from({ length: n }, () => ({ queue, type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) })),
    });

  // The stated bound is the projector interval (200 ms here) plus the time to apply what
  // waits (docs/telemetry.md). On a quiet machine the stats catch up 0.13-0.17 s after the
  // last ack; under the whole suite's load (FerretDB and 31 other files on 2 cores) it once
  // took over 2 s, so the test allows 10 s: it shows the bound holds, not how fast it is.
  it('stats are eventually consistent: within the stated bound (projector interval + applying one batch)', async () => {
    const queue = queueName();
    await submit(queue, 25);
    const w = new RawWorker(server.clients);
    await w.hello('stats-worker', [queue], 10);
    w.autoComplete();
    await waitFor(() => w.jobs.length === 25 && w.jobs.every((j) => w.acks(j.job!.id).length === 1), { what: 'acks' });
    const stats = (await waitFor(
      async () => {
        const s = (await call(server.clients.queues, 'getQueueStats', { name: queue })).stats!;
        // (free slots read 0 for the moment a claim holds them reserved)
        return s.completed === 25 && s.completed60m === 25 && s.freeSlots === 10 ? s : null;
      },
      { timeoutMs: 10_000, what: 'stats to catch up within the bound' },
    ))!;
    expect(stats).toMatchObject({ pending: 0, running: 0, completed: 25, submitted60m: 25, completed60m: 25, connectedWorkers: 1, freeSlots: 10 });
    // The 25 completions lie in this minute's bucket or the one before, both inside the
    // 5-minute window; the 1-minute window takes the one before only in part (completedRate).
    expect(stats.throughput?.last5m).toBeCloseTo(25 / 300, 9);
    expect(stats.throughput?.last1m).toBeGreaterThan(0);
    expect(stats.throughput?.last1m).toBeLessThanOrEqual(25 / 60 + 1e-9);
    expect(stats.wait?.p99Ms).toBeGreaterThan(0);
    w.close();
  });

  it('the queue does not depend on the telemetry store: stopped, jobs still flow and events wait; started, they drain', async () => {
    const queue = queueName();
    await telemetry.suspend();
    await submit(queue, 50);
    const claimed = await call(server.clients.workers, 'claimJobs', { workerId: 'offline-telemetry', queues: [queue], max: 50, jobTypes: [] });
    expect(claimed.jobs).toHaveLength(50);
    for (const l of claimed.jobs) {
      await call(server.clients.workers, 'completeJob', { jobId: l.job!.id, leaseToken: l.leaseToken, result: {} });
    }
    // 150 events (submitted, claimed, completed) wait in the outbox.
    expect((await server.server.store.outboxLag()).events).toBeGreaterThanOrEqual(150);
    await telemetry.resume();
    await waitFor(async () => (await server.server.store.outboxLag()).events === 0, { timeoutMs: 30_000, what: 'the outbox to drain' });
    const stats = (await call(server.clients.queues, 'getQueueStats', { name: queue })).stats!;
    expect(stats).toMatchObject({ completed: 50, pending: 0, running: 0 });
  });

  it('a read from a MongoDB that stopped answering (frozen, partitioned) answers UNAVAILABLE, not after the socket timeout', async () => {
    const proxy = await blackholeProxy(telemetry.port);
    const sink = new MongoTelemetrySink(`mongodb://127.0.0.1:${proxy.port}/frozen`, { readTimeoutMs: 300 });
    sinks.push(sink);
    const read = () => sink.read({ queues: null, since: new Date(0) });
    await read();
    proxy.blackhole();
    try {
      const err = await read().then(() => null, (e: unknown) => e);
      expect(isUnavailable(err), String(err)).toBe(true);
      expect((err as Error).message).toBe('telemetry store unavailable: MongoDB did not answer within 300 ms');
    } finally {
      proxy.resume();
    }
    await waitFor(() => read().then(() => true, () => false), { what: 'reads to answer again' });
  });

  it('a sink first used while MongoDB is down answers UNAVAILABLE, and reaches it once it is back', async () => {
    const late = (await ferretdbStart())!;
    try {
      await late.suspend();
      const sink = new MongoTelemetrySink(`${late.url}late`, { serverSelectionTimeoutMs: 500 });
      sinks.push(sink);
      const read = () => sink.read({ queues: null, since: new Date(0) });
      const err = await read().then(() => null, (e: unknown) => e);
      expect(isUnavailable(err), String(err)).toBe(true);
      expect((err as Error).message).toMatch(/^telemetry store unavailable: /);
      // The driver keeps a client whose first connect failed closed for good; the sink does not.
      await late.resume();
      await waitFor(() => read().then(() => true, () => false), { timeoutMs: 30_000, what: 'the sink to reach MongoDB again' });
      await sink.init();
    } finally {
      await late.stop();
    }
  });
});

import type pg from 'pg';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { Store } from '../../src/store/store.js';
import { PostgresTelemetrySink } from '../../src/telemetry/pg-sink.js';
import { ServerMetrics } from '../../src/telemetry/metrics.js';
import { Projector } from '../../src/maintenance/projector.js';
import { silentLogger } from '../../src/logger.js';
import { MINUTES_KEPT, projectEvents, telemetryStats } from '../../src/telemetry/projection.js';
import { OUTBOX_EVENTS, storeSetup } from '../helpers/store-setup.js';
import { countsFromJobs, mixedRun } from '../helpers/mixed-run.js';
import { queueName } from '../helpers/factories.js';

let store: Store;
let sql: pg.Pool;
let url: string;
let sink: PostgresTelemetrySink;
beforeAll(async () => {
  ({ store, sql, url } = await storeSetup());
  sink = new PostgresTelemetrySink(store);
});

const projector = () => new Projector({ store, sink, logger: silentLogger(), batchSize: 700 });
const signal = new AbortController().signal;

/** The sink's counts, without zero entries, in the shape of countsFromJobs. */
async function sinkCounts(queues: string[]) {
  const out: Record<string, Record<string, number>> = {};
  for (const s of await telemetryStats(sink, { queues: null, now: await store.dbNow() })) {
    if (!queues.includes(s.queue)) continue;
    for (const [state, n] of Object.entries(s.counts)) if (n) (out[s.queue] ??= {})[state] = n;
  }
  return out;
}

describe('projector into the embedded Postgres sink', () => {
  it('after a mixed run of 5,000 jobs the projected counts match the jobs table exactly', async () => {
    const queues = await mixedRun(store, { total: 5000, prefix: queueName('mix') });
    const run = await projector().runOnce(signal);
    expect(run.events).toBeGreaterThan(10_000);
    expect(await sinkCounts(queues)).toEqual(await countsFromJobs(store, queues));
    expect(await store.outboxLag()).toMatchObject({ events: 0 });
    // Recent events: the projected outbox rows, copied whole.
    const { rows: recent } = await sql.query<{ n: number }>('SELECT coalesce(sum(n), 0)::int AS n FROM evora.telemetry_recent_events');
    expect(recent[0]!.n).toBe(run.events);

    const stats = (await telemetryStats(sink, { queues: [queues[0]!], now: await store.dbNow() }))[0]!;
    const { rows } = await sql.query<{ completed: number }>(
      `SELECT count(*)::int AS completed FROM evora.jobs WHERE queue = $1 AND state = 'COMPLETED'`,
      [queues[0]],
    );
    expect(stats.completed60m).toBe(rows[0]!.completed);
    expect(stats.submitted60m).toBeGreaterThan(1600);
    expect(stats.failed60m).toBeGreaterThan(0);
    expect(stats.deadLettered60m).toBeGreaterThan(0);
    expect(stats.failureRate).toBeGreaterThan(0);
    expect(stats.failureRate).toBeLessThan(1);
    expect(stats.throughput.m60).toBeCloseTo(stats.completed60m / 3600, 6);
    expect(stats.waitMs.p50).not.toBeNull();
    expect(stats.runMs.p99).not.toBeNull();
  });

  it('a crash between applying a batch and closing it: the next run applies it again and counts stay exact', async () => {
    const queues = await mixedRun(store, { total: 600, prefix: queueName('crash') });
    // First attempt: open and apply, then "crash" before closing.
    const batch = (await store.projectorBatchOpen({ sink: sink.name, limit: 500, details: false }))!;
    await sink.apply(batch.batchId, projectEvents(batch.rows, batch.outbox));
    // Restarted projector: reopens the same batch (same rows), re-applies (a no-op), closes, continues.
    const again = await store.projectorBatchOpen({ sink: sink.name, limit: 500, details: false });
    expect(again?.batchId).toBe(batch.batchId);
    expect(again?.rows.map((r) => r.rowId)).toEqual(batch.rows.map((r) => r.rowId));
    await projector().runOnce(signal);
    expect(await sinkCounts(queues)).toEqual(await countsFromJobs(store, queues));
  });

  it('the outbox read without details projects as the read with details does, and the details are the outbox events', async () => {
    await mixedRun(store, { total: 1200, prefix: queueName('cols') });
    const detailed = (await store.projectorBatchOpen({ sink: sink.name, limit: 1_000_000, details: true }))!;
    const plain = (await store.projectorBatchOpen({ sink: sink.name, limit: 1_000_000, details: false }))!;
    expect(plain.batchId).toBe(detailed.batchId); // reopened: the same rows
    // Columns come collapsed where a statement's values agree and whole where they do not:
    // the sweeper's statement spans queues, a failure statement retries some jobs and
    // dead-letters others, a hand-off row holds `submitted` and `claimed`.
    expect(detailed.rows.some((r) => r.n > 1 && typeof r.queue === 'string' && typeof r.kind === 'string')).toBe(true);
    expect(detailed.rows.some((r) => Array.isArray(r.queue))).toBe(true);
    expect(detailed.rows.some((r) => Array.isArray(r.kind))).toBe(true);
    expect(detailed.rows.some((r) => Array.isArray(r.fromState) && r.fromState.includes(null))).toBe(true);

    const withDetails = projectEvents(detailed.rows, detailed.outbox);
    const without = projectEvents(plain.rows, plain.outbox);
    expect(without.counts).toEqual(withDetails.counts);
    expect(without.minutes).toEqual(withDetails.minutes);
    expect(without.events).toEqual([]);
    // Unpacked, the details are the outbox's events one by one, in their order.
    const { rows: flat } = await sql.query(
      `SELECT id::text AS "id", job_id AS "jobId", queue, type, kind, from_state AS "fromState", to_state AS "toState",
              attempt, worker_id AS "workerId", at, wait_ms AS "waitMs", run_ms AS "runMs"
       FROM ${OUTBOX_EVENTS} f WHERE outbox_id <= $1 AND xid < $2::xid8 ORDER BY id`,
      [detailed.outbox.hiId, detailed.outbox.horizon],
    );
    expect(withDetails.events.length).toBeGreaterThan(2400);
    expect(withDetails.events).toEqual(flat.map((e: { id: string }) => ({ ...e, id: BigInt(e.id) })));

    await sink.apply(detailed.batchId, withDetails);
    await store.projectorBatchClose({ batchId: detailed.batchId });
  });

  it('two projectors at once (two leaders overlapping) open one batch at a time: counts stay exact', async () => {
    const queues = await mixedRun(store, { total: 3000, prefix: queueName('race') });
    // The second as another server process would run it: a store (pool) and a sink of its own.
    const other = new Store({ connectionString: url, maxConnections: 4 });
    try {
      const small = (s: Store) => new Projector({ store: s, sink: new PostgresTelemetrySink(s), logger: silentLogger(), batchSize: 100 });
      const projectors = [small(store), small(other)];
      for (let round = 0; round < 100 && (await store.outboxLag()).events > 0; round++) {
        await Promise.all(projectors.map((p) => p.runOnce(signal)));
      }
      expect(await store.outboxLag()).toMatchObject({ events: 0 });
      expect(await sinkCounts(queues)).toEqual(await countsFromJobs(store, queues));
      const { rows } = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM evora.projector_batches');
      expect(rows[0]!.n).toBe(0);
    } finally {
      await other.close();
    }
  });

  it('the outbox lag: exact over the first exactRows rows, an estimate marked as such beyond them', async () => {
    await projector().runOnce(signal);
    expect(await store.outboxLag()).toEqual({ events: 0, estimated: false, oldestSeconds: 0 });
    // 40 outbox rows of 1 and 3 events in turn (80 events), the oldest written 90 s ago.
    const now = await store.dbNow();
    const { rows: [first] } = await sql.query<{ id: string }>(
      `WITH ins AS (INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
       SELECT $1::timestamptz + g * interval '1 second', k, array_fill(gen_random_uuid(), ARRAY[k]), array_fill('lag'::text, ARRAY[k]),
              array_fill('t'::text, ARRAY[k]), array_fill('submitted'::evora.job_event_kind, ARRAY[k]), array_fill(NULL::evora.job_state, ARRAY[k]),
              array_fill('PENDING'::evora.job_state, ARRAY[k]), array_fill(0, ARRAY[k]), array_fill(NULL::text, ARRAY[k]),
              array_fill(NULL::float8, ARRAY[k]), array_fill(NULL::float8, ARRAY[k])
       FROM generate_series(0, 39) g, LATERAL (SELECT CASE WHEN g % 2 = 0 THEN 1 ELSE 3 END AS k) n
       RETURNING id) SELECT min(id) AS id FROM ins`,
      [new Date(now.getTime() - 90_000)],
    );
    try {
      // Short: counted exactly (the default counts 1,000 rows; 40 and exactly 40 as well).
      expect(await store.outboxLag({ now })).toEqual({ events: 80, estimated: false, oldestSeconds: 90 });
      expect(await store.outboxLag({ now, exactRows: 40 })).toMatchObject({ events: 80, estimated: false });
      // Long (more rows than counted): the 10 first rows, 20 events, then 30 more rows of 2
      // events each on average, and marked as an estimate; the age is still exact.
      expect(await store.outboxLag({ now, exactRows: 10 })).toEqual({ events: 80, estimated: true, oldestSeconds: 90 });
      // A row in between removed: the id range still counts it (never fewer rows than there are).
      await sql.query('DELETE FROM evora.job_events WHERE id = $1::int8 + 20', [first!.id]);
      expect(await store.outboxLag({ now, exactRows: 10 })).toEqual({ events: 80, estimated: true, oldestSeconds: 90 });
      expect(await store.outboxLag({ now, exactRows: 39 })).toMatchObject({ events: 79, estimated: false });
      // The gauges: the same numbers on /metrics.
      const metrics = new ServerMetrics({ store });
      const text = await metrics.registry.metrics();
      expect(text).toMatch(/^evora_outbox_lag_events 79$/m);
      expect(text).toMatch(/^evora_outbox_lag_estimated 0$/m);
    } finally {
      await sql.query('DELETE FROM evora.job_events WHERE id >= $1::int8', [first!.id]);
    }
  });

  it('a stopped projector (aborted signal) opens no batch', async () => {
    await mixedRun(store, { total: 50, prefix: queueName('stopped') });
    const stopped = new AbortController();
    stopped.abort();
    expect(await projector().runOnce(stopped.signal)).toEqual({ batches: 0, events: 0 });
    expect((await store.outboxLag()).events).toBeGreaterThan(0);
  });

  it('retention deletes minute buckets older than MINUTES_KEPT in bounded passes, and keeps the newer ones', async () => {
    const queue = queueName('ret');
    const now = new Date();
    const minutesAgo = (m: number) => new Date(Math.floor(now.getTime() / 60_000) * 60_000 - m * 60_000);
    const old = [1, 2, 3, 4, 5].map((k) => minutesAgo(MINUTES_KEPT + k));
    const kept = [minutesAgo(MINUTES_KEPT - 1), minutesAgo(1440), minutesAgo(1)];
    await sql.query(
      `INSERT INTO evora.telemetry_minutes (queue, minute, completed) SELECT $1, m, 1 FROM unnest($2::timestamptz[]) m`,
      [queue, [...old, ...kept]],
    );
    // A pass deletes at most `limit`: a full one means more may be due.
    expect(await sink.prune({ limit: 2, now })).toBeGreaterThanOrEqual(2);
    const retained = await new Projector({ store, sink, logger: silentLogger(), retentionBatchSize: 2 }).retain(signal, { now });
    expect(retained).toBeGreaterThanOrEqual(3);
    const { rows } = await sql.query<{ minute: Date }>('SELECT minute FROM evora.telemetry_minutes WHERE queue = $1 ORDER BY minute', [queue]);
    expect(rows.map((r) => r.minute.getTime())).toEqual(kept.map((d) => d.getTime()).sort((a, b) => a - b));
    // Every read still finds its buckets: the longest series reads back 1,440 minutes.
    const read = await sink.read({ queues: [queue], since: minutesAgo(1441) });
    expect(read.minutes).toHaveLength(2);
    // The projector runs retention after its batches (its first run, then once a minute).
    await sql.query(`INSERT INTO evora.telemetry_minutes (queue, minute, completed) VALUES ($1, $2, 1)`, [queue, minutesAgo(MINUTES_KEPT + 10)]);
    await projector().runOnce(signal);
    expect((await sql.query('SELECT 1 FROM evora.telemetry_minutes WHERE queue = $1', [queue])).rowCount).toBe(3);
  });

  it('recent events past their retention are deleted by retention in bounded passes, not by the apply of a batch', async () => {
    // Outbox ids no projected row has (identity ids are positive); 25 h old, and 1 h old.
    const now = await store.dbNow();
    const hoursAgo = (h: number) => new Date(now.getTime() - h * 3600_000);
    const recent = async () =>
      (await sql.query<{ outbox_id: string }>('SELECT outbox_id FROM evora.telemetry_recent_events WHERE outbox_id < 0 ORDER BY outbox_id')).rows.map((r) => Number(r.outbox_id));
    await sql.query(
      `INSERT INTO evora.telemetry_recent_events (outbox_id, at, n, job_ids, queues, types, kinds, to_states, attempts, worker_ids)
       SELECT id, at, 1, ARRAY[gen_random_uuid()], ARRAY['q'], ARRAY['t'], ARRAY['submitted'::evora.job_event_kind],
              ARRAY['PENDING'::evora.job_state], ARRAY[0], ARRAY[NULL::text]
       FROM unnest($1::bigint[], $2::timestamptz[]) AS r(id, at)`,
      [[-1, -2, -3, -4, -5, -6, -7], [hoursAgo(29), hoursAgo(28), hoursAgo(27), hoursAgo(26), hoursAgo(25), hoursAgo(1), hoursAgo(1)]],
    );
    // Applying a batch deletes none of them: the whole backlog in the apply's transaction
    // (a day's events after a quiet day) could outlast the query timeout on every retry.
    await mixedRun(store, { total: 50, prefix: queueName('recent') });
    const batch = (await store.projectorBatchOpen({ sink: sink.name, limit: 100_000, details: false }))!;
    await sink.apply(batch.batchId, projectEvents(batch.rows, batch.outbox));
    await store.projectorBatchClose({ batchId: batch.batchId });
    expect(await recent()).toEqual([-7, -6, -5, -4, -3, -2, -1]);
    // Retention deletes them, at most `limit` per pass, oldest first, and keeps the newer ones.
    await sink.prune({ limit: 2, now });
    expect(await recent()).toEqual([-7, -6, -5, -4, -3]);
    await new Projector({ store, sink, logger: silentLogger(), retentionBatchSize: 2 }).retain(signal, { now });
    expect(await recent()).toEqual([-7, -6]);
  });

  it("a step back of this process's clock does not hold retention back (its interval is measured on a monotonic clock)", async () => {
    const queue = queueName('step');
    const p = new Projector({ store, sink, logger: silentLogger(), retentionIntervalMs: 0 });
    await p.runOnce(signal); // retention ran
    const now = await store.dbNow();
    await sql.query(`INSERT INTO evora.telemetry_minutes (queue, minute, completed) VALUES ($1, $2, 1)`, [
      queue,
      new Date(Math.floor(now.getTime() / 60_000) * 60_000 - (MINUTES_KEPT + 10) * 60_000),
    ]);
    // The clock set back an hour (an NTP step): the next run is still due for retention.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(Date.now() - 3600_000);
      await p.runOnce(signal);
    } finally {
      vi.useRealTimers();
    }
    expect((await sql.query('SELECT 1 FROM evora.telemetry_minutes WHERE queue = $1', [queue])).rowCount).toBe(0);
  });

  it('retention deletes the markers of closed batches only: a batch re-applied after a crash, or applied once closed, counts once', async () => {
    const queues = await mixedRun(store, { total: 600, prefix: queueName('marks') });
    const batch = (await store.projectorBatchOpen({ sink: sink.name, limit: 500, details: false }))!;
    await sink.apply(batch.batchId, projectEvents(batch.rows, batch.outbox));
    // "Crash" before the close; retention runs meanwhile: the open batch's marker stays.
    await sink.prune({ limit: 1000, now: await store.dbNow() });
    const marker = async (id: number) =>
      (await sql.query('SELECT 1 FROM evora.telemetry_applied_batches WHERE batch_id = $1', [id])).rowCount;
    expect(await marker(batch.batchId)).toBe(1);
    await projector().runOnce(signal); // re-applies (a no-op), closes, projects the rest
    expect(await sinkCounts(queues)).toEqual(await countsFromJobs(store, queues));
    await sink.prune({ limit: 1000, now: await store.dbNow() });
    const { rows } = await sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM evora.telemetry_applied_batches a
       WHERE NOT EXISTS (SELECT 1 FROM evora.projector_batches b WHERE b.id = a.batch_id)`,
    );
    expect(rows[0]!.n).toBe(0);
    // A projector that stalled with the batch in hand applies it after its close: nothing changes.
    expect(await store.telemetryApply({ batchId: batch.batchId, counts: [{ queue: queues[0]!, state: 'COMPLETED', n: 1000 }], minutes: [], outbox: batch.outbox })).toEqual({ applied: false });
    await sink.apply(batch.batchId, projectEvents(batch.rows, batch.outbox));
    expect(await sinkCounts(queues)).toEqual(await countsFromJobs(store, queues));
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { PostgresTelemetrySink } from '../../src/store/telemetry-pg.js';
import { Projector } from '../../src/services/projector.js';
import { silentLogger } from '../../src/logger.js';
import { projectEvents, telemetryStats } from '../../src/telemetry/projection.js';
import { storeSetup } from '../helpers/store-setup.js';
import { countsFromJobs, mixedRun } from '../helpers/mixed-run.js';
import { queueName } from '../helpers/factories.js';

let store: Store;
let sink: PostgresTelemetrySink;
beforeAll(async () => {
  ({ store } = await storeSetup());
  sink = new PostgresTelemetrySink(store.pool);
});

const projector = () => new Projector({ store, sink, isLeader: () => true, logger: silentLogger(), batchSize: 700 });

/** The sink's counts, without zero entries, in the shape of countsFromJobs. */
async function sinkCounts(queues: string[]) {
  const out: Record<string, Record<string, number>> = {};
  for (const s of await telemetryStats(sink, { queues: null })) {
    if (!queues.includes(s.queue)) continue;
    for (const [state, n] of Object.entries(s.counts)) if (n) (out[s.queue] ??= {})[state] = n;
  }
  return out;
}

describe('projector into the embedded Postgres sink', () => {
  it('after a mixed run of 5,000 jobs the projected counts match the jobs table exactly', async () => {
    const queues = await mixedRun(store, { total: 5000, prefix: queueName('mix') });
    const run = await projector().runOnce();
    expect(run.events).toBeGreaterThan(10_000);
    expect(await sinkCounts(queues)).toEqual(await countsFromJobs(store, queues));
    expect(await store.outboxLag()).toMatchObject({ events: 0 });
    // Recent events: the projected outbox rows, copied whole.
    const { rows: recent } = await store.pool.query<{ n: number }>('SELECT coalesce(sum(n), 0)::int AS n FROM evora.telemetry_recent_events');
    expect(recent[0]!.n).toBe(run.events);

    const stats = (await telemetryStats(sink, { queues: [queues[0]!] }))[0]!;
    const { rows } = await store.pool.query<{ completed: number }>(
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
    const batch = (await store.projectorBatchOpen({ sink: sink.name, limit: 500 }))!;
    await sink.apply(batch.batchId, projectEvents(batch.events, batch.outbox));
    // Restarted projector: reopens the same batch (same rows), re-applies (a no-op), closes, continues.
    const again = await store.projectorBatchOpen({ sink: sink.name, limit: 500 });
    expect(again?.batchId).toBe(batch.batchId);
    expect(again?.events.map((e) => e.id)).toEqual(batch.events.map((e) => e.id));
    await projector().runOnce();
    expect(await sinkCounts(queues)).toEqual(await countsFromJobs(store, queues));
  });

  it('only the leader projects', async () => {
    const follower = new Projector({ store, sink, isLeader: () => false, logger: silentLogger() });
    expect(await follower.runOnce()).toEqual({ ran: false, batches: 0, events: 0 });
  });
});

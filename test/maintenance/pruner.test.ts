import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { PruneCount } from '../../src/domain/job.js';
import { pino } from 'pino';
import { silentLogger, type Logger } from '../../src/logger.js';
import { Maintainer } from '../../src/maintenance/maintainer.js';
import { Projector } from '../../src/maintenance/projector.js';
import { Pruner } from '../../src/maintenance/pruner.js';
import type { Store } from '../../src/store/store.js';
import { ServerMetrics } from '../../src/telemetry/metrics.js';
import { PostgresTelemetrySink } from '../../src/telemetry/pg-sink.js';
import { telemetryStats } from '../../src/telemetry/projection.js';
import { jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The pruner service (src/maintenance/pruner.ts): its batches, its stop, its metrics, that
 * telemetry is left exactly as it was, that only the elected leader runs it, and audit
 * retention. Which jobs one batch deletes: test/store/prune.test.ts; who may delete audit
 * events: test/store/audit.test.ts.
 */

let store: Store;
let sql: pg.Pool;
let url: string;
let sink: PostgresTelemetrySink;
let projector: Projector;
const started: { stop(): Promise<void> }[] = [];

beforeAll(async () => {
  ({ store, sql, url } = await storeSetup());
  sink = new PostgresTelemetrySink(store);
  projector = new Projector({ store, sink, logger: silentLogger() });
});
afterEach(async () => {
  for (const s of started.splice(0)) await s.stop();
});

const signal = new AbortController().signal;
const T0 = new Date('2033-05-01T00:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

function pruner(
  opts: { batchSize?: number; intervalMs?: number; onPruned?: (counts: PruneCount[]) => void; onAuditPruned?: (events: number) => void; auditRetentionDays?: number | null; logger?: Logger } = {},
) {
  const p = new Pruner({ store, logger: opts.logger ?? silentLogger(), intervalMs: opts.intervalMs ?? 60_000, startJitterMaxMs: 0, batchPauseMs: 0, ...opts });
  started.push(p);
  return p;
}

async function projectAll(): Promise<void> {
  while ((await projector.runOnce(signal)).events > 0);
}

/** `n` jobs of a new queue (retention 1 s for completed jobs), completed at `when`, their events projected. */
async function completedJobs(n: number, when: Date, queue = queueName('done')): Promise<string> {
  await store.queueUpsert({ name: queue, completedRetentionSeconds: 1 });
  await store.jobSubmitMany({ jobs: jobInputs(queue, n), now: when });
  const claimed = await store.jobClaim({ queues: [queue], limit: n, workerId: 'w', now: when });
  await store.jobCompleteMany({ completions: claimed.map((j) => ({ id: j.id, token: j.leaseToken! })), now: when });
  await projectAll();
  return queue;
}

async function jobCount(queue: string): Promise<number> {
  return (await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1', [queue])).rows[0]!.n;
}

describe('the pruner', () => {
  it('deletes in bounded batches until one comes back short, and reports each to onPruned', async () => {
    // Everything older that other tests left is pruned first, so the batches below are this test's.
    await projectAll();
    await pruner().runOnce(signal, { now: at(100 * 365 * 86_400) });
    const queue = await completedJobs(30, at(0));
    const batches: number[] = [];
    const run = await pruner({ batchSize: 7, onPruned: (c) => batches.push(c.reduce((s, x) => s + x.jobs, 0)) }).runOnce(signal, { now: at(60) });
    expect(run).toEqual({ pruned: 30, batches: 5, counts: [{ queue, state: 'COMPLETED', jobs: 30 }], staleSessions: 0, auditEvents: 0, failed: [] });
    expect(batches).toEqual([7, 7, 7, 7, 2]);
    expect(await jobCount(queue)).toBe(0);
  });

  it('an aborted signal ends the run before its next batch; the next run goes on', async () => {
    const queue = await completedJobs(10, at(1000));
    const stopped = new AbortController();
    stopped.abort();
    expect(await pruner({ batchSize: 3 }).runOnce(stopped.signal, { now: at(2000) })).toEqual({ pruned: 0, batches: 0, counts: [], staleSessions: 0, auditEvents: 0, failed: [] });
    expect(await jobCount(queue)).toBe(10);
    expect((await pruner({ batchSize: 3 }).runOnce(signal, { now: at(2000) })).pruned).toBeGreaterThanOrEqual(10);
    expect(await jobCount(queue)).toBe(0);
  });

  it('counts what it deleted in evora_jobs_pruned_total{queue,state}', async () => {
    const metrics = new ServerMetrics({ store });
    const queue = await completedJobs(4, at(3000));
    const p = pruner({ batchSize: 3, onPruned: (counts) => counts.forEach((c) => metrics.jobsPruned.inc({ queue: c.queue, state: c.state }, c.jobs)) });
    await p.runOnce(signal, { now: at(4000) });
    const metric = await metrics.registry.getSingleMetric('evora_jobs_pruned_total')!.get();
    expect(metric.values.find((v) => v.labels.queue === queue)).toMatchObject({ value: 4, labels: { queue, state: 'COMPLETED' } });
    const text = await metrics.registry.metrics();
    expect(text).toContain(`evora_jobs_pruned_total{queue="${queue}",state="COMPLETED"} 4`);
  });

  it('leaves the telemetry stats exactly as they were', async () => {
    const queue = queueName('stats');
    await store.queueUpsert({ name: queue, completedRetentionSeconds: 1, dlqRetentionSeconds: 1, maxAttempts: 1 });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 6), now: at(5000) });
    const claimed = await store.jobClaim({ queues: [queue], limit: 4, workerId: 'w', now: at(5000) });
    await store.jobCompleteMany({ completions: claimed.slice(0, 3).map((j) => ({ id: j.id, token: j.leaseToken! })), now: at(5001) });
    await store.jobFailMany({ failures: [{ id: claimed[3]!.id, token: claimed[3]!.leaseToken!, error: 'x', retryable: false }], now: at(5001) });
    await projectAll();
    const before = await telemetryStats(sink, { queues: [queue], now: await store.dbNow() });
    expect(before[0]!.counts).toMatchObject({ COMPLETED: 3, DLQ: 1, PENDING: 2 });

    const run = await pruner().runOnce(signal, { now: at(6000) });
    expect(run.counts.filter((c) => c.queue === queue)).toEqual(
      expect.arrayContaining([{ queue, state: 'COMPLETED', jobs: 3 }, { queue, state: 'DLQ', jobs: 1 }]),
    );
    expect(await jobCount(queue)).toBe(2);
    await projectAll();
    expect(await store.outboxLag()).toMatchObject({ events: 0 }); // pruning wrote no events
    expect(await telemetryStats(sink, { queues: [queue], now: await store.dbNow() })).toEqual(before);
  });

  it('runs only on the elected leader; when the leader stops, the new leader prunes', async () => {
    const election = `test-${randomBytes(4).toString('hex')}`;
    const make = () => {
      const pruned = { jobs: 0 };
      const maintainer = new Maintainer({
        connectionString: url,
        electionName: election,
        electionIntervalMs: 20,
        logger: silentLogger(),
        services: {
          pruner: new Pruner({ store, logger: silentLogger(), intervalMs: 20, startJitterMaxMs: 0, onPruned: (c) => c.forEach((x) => (pruned.jobs += x.jobs)) }),
        },
      });
      started.push(maintainer);
      return { maintainer, pruned };
    };
    const processes = [make(), make()];
    for (const p of processes) p.maintainer.start();
    const roles = () => {
      const leading = processes.filter((p) => p.maintainer.isLeader);
      if (leading.length !== 1) throw new Error(`${leading.length} leaders`);
      return { leader: leading[0]!, follower: processes.find((p) => !p.maintainer.isLeader)! };
    };
    const { leader, follower } = await waitFor(() => roles(), { what: 'one leader' });
    await waitFor(() => leader.maintainer.services.pruner.state === 'running', { what: "the leader's pruner to run" });
    expect(follower.maintainer.services.pruner.state).toBe('stopped');

    // The service runs on the database's clock: jobs that finished an hour ago, retention 1 s.
    const first = await completedJobs(5, new Date(Date.now() - 3600_000));
    await waitFor(async () => (await jobCount(first)) === 0, { what: "the leader's pruner" });
    expect(leader.pruned.jobs).toBeGreaterThanOrEqual(5);
    expect(follower.pruned.jobs).toBe(0);

    await leader.maintainer.stop();
    expect(leader.maintainer.services.pruner.state).toBe('stopped');
    await waitFor(() => follower.maintainer.isLeader && follower.maintainer.services.pruner.state === 'running', { what: 'the other to take over' });
    const second = await completedJobs(5, new Date(Date.now() - 3600_000));
    await waitFor(async () => (await jobCount(second)) === 0, { what: "the new leader's pruner" });
    expect(follower.pruned.jobs).toBeGreaterThanOrEqual(5);
  });
});

describe('audit retention', () => {
  const DAY = 86_400_000;
  /** Audit events on `target`, `daysAgo` days before `base`, `n` of each. */
  async function auditEvents(target: string, base: Date, daysAgo: number, n: number): Promise<void> {
    await sql.query(
      `INSERT INTO evora.audit_events (at, actor_kind, action, target)
       SELECT $1, 'anonymous', 'queue.pause', $2 FROM generate_series(1, $3)`,
      [new Date(base.getTime() - daysAgo * DAY), target, n],
    );
  }
  async function ages(target: string, base: Date): Promise<number[]> {
    const { rows } = await sql.query<{ at: Date }>('SELECT at FROM evora.audit_events WHERE target = $1 ORDER BY at', [target]);
    return rows.map((r) => Math.round((base.getTime() - r.at.getTime()) / DAY));
  }

  it('deletes events older than the retention before `now`, in bounded batches; newer ones stay; none without a retention', async () => {
    const target = `audit-${randomBytes(4).toString('hex')}`;
    const dbNow = await store.dbNow();
    await auditEvents(target, dbNow, 400, 5);
    await auditEvents(target, dbNow, 366, 3);
    await auditEvents(target, dbNow, 364, 2);
    await auditEvents(target, dbNow, 40, 1);
    await auditEvents(target, dbNow, 1, 1);
    const all = [400, 400, 400, 400, 400, 366, 366, 366, 364, 364, 40, 1];
    expect(await ages(target, dbNow)).toEqual(all);

    // Kept forever: no audit retention (the default of the class; EVORA_AUDIT_RETENTION_DAYS=0).
    expect((await pruner().runOnce(signal, { now: dbNow })).auditEvents).toBe(0);
    // 365 days before a `now` 100 days back: nothing is that old yet.
    const lines: { msg: string; events?: number; batches?: number; retention_days?: number }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) });
    const audited = pruner({ auditRetentionDays: 365, batchSize: 3, logger });
    expect((await audited.runOnce(signal, { now: new Date(dbNow.getTime() - 100 * DAY) })).auditEvents).toBe(0);
    expect(await ages(target, dbNow)).toEqual(all);
    // 365 days before now: the 8 older events go (batches of 3, 3, 2), the rest stay.
    expect((await audited.runOnce(signal, { now: dbNow })).auditEvents).toBe(8);
    expect(await ages(target, dbNow)).toEqual([364, 364, 40, 1]);
    expect(lines).toEqual([expect.objectContaining({ msg: 'audit events past their retention deleted', events: 8, batches: 3, retention_days: 365 })]);
    // A year later: the database still keeps the last 30 days, whatever `now` says.
    expect((await audited.runOnce(signal, { now: new Date(dbNow.getTime() + 365 * DAY) })).auditEvents).toBe(3);
    expect(await ages(target, dbNow)).toEqual([1]);
  });

  it('a failing job prune does not skip audit retention, nor the other way round; each logs its own failure; evora_audit_events_pruned_total counts', async () => {
    const target = `audit-${randomBytes(4).toString('hex')}`;
    const dbNow = await store.dbNow();
    const metrics = new ServerMetrics({ store });
    const lines: { level: number; msg: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) });
    const p = pruner({ auditRetentionDays: 365, batchSize: 2, logger, onAuditPruned: (n) => metrics.auditEventsPruned.inc(n) });
    const audited = async () => (await metrics.registry.getSingleMetric('evora_audit_events_pruned_total')!.get()).values[0]?.value;
    /** The lines since the last call, as [level, message], durations written `N s`. */
    const logged = () => lines.splice(0).map((l) => [l.level, l.msg.replace(/[\d.]+ s$/, 'N s')]);
    // A real refusal by this test's database (a statement trigger), not a hook in Evora.
    await sql.query(`CREATE FUNCTION public.test_refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'deletes refused by the test'; END $$`);
    const refuse = (table: string) => sql.query(`CREATE TRIGGER test_refuse_delete BEFORE DELETE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION public.test_refuse_delete()`);
    const allow = (table: string) => sql.query(`DROP TRIGGER IF EXISTS test_refuse_delete ON ${table}`);
    try {
      const queue = await completedJobs(3, new Date(dbNow.getTime() - 3600_000));
      await auditEvents(target, dbNow, 400, 3);

      await refuse('evora.jobs');
      const jobsRefused = await p.runOnce(signal, { now: dbNow });
      expect(jobsRefused).toMatchObject({ failed: ['jobs'], pruned: 0, auditEvents: 3 });
      expect(await jobCount(queue)).toBe(3);
      expect(await ages(target, dbNow)).toEqual([]);
      expect(await audited()).toBe(3);
      expect(logged()).toEqual([[50, 'pruner (jobs): tick failed'], [30, 'audit events past their retention deleted']]);

      await allow('evora.jobs');
      await refuse('evora.audit_events');
      await auditEvents(target, dbNow, 400, 2);
      const auditRefused = await p.runOnce(signal, { now: dbNow });
      expect(auditRefused).toMatchObject({ failed: ['audit events'], auditEvents: 0 });
      expect(auditRefused.counts).toContainEqual({ queue, state: 'COMPLETED', jobs: 3 });
      expect(await jobCount(queue)).toBe(0);
      expect(await ages(target, dbNow)).toEqual([400, 400]);
      expect(logged()).toEqual([
        [30, 'finished jobs past their retention deleted'],
        [30, 'pruner (jobs): ticks succeed again after 1 failed tick over N s'],
        [50, 'pruner (audit events): tick failed'],
      ]);

      await allow('evora.audit_events');
      expect(await p.runOnce(signal, { now: dbNow })).toMatchObject({ failed: [], auditEvents: 2 });
      expect(await audited()).toBe(5);
      expect(logged()).toEqual([
        [30, 'audit events past their retention deleted'],
        [30, 'pruner (audit events): ticks succeed again after 1 failed tick over N s'],
      ]);
      expect(await metrics.registry.metrics()).toMatch(/^evora_audit_events_pruned_total 5$/m);
    } finally {
      await allow('evora.jobs');
      await allow('evora.audit_events');
      await sql.query('DROP FUNCTION public.test_refuse_delete()');
    }
  });
});

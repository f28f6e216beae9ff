import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditActor } from '../../src/domain/audit.js';
import { silentLogger } from '../../src/logger.js';
import { Projector } from '../../src/maintenance/projector.js';
import { dbRoleEnsure } from '../../src/store/roles.js';
import { Store } from '../../src/store/store.js';
import { PostgresTelemetrySink } from '../../src/telemetry/pg-sink.js';
import { jobInput, jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';

/**
 * The audit log through the store: every admin operation writes exactly one event (one per
 * changing batch for the bulk ones) with the actor given, in its own statement or
 * transaction; a refused operation writes none; the read pages newest first with filters;
 * and the application role cannot change or delete an event, but for retention's deletes of
 * events older than 30 days through evora.audit_events_prune.
 */

let store: Store;
let sql: pg.Pool;
let url: string;
beforeAll(async () => {
  ({ store, sql, url } = await storeSetup());
});

const T0 = new Date('2033-02-01T00:00:00Z');
const ops: AuditActor = { kind: 'token', tokenId: randomUUID(), name: 'ops' };

interface Row {
  action: string;
  actor_kind: string;
  token_id: string | null;
  token_name: string;
  target: string;
  change: Record<string, unknown>;
  at: Date;
}
async function eventsOn(target: string): Promise<Row[]> {
  return (await sql.query<Row>('SELECT action, actor_kind, token_id, token_name, target, change, at FROM evora.audit_events WHERE target = $1 ORDER BY id', [target])).rows;
}
async function eventCount(): Promise<number> {
  return (await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM evora.audit_events')).rows[0]!.n;
}
const scheduleInput = (name: string, queue: string) => ({
  name, cron: '0 * * * *', timezone: 'UTC', queue, type: 'tick', payload: {}, priority: 0, maxAttempts: null, misfirePolicy: 'skip' as const, misfireCap: 1,
});

describe('admin operations write one audit event each', () => {
  it('queues: upsert (the settings set), pause, resume; an unknown queue writes none', async () => {
    const q = queueName('aq');
    await store.queueUpsert({ name: q, maxAttempts: 3, leaseSeconds: null, rateLimit: { perSecond: 2, burst: 4 }, actor: ops, now: T0 });
    await store.queueSetPaused({ name: q, paused: true, actor: ops, now: T0 });
    await store.queueSetPaused({ name: q, paused: false, now: T0 });
    const events = await eventsOn(q);
    expect(events.map((e) => [e.action, e.actor_kind, e.token_id, e.token_name])).toEqual([
      ['queue.upsert', 'token', ops.tokenId, 'ops'],
      ['queue.pause', 'token', ops.tokenId, 'ops'],
      ['queue.resume', 'anonymous', null, ''],
    ]);
    expect(events[0]!.change).toEqual({ max_attempts: 3, rate_limit: { per_second: 2, burst: 4 } });
    expect(events[0]!.at).toEqual(T0);
    const before = await eventCount();
    await expect(store.queueSetPaused({ name: queueName('missing'), paused: true, actor: ops })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await eventCount()).toBe(before);
  });

  it('jobs: cancel and retry with the previous state; a refused or no-op one writes none', async () => {
    const q = queueName('aj');
    const { job } = await store.jobSubmit({ job: jobInput({ queue: q }), now: T0 });
    await store.jobCancel({ id: job.id, actor: ops, now: T0 });
    await store.jobCancel({ id: job.id, actor: ops, now: T0 }); // already CANCELLED: returned as it is
    await store.jobRetry({ id: job.id, actor: ops, now: T0 });
    await expect(store.jobRetry({ id: job.id, actor: ops })).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    await expect(store.jobCancel({ id: randomUUID(), actor: ops })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect((await eventsOn(job.id)).map((e) => [e.action, e.change])).toEqual([
      ['job.cancel', { previous_state: 'PENDING' }],
      ['job.retry', { previous_state: 'CANCELLED' }],
    ]);
  });

  it('bulk retry and purge: one event per batch that changed jobs; dry runs write none', async () => {
    const q = queueName('ab');
    await store.queueUpsert({ name: q, maxAttempts: 1 });
    await store.jobSubmitMany({ jobs: jobInputs(q, 5), now: T0 });
    const claimed = await store.jobClaim({ queues: [q], limit: 5, workerId: 'w', now: T0 });
    await store.jobFailMany({ failures: claimed.map((j) => ({ id: j.id, token: j.leaseToken!, error: 'boom', retryable: false })), now: T0 });
    const filter = { queue: q, states: ['DLQ' as const], type: null, finishedBefore: null, ids: null };
    const before = await eventCount();
    expect((await store.jobRetryCount({ filter })).jobs).toBe(5);
    expect(await eventCount()).toBe(before);
    expect(await store.jobRetryMany({ filter, batchSize: 2, actor: ops, now: T0 })).toBe(5);
    const retries = (await eventsOn(q)).filter((e) => e.action === 'jobs.retry');
    expect(retries.map((e) => e.change)).toEqual([1, 2, 3].map((batch) => ({
      filter: { queue: q, states: ['DLQ'], type: null, finished_before: null, ids: null },
      jobs: batch < 3 ? 2 : 1,
      batch,
    })));

    // Complete them, project the outbox (a purge never takes unprojected jobs), purge.
    const again = await store.jobClaim({ queues: [q], limit: 5, workerId: 'w', now: T0 });
    await store.jobCompleteMany({ completions: again.map((j) => ({ id: j.id, token: j.leaseToken! })), now: T0 });
    const projector = new Projector({ store, sink: new PostgresTelemetrySink(store), logger: silentLogger() });
    const signal = new AbortController().signal;
    while ((await projector.runOnce(signal)).events > 0);
    const purgeFilter = { ...filter, states: ['COMPLETED' as const] };
    expect(await store.jobPurgeMany({ filter: purgeFilter, batchSize: 10, actor: ops })).toBe(5);
    expect(await store.jobPurgeMany({ filter: purgeFilter, actor: ops })).toBe(0);
    const purges = (await eventsOn(q)).filter((e) => e.action === 'jobs.purge');
    expect(purges.map((e) => [e.token_name, e.change.jobs, e.change.batch])).toEqual([['ops', 5, 1]]);
    expect(await eventsOn('*')).toEqual([]);
  });

  it('schedules: upsert, pause, resume, trigger (the job id), delete; an unknown one writes none', async () => {
    const q = queueName('as');
    const name = `sched-${randomBytes(3).toString('hex')}`;
    await store.scheduleUpsert({ ...scheduleInput(name, q), nextRunAt: new Date(T0.getTime() + 3_600_000), actor: ops, now: T0 });
    await store.scheduleSetPaused({ name, paused: true, actor: ops, now: T0 });
    await store.scheduleSetPaused({ name, paused: false, nextRunAt: new Date(T0.getTime() + 3_600_000), actor: ops, now: T0 });
    const { result } = await store.scheduleTrigger({ name, actor: ops, now: T0 });
    await store.scheduleDelete({ name, actor: ops, now: T0 });
    const before = await eventCount();
    await expect(store.scheduleDelete({ name, actor: ops })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(store.scheduleTrigger({ name, actor: ops })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(store.scheduleSetPaused({ name, paused: true, actor: ops })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await eventCount()).toBe(before);
    const events = await eventsOn(name);
    expect(events.map((e) => e.action)).toEqual(['schedule.upsert', 'schedule.pause', 'schedule.resume', 'schedule.trigger', 'schedule.delete']);
    expect(events[0]!.change).toMatchObject({ cron: '0 * * * *', queue: q, type: 'tick' });
    expect(events[3]!.change).toEqual({ job_id: result.job.id });
    expect(events.every((e) => e.token_name === 'ops' && e.at.getTime() === T0.getTime())).toBe(true);
  });
});

describe('auditList', () => {
  it('pages newest first and filters by action, target and token (id or name)', async () => {
    const q = queueName('al');
    const other: AuditActor = { kind: 'token', tokenId: randomUUID(), name: 'other' };
    await store.queueUpsert({ name: q, actor: ops });
    for (let i = 0; i < 3; i++) await store.queueSetPaused({ name: q, paused: i % 2 === 0, actor: i === 1 ? other : ops });
    const page1 = await store.auditList({ actions: null, target: q, token: null, beforeId: null, limit: 3 });
    expect(page1.events.map((e) => e.action)).toEqual(['queue.pause', 'queue.resume', 'queue.pause']);
    expect(page1.nextBeforeId).toBe(page1.events[2]!.id);
    const page2 = await store.auditList({ actions: null, target: q, token: null, beforeId: page1.nextBeforeId, limit: 3 });
    expect(page2).toEqual({ events: [expect.objectContaining({ action: 'queue.upsert', actor: { kind: 'token', tokenId: ops.tokenId, name: 'ops' } })], nextBeforeId: null });
    const byName = await store.auditList({ actions: null, target: q, token: 'other', beforeId: null, limit: 10 });
    expect(byName.events.map((e) => e.action)).toEqual(['queue.resume']);
    const byId = await store.auditList({ actions: null, target: q, token: other.tokenId, beforeId: null, limit: 10 });
    expect(byId.events).toEqual(byName.events);
    const pauses = await store.auditList({ actions: ['queue.pause', 'queue.upsert'], target: q, token: null, beforeId: null, limit: 10 });
    expect(pauses.events.map((e) => e.action)).toEqual(['queue.pause', 'queue.pause', 'queue.upsert']);
  });
});

describe('append-only for the application role', () => {
  const suffix = randomBytes(4).toString('hex');
  const app = `evora_app_${suffix}`;
  const owner = `evora_owner_${suffix}`;
  const reader = `evora_reader_${suffix}`;
  afterAll(async () => {
    for (const role of [reader, app, owner]) await sql.query(`DROP OWNED BY ${role} CASCADE`).catch(() => undefined);
    for (const role of [reader, app, owner]) await sql.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
  });
  /** A client of `role` (password `pw-<suffix>`) on the test database. */
  async function connectAs(role: string): Promise<pg.Client> {
    const u = new URL(url);
    u.username = role;
    u.password = `pw-${suffix}`;
    const client = new pg.Client({ connectionString: u.toString() });
    await client.connect();
    return client;
  }

  it('may insert and read events, never update or delete them', async () => {
    await store.queueSetPaused({ name: (await store.queueUpsert({ name: queueName('ro') })).queue.name, paused: true });
    await dbRoleEnsure(url, { app, owner, password: `pw-${suffix}` });
    const client = await connectAs(app);
    try {
      expect((await client.query('SELECT count(*)::int AS n FROM evora.audit_events')).rows[0].n).toBeGreaterThan(0);
      await client.query("INSERT INTO evora.audit_events (at, actor_kind, action, target) VALUES (now(), 'anonymous', 'queue.pause', 'x')");
      await expect(client.query("UPDATE evora.audit_events SET target = 'changed'")).rejects.toThrow(/permission denied/);
      await expect(client.query('DELETE FROM evora.audit_events')).rejects.toThrow(/permission denied/);
      await expect(client.query('TRUNCATE evora.audit_events')).rejects.toThrow(/permission denied/);
    } finally {
      await client.end();
    }
  });

  it('deletes old events only through evora.audit_events_prune: never one younger than 30 days, and no other role may call it', async () => {
    await dbRoleEnsure(url, { app, owner, password: `pw-${suffix}` });
    const target = `retention-${suffix}`;
    const insert = (daysAgo: number) => sql.query(
      `INSERT INTO evora.audit_events (at, actor_kind, action, target) VALUES (now() - make_interval(days => $1), 'anonymous', 'queue.pause', $2)`,
      [daysAgo, target],
    );
    for (const days of [400, 31, 29, 1]) await insert(days);
    const left = async () => (await sql.query<{ days: number }>(
      `SELECT round(extract(epoch FROM now() - at) / 86400)::int AS days FROM evora.audit_events WHERE target = $1 ORDER BY at`, [target])).rows.map((r) => r.days);

    // The application role's store: a cut-off a year ahead still spares the last 30 days.
    const u = new URL(url);
    u.username = app;
    u.password = `pw-${suffix}`;
    const appStore = new Store({ connectionString: u.toString(), maxConnections: 1 });
    try {
      expect(await appStore.auditPrune({ retentionDays: 365, limit: 100 })).toBe(1);
      expect(await left()).toEqual([31, 29, 1]);
      expect(await appStore.auditPrune({ retentionDays: 30, limit: 100, now: new Date(Date.now() + 365 * 86_400_000) })).toBe(1);
      expect(await left()).toEqual([29, 1]);
    } finally {
      await appStore.close();
    }
    const client = await connectAs(app);
    try {
      expect((await client.query("SELECT evora.audit_events_prune('infinity', 1000) AS n")).rows[0].n).toBe(0);
      await expect(client.query(`DELETE FROM evora.audit_events WHERE target = '${target}'`)).rejects.toThrow(/permission denied/);
    } finally {
      await client.end();
    }
    expect(await left()).toEqual([29, 1]);

    // A role that may read the log (granted by hand) may not call it: EXECUTE is not PUBLIC's.
    await sql.query(`CREATE ROLE ${reader} LOGIN PASSWORD 'pw-${suffix}'`);
    await sql.query(`GRANT USAGE ON SCHEMA evora TO ${reader}`);
    await sql.query(`GRANT SELECT ON evora.audit_events TO ${reader}`);
    const readerClient = await connectAs(reader);
    try {
      expect((await readerClient.query('SELECT count(*)::int AS n FROM evora.audit_events WHERE target = $1', [target])).rows[0].n).toBe(2);
      await expect(readerClient.query("SELECT evora.audit_events_prune(now() - interval '40 days', 1000)")).rejects.toThrow(/permission denied for function audit_events_prune/);
    } finally {
      await readerClient.end();
    }
  });
});

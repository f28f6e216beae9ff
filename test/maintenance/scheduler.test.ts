import type pg from 'pg';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { silentLogger } from '../../src/logger.js';
import { Scheduler } from '../../src/maintenance/scheduler.js';
import { cronNextAfter, type MisfirePolicy } from '../../src/domain/schedule.js';
import type { Store } from '../../src/store/store.js';
import { queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The scheduler (src/maintenance/scheduler.ts) over a real database, with time passed in:
 * misfire policies after downtime, pause and resume, trigger, one job per fire when two
 * schedulers overlap, and the wake-up of a sleeping scheduler.
 */

let store: Store;
let sql: pg.Pool;
const started: Scheduler[] = [];
beforeAll(async () => {
  ({ store, sql } = await storeSetup());
});
afterEach(async () => {
  for (const s of started.splice(0)) await s.stop();
});

const signal = new AbortController().signal;
const T0 = new Date('2031-01-01T00:20:00Z');
const at = (iso: string) => new Date(iso);

function scheduler(logger = silentLogger()): Scheduler {
  const s = new Scheduler({ store, logger });
  started.push(s);
  return s;
}

/** An hourly schedule created at T0 (next run 01:00), on a queue of its own. */
async function hourly(policy: MisfirePolicy, over: { cron?: string; misfireCap?: number } = {}) {
  const name = queueName('sched');
  const queue = queueName();
  const cron = over.cron ?? '0 * * * *';
  const { schedule } = await store.scheduleUpsert({
    name,
    cron,
    timezone: 'UTC',
    queue,
    type: 'tick',
    payload: { report: name },
    priority: 0,
    maxAttempts: null,
    misfirePolicy: policy,
    misfireCap: over.misfireCap ?? 100,
    nextRunAt: cronNextAfter(cron, 'UTC', T0),
    now: T0,
  });
  return { name, queue, schedule };
}

async function keysOf(queue: string): Promise<string[]> {
  const { rows } = await sql.query<{ idempotency_key: string }>(
    `SELECT idempotency_key FROM evora.jobs WHERE queue = $1 ORDER BY idempotency_key`,
    [queue],
  );
  return rows.map((r) => r.idempotency_key);
}

describe('scheduler', () => {
  it('a schedule whose time zone no longer exists is warned of and moved a day on, and the others still fire', async () => {
    const broken = await hourly('run_once');
    const healthy = await hourly('run_once');
    // A zone the API would refuse, as a tzdata update can leave a stored one.
    await sql.query(`UPDATE evora.schedules SET timezone = 'Mars/Olympus_Mons' WHERE name = $1`, [broken.name]);
    const lines: { level: number; msg: string; schedule?: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) });
    const now = at('2031-01-01T01:30:00Z');
    const passes = await scheduler(logger).runOnce(signal, { now });
    const fired = passes.flatMap((p) => p.fired);
    const bad = fired.find((f) => f.name === broken.name)!;
    expect(bad.jobs).toEqual([]);
    expect(bad.error).toMatch(/Mars\/Olympus_Mons/);
    expect(bad.nextRunAt).toEqual(new Date(now.getTime() + 86_400_000));
    expect(fired.find((f) => f.name === healthy.name)!.jobs).toHaveLength(1);
    expect(await keysOf(broken.queue)).toEqual([]);
    const warned = lines.filter((l) => l.level === 40 && l.schedule === broken.name);
    expect(warned).toHaveLength(1);
    expect(warned[0]!.msg).toMatch(new RegExp(`^schedule ${broken.name} could not fire: .*Mars/Olympus_Mons`));
  });

  it('downtime across three fire times: SKIP 0 jobs, RUN_ONCE 1, RUN_EACH 3', async () => {
    const skip = await hourly('skip');
    const once = await hourly('run_once');
    const each = await hourly('run_each');
    // Down from T0 until 03:30: 01:00, 02:00 and 03:00 passed with no scheduler.
    await scheduler().runOnce(signal, { now: at('2031-01-01T03:30:00Z') });
    expect(await keysOf(skip.queue)).toEqual([]);
    expect(await keysOf(once.queue)).toEqual([`schedule:${once.name}:2031-01-01T03:00:00Z`]);
    expect(await keysOf(each.queue)).toEqual([
      `schedule:${each.name}:2031-01-01T01:00:00Z`,
      `schedule:${each.name}:2031-01-01T02:00:00Z`,
      `schedule:${each.name}:2031-01-01T03:00:00Z`,
    ]);
    for (const s of [skip, once, each]) {
      const now = await store.scheduleGet({ name: s.name });
      expect(now.nextRunAt.toISOString()).toBe('2031-01-01T04:00:00.000Z');
    }
    const e = await store.scheduleGet({ name: each.name });
    const last = await store.jobGet({ id: e.lastJobId! });
    expect(last.idempotencyKey).toBe(`schedule:${each.name}:2031-01-01T03:00:00Z`);
    expect(last.payload).toEqual({ report: each.name });
    expect(e.lastRunAt!.toISOString()).toBe('2031-01-01T03:00:00.000Z');
    expect((await store.scheduleGet({ name: skip.name })).lastJobId).toBeNull();
  });

  it('a fire on time submits one job, and a second pass at the same time submits none', async () => {
    const s = await hourly('skip');
    const sch = scheduler();
    await sch.runOnce(signal, { now: at('2031-01-01T01:00:00.200Z') });
    await sch.runOnce(signal, { now: at('2031-01-01T01:00:00.300Z') });
    expect(await keysOf(s.queue)).toEqual([`schedule:${s.name}:2031-01-01T01:00:00Z`]);
    const { rows } = await sql.query(`SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1 AND state = 'PENDING'`, [s.queue]);
    expect(rows[0].n).toBe(1);
  });

  it('two schedulers passing at once (a change of leader) submit one job per fire', async () => {
    const s = await hourly('run_each', { cron: '*/5 * * * * *' });
    const a = scheduler();
    const b = scheduler();
    for (let i = 0; i < 12; i++) {
      const now = new Date(T0.getTime() + 5000 * (i + 1) + 100);
      await Promise.all([a.runOnce(signal, { now }), b.runOnce(signal, { now })]);
    }
    const keys = await keysOf(s.queue);
    expect(keys).toHaveLength(12);
    expect(new Set(keys).size).toBe(12);
    expect(keys[0]).toBe(`schedule:${s.name}:2031-01-01T00:20:05Z`);
    expect(keys[11]).toBe(`schedule:${s.name}:2031-01-01T00:21:00Z`);
  });

  it('a paused schedule does not fire; resume skips the fires missed while paused; trigger runs while paused', async () => {
    const s = await hourly('run_each');
    await store.scheduleSetPaused({ name: s.name, paused: true, now: T0 });
    await scheduler().runOnce(signal, { now: at('2031-01-01T03:30:00Z') });
    expect(await keysOf(s.queue)).toEqual([]);

    const { result } = await store.scheduleTrigger({ name: s.name, triggerId: 'manual-1', now: at('2031-01-01T03:31:00Z') });
    expect(result.created).toBe(true);
    expect(result.job.idempotencyKey).toBe(`schedule:${s.name}:trigger:manual-1`);
    const again = await store.scheduleTrigger({ name: s.name, triggerId: 'manual-1' });
    expect(again.result).toMatchObject({ created: false, job: { id: result.job.id } });
    const paused = await store.scheduleGet({ name: s.name });
    expect(paused).toMatchObject({ paused: true, lastJobId: result.job.id });

    const resumeAt = at('2031-01-01T03:40:00Z');
    const resumed = await store.scheduleSetPaused({ name: s.name, paused: false, nextRunAt: cronNextAfter('0 * * * *', 'UTC', resumeAt), now: resumeAt });
    expect(resumed.nextRunAt.toISOString()).toBe('2031-01-01T04:00:00.000Z');
    await scheduler().runOnce(signal, { now: at('2031-01-01T04:00:01Z') });
    expect(await keysOf(s.queue)).toEqual([`schedule:${s.name}:2031-01-01T04:00:00Z`, `schedule:${s.name}:trigger:manual-1`]);
  });

  it('a trigger id sent again after a later fire changes nothing: the last run stays that fire', async () => {
    const s = await hourly('skip');
    const first = await store.scheduleTrigger({ name: s.name, triggerId: 'deploy-1', now: at('2031-01-01T00:30:00Z') });
    await scheduler().runOnce(signal, { now: at('2031-01-01T01:00:01Z') });
    const fired = await store.scheduleGet({ name: s.name });
    expect(fired.lastRunAt?.toISOString()).toBe('2031-01-01T01:00:00.000Z');

    const again = await store.scheduleTrigger({ name: s.name, triggerId: 'deploy-1', now: at('2031-01-01T01:10:00Z') });
    expect(again.result).toMatchObject({ created: false, job: { id: first.result.job.id } });
    expect(await store.scheduleGet({ name: s.name })).toMatchObject({ lastRunAt: fired.lastRunAt, lastJobId: fired.lastJobId });
  });

  it('an upsert that changes nothing keeps updated_at; one that changes a setting moves it', async () => {
    const s = await hourly('skip');
    const input = { ...s.schedule, nextRunAt: s.schedule.nextRunAt };
    const same = await store.scheduleUpsert({ ...input, now: at('2031-01-01T00:40:00Z') });
    expect(same.schedule.updatedAt).toEqual(s.schedule.updatedAt);
    const changed = await store.scheduleUpsert({ ...input, priority: 5, now: at('2031-01-01T00:41:00Z') });
    expect(changed.schedule.updatedAt.toISOString()).toBe('2031-01-01T00:41:00.000Z');
  });

  it('an upsert that keeps cron and time zone keeps next_run_at; a changed cron moves it', async () => {
    const s = await hourly('skip');
    const input = { ...s.schedule, maxAttempts: 3, payload: { v: 2 } };
    const same = await store.scheduleUpsert({ ...input, nextRunAt: at('2031-06-01T00:00:00Z'), now: T0 });
    expect(same).toMatchObject({ created: false, schedule: { nextRunAt: s.schedule.nextRunAt, maxAttempts: 3, payload: { v: 2 } } });
    const changed = await store.scheduleUpsert({ ...input, cron: '0 0 * * *', nextRunAt: at('2031-01-02T00:00:00Z'), now: T0 });
    expect(changed.schedule.nextRunAt.toISOString()).toBe('2031-01-02T00:00:00.000Z');
  });

  it('a sleeping scheduler fires a per-second schedule created after it started (woken), by the database clock', async () => {
    const name = queueName('sched');
    const queue = queueName();
    const sch = new Scheduler({ store, logger: silentLogger(), maxSleepMs: 60_000 });
    started.push(sch);
    sch.start();
    await waitFor(() => sch.state === 'running', { what: 'scheduler running' });
    const cron = '* * * * * *';
    await store.scheduleUpsert({
      name, cron, timezone: 'UTC', queue, type: 'tick', payload: {}, priority: 0, maxAttempts: null,
      misfirePolicy: 'skip', misfireCap: 100, nextRunAt: cronNextAfter(cron, 'UTC', new Date()),
    });
    sch.wake(); // what the server does on evora_schedule_changed
    await waitFor(async () => (await keysOf(queue)).length >= 3, { what: 'three fires', timeoutMs: 10_000 });
    const keys = await keysOf(queue);
    const seconds = keys.map((k) => Date.parse(k.slice(`schedule:${name}:`.length)) / 1000);
    for (let i = 1; i < seconds.length; i++) expect(seconds[i]! - seconds[i - 1]!).toBe(1);
  });
});

import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { EvoraApiError, EvoraClient, type ScheduleInput } from '../../src/sdk/index.js';
import { MisfirePolicy } from '../../src/gen/evora/v1/schedule.js';
import { ScheduleServiceClient } from '../../src/gen/evora/v1/schedule.js';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { queueName } from '../helpers/factories.js';
import { call, serverSetup } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * ScheduleService end to end through the SDK against a real server (its leader's scheduler
 * runs): the CRUD calls, bad input (INVALID_ARGUMENT / NOT_FOUND, one line, nothing
 * changed), a per-second schedule firing, pause, and TriggerSchedule while paused.
 */

let client: EvoraClient;
let raw: ScheduleServiceClient;
let httpUrl: string;
let databaseUrl: string;
beforeAll(async () => {
  const { address, httpUrl: http, databaseUrl: url } = await serverSetup({ http: true });
  httpUrl = http;
  databaseUrl = url;
  client = new EvoraClient({ address });
  raw = new ScheduleServiceClient(address, grpc.credentials.createInsecure());
});
afterAll(() => {
  client.close();
  raw.close();
});
afterEach(() => {
  vi.useRealTimers();
});

/** evora_jobs_submitted_total of `queue` on the server's /metrics (0 when it has no series). */
async function submittedMetric(queue: string): Promise<number> {
  const text = await (await fetch(`${httpUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`evora_jobs_submitted_total{queue="${queue}"} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

async function apiError(p: Promise<unknown>): Promise<EvoraApiError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EvoraApiError);
  expect((err as EvoraApiError).details).not.toContain('\n');
  return err as EvoraApiError;
}

const input = (over: Partial<ScheduleInput> = {}): ScheduleInput => ({
  name: queueName('sched'),
  cron: '0 3 * * *',
  queue: queueName(),
  type: 'report',
  ...over,
});

describe('ScheduleService', () => {
  it('upsert, get, list, pause, resume, delete', async () => {
    const s = input({ timezone: 'Europe/Berlin', payload: { kind: 'nightly' }, priority: 5, maxAttempts: 2, misfirePolicy: 'run_each', misfireCap: 7 });
    const { schedule, created } = await client.upsertSchedule(s);
    expect(created).toBe(true);
    expect(schedule).toMatchObject({
      name: s.name, cron: '0 3 * * *', timezone: 'Europe/Berlin', queue: s.queue, type: 'report', payload: { kind: 'nightly' },
      priority: 5, maxAttempts: 2, misfirePolicy: 'run_each', misfireCap: 7, paused: false, lastJobId: null, lastRunAt: null,
    });
    // 03:00 in Berlin is 01:00 or 02:00 UTC.
    expect(schedule.nextRunAt!.getTime()).toBeGreaterThan(Date.now());
    expect([1, 2]).toContain(schedule.nextRunAt!.getUTCHours());
    expect((await client.upsertSchedule(s)).created).toBe(false);
    expect(await client.getSchedule(s.name)).toMatchObject({ name: s.name, misfireCap: 7 });
    expect((await client.listSchedules()).map((x) => x.name)).toContain(s.name);
    expect((await client.pauseSchedule(s.name)).paused).toBe(true);
    expect((await client.resumeSchedule(s.name)).paused).toBe(false);
    await client.deleteSchedule(s.name);
    expect((await apiError(client.getSchedule(s.name))).codeName).toBe('NOT_FOUND');
  });

  it("next_run_at of an upsert and a resume is after now by the database's clock, on a server whose own clock is two minutes behind", async () => {
    // This process's Date (the server's) moved, PostgreSQL's clock untouched. By the
    // server's clock the schedule's first fire times were still to come, so a new per-minute
    // schedule fired at once for two minutes before it existed.
    const s = input({ cron: '0 * * * * *' });
    const realNow = Date.now();
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date(realNow - 120_000));
    try {
      const { schedule } = await client.upsertSchedule(s);
      expect(schedule.nextRunAt!.getTime()).toBeGreaterThan(realNow);
      await client.pauseSchedule(s.name);
      expect((await client.resumeSchedule(s.name)).nextRunAt!.getTime()).toBeGreaterThan(realNow);
      // A changed cron moves next_run_at too.
      expect((await client.upsertSchedule({ ...s, cron: '30 * * * * *' })).schedule.nextRunAt!.getTime()).toBeGreaterThan(realNow);
    } finally {
      vi.useRealTimers();
      await client.deleteSchedule(s.name);
    }
  });

  it('resuming a stored schedule whose time zone or cron no longer reads is FAILED_PRECONDITION saying so, and it stays paused', async () => {
    const s = input({ timezone: 'Europe/Berlin' });
    await client.upsertSchedule(s);
    await client.pauseSchedule(s.name);
    const sql = new pg.Client({ connectionString: databaseUrl });
    await sql.connect();
    try {
      // As a tzdata update can leave a stored zone (the API refuses it), and a stored cron.
      for (const [column, value, message] of [
        ['timezone', 'Europe/Atlantis', 'timezone "Europe/Atlantis" is not an IANA time zone'],
        ['cron', '0 3 * * * * *', 'cron "0 3 * * * * *" must have 5 fields'],
      ] as const) {
        await sql.query(`UPDATE evora.schedules SET ${column} = $2 WHERE name = $1`, [s.name, value]);
        const err = await apiError(client.resumeSchedule(s.name));
        expect(err.codeName).toBe('FAILED_PRECONDITION');
        expect(err.details).toContain(`schedule "${s.name}" can no longer fire: ${message}`);
        expect(err.details).toMatch(/; fix it with UpsertSchedule$/);
        expect((await client.getSchedule(s.name)).paused).toBe(true);
        await sql.query(`UPDATE evora.schedules SET timezone = 'Europe/Berlin', cron = '0 3 * * *' WHERE name = $1`, [s.name]);
      }
    } finally {
      await sql.end();
    }
    expect((await client.resumeSchedule(s.name)).paused).toBe(false);
  });

  it('defaults: UTC, RUN_ONCE, cap 100', async () => {
    const { schedule } = await client.upsertSchedule(input());
    expect(schedule).toMatchObject({ timezone: 'UTC', misfirePolicy: 'run_once', misfireCap: 100, maxAttempts: 0, payload: {} });
  });

  it('bad input: INVALID_ARGUMENT or NOT_FOUND with one line, and nothing changed', async () => {
    const cases: [Partial<ScheduleInput>, RegExp][] = [
      [{ cron: '61 * * * *' }, /cron "61 \* \* \* \*" is invalid/],
      [{ cron: '* * *' }, /must have 5 fields/],
      [{ cron: '' }, /cron/],
      [{ timezone: 'Mars/Olympus' }, /timezone "Mars\/Olympus" is not an IANA time zone/],
      [{ name: '' }, /name is required/],
      [{ name: 'bad name!' }, /name "bad name!" may contain only/],
      // A fire of x:trigger and a trigger of x would share an idempotency key.
      [{ name: 'x:trigger' }, /^name "x:trigger" has a ":trigger" segment/],
      [{ name: 'x:trigger:y' }, /^name "x:trigger:y" has a ":trigger" segment/],
      [{ queue: '' }, /queue is required/],
      [{ type: '' }, /type is required/],
      [{ priority: 5000 }, /priority must be/],
      [{ misfireCap: 1001 }, /misfire_cap/],
      // Oversized text is refused by its length, not echoed back whole.
      [{ cron: '* '.repeat(50_000) }, /^cron is longer than 256 characters$/],
      [{ timezone: 'Z'.repeat(100) }, /^timezone is longer than 64 characters$/],
      [{ payload: { a: 'x\u0000' } }, /^payload contains a NUL character/],
    ];
    for (const [over, message] of cases) {
      const s = input(over);
      const err = await apiError(client.upsertSchedule(s));
      expect(err.codeName, JSON.stringify(over)).toBe('INVALID_ARGUMENT');
      expect(err.details).toMatch(message);
      if (s.name && !/bad/.test(s.name)) expect((await apiError(client.getSchedule(s.name))).codeName).toBe('NOT_FOUND');
    }
    const unknown = await new Promise<grpc.ServiceError>((resolve) =>
      raw.upsertSchedule(
        { schedule: { ...input(), timezone: '', priority: 0, maxAttempts: 0, misfirePolicy: 42 as MisfirePolicy, misfireCap: 0, paused: false, lastJobId: '' } },
        (err) => resolve(err!),
      ),
    );
    expect(unknown.code).toBe(grpc.status.INVALID_ARGUMENT);
    const missing = await new Promise<grpc.ServiceError>((resolve) => raw.upsertSchedule({}, (err) => resolve(err!)));
    expect(missing.details).toBe('schedule is required');
    for (const op of [
      () => client.getSchedule('nope'),
      () => client.deleteSchedule('nope'),
      () => client.pauseSchedule('nope'),
      () => client.resumeSchedule('nope'),
      () => client.triggerSchedule('nope'),
    ]) {
      const err = await apiError(op());
      expect(err.codeName).toBe('NOT_FOUND');
      expect(err.details).toBe('schedule "nope" not found');
    }
    expect((await apiError(client.triggerSchedule('x', { triggerId: 'no spaces' }))).codeName).toBe('INVALID_ARGUMENT');
  });

  it('a per-second schedule fires through the leader: one job per second, key per fire time; pause stops it', async () => {
    const s = input({ cron: '* * * * * *', misfirePolicy: 'skip' });
    await client.upsertSchedule(s);
    await waitFor(async () => (await client.list({ queue: s.queue })).jobs.length >= 3, { what: 'three fires', timeoutMs: 15_000 });
    const paused = await client.pauseSchedule(s.name);
    const seen = (await client.list({ queue: s.queue })).jobs;
    const keys = seen.map((j) => j.idempotencyKey!).sort();
    expect(new Set(keys).size).toBe(keys.length);
    for (const k of keys) expect(k).toMatch(new RegExp(`^schedule:${s.name}:\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ$`));
    const last = await client.getSchedule(s.name);
    expect(keys).toContain(`schedule:${s.name}:${last.lastRunAt!.toISOString().replace('.000Z', 'Z')}`);
    expect(paused.paused).toBe(true);
    // Paused: the jobs stay as they were (a fire that was committing as the pause landed counted).
    const count = (await client.list({ queue: s.queue })).jobs.length;
    const triggered = await client.triggerSchedule(s.name, { triggerId: 'ops-1' });
    expect(triggered).toMatchObject({ created: true, idempotencyKey: `schedule:${s.name}:trigger:ops-1` });
    expect(triggered.schedule).toMatchObject({ paused: true, lastJobId: triggered.jobId });
    const job = await client.get(triggered.jobId);
    expect(job).toMatchObject({ queue: s.queue, type: 'report', state: 'PENDING' });
    expect((await client.triggerSchedule(s.name, { triggerId: 'ops-1' })).created).toBe(false);
    const fresh = await client.triggerSchedule(s.name);
    expect(fresh.idempotencyKey).toMatch(new RegExp(`^schedule:${s.name}:trigger:[0-9a-f-]{36}$`));
    expect((await client.list({ queue: s.queue })).jobs.length).toBe(count + 2);
  });

  it('jobs fired and triggered are counted in evora_jobs_submitted_total: the jobs made, not replays', async () => {
    const s = input({ cron: '* * * * * *', misfirePolicy: 'skip' });
    await client.upsertSchedule(s);
    await waitFor(async () => (await client.list({ queue: s.queue })).jobs.length >= 2, { what: 'two fires', timeoutMs: 15_000 });
    await client.pauseSchedule(s.name);
    // A fire that committed as the pause landed is counted once its pass returns.
    const jobs = async () => (await client.list({ queue: s.queue })).jobs.length;
    await waitFor(async () => (await submittedMetric(s.queue)) === (await jobs()), { what: 'the fired jobs counted' });
    expect((await client.triggerSchedule(s.name, { triggerId: 'count-1' })).created).toBe(true);
    expect((await client.triggerSchedule(s.name, { triggerId: 'count-1' })).created).toBe(false);
    const made = await jobs();
    expect(await submittedMetric(s.queue)).toBe(made);
  });

  it('the raw wire: enum values and unset times', async () => {
    const s = input({ misfirePolicy: 'skip' });
    await client.upsertSchedule(s);
    const res = await call(raw, 'getSchedule', { name: s.name });
    expect(res.schedule).toMatchObject({ misfirePolicy: MisfirePolicy.MISFIRE_POLICY_SKIP, lastJobId: '', lastRunAt: undefined });
  });
});

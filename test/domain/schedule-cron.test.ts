import { describe, expect, it } from 'vitest';
import { EvoraError } from '../../src/domain/errors.js';
import {
  checkCron,
  checkScheduleUpsert,
  checkTimezone,
  cronNextAfter,
  scheduleFireKey,
  scheduleFirePlan,
  type MisfirePolicy,
} from '../../src/domain/schedule.js';

/**
 * The schedule rules that need no database (src/domain/schedule.ts): next fire times across
 * DST as docs/api.md "Schedules" promises, the misfire policies' choice of fire times, the
 * key format, and the input checks.
 */

const iso = (d: Date) => d.toISOString();
const nextN = (cron: string, tz: string, from: string, n: number) => {
  const out: string[] = [];
  let at = new Date(from);
  for (let i = 0; i < n; i++) out.push(iso((at = cronNextAfter(cron, tz, at))));
  return out;
};

describe('next fire times across a half-hour DST change (Australia/Lord_Howe: +10:30 / +11)', () => {
  const lh = 'Australia/Lord_Howe';
  const lhNext = (cron: string, after: string) => iso(cronNextAfter(cron, lh, new Date(after)));

  it('spring forward (2026-10-04, 02:00 -> 02:30): 02:15 fires once at 02:45, the real 02:30-02:50 fire as they come', () => {
    expect(nextN('15 2 * * *', lh, '2026-10-02T00:00:00Z', 3)).toEqual([
      '2026-10-02T15:45:00.000Z', // 02:15 +10:30 on 10-03
      '2026-10-03T15:45:00.000Z', // 02:45 +11: 02:15 does not exist
      '2026-10-04T15:15:00.000Z', // 02:15 +11
    ]);
    expect(nextN('*/10 2 * * *', lh, '2026-10-03T15:00:00Z', 4)).toEqual([
      '2026-10-03T15:30:00.000Z', // 02:30 +11 (02:00 moved there, and 02:30 itself)
      '2026-10-03T15:40:00.000Z',
      '2026-10-03T15:50:00.000Z',
      '2026-10-04T15:00:00.000Z', // 02:00 +11 the next day; nothing in 03:xx
    ]);
  });

  it('fall back (2026-04-05, 02:00 -> 01:30): 01:45 fires once, at the first; an hourly one at both', () => {
    expect(nextN('45 1 * * *', lh, '2026-04-03T00:00:00Z', 3)).toEqual([
      '2026-04-03T14:45:00.000Z',
      '2026-04-04T14:45:00.000Z', // 01:45 +11; 01:45 +10:30 (15:15Z) does not fire
      '2026-04-05T15:15:00.000Z',
    ]);
    // Asked from inside the repeated half hour, 01:45 has been.
    expect(lhNext('45 1 * * *', '2026-04-04T15:00:00Z')).toBe('2026-04-05T15:15:00.000Z');
    expect(nextN('45 * * * *', lh, '2026-04-04T14:00:00Z', 3)).toEqual([
      '2026-04-04T14:45:00.000Z',
      '2026-04-04T15:15:00.000Z',
      '2026-04-04T16:15:00.000Z',
    ]);
  });

  it('every instant of the day before the fall back has a next fire (cron-parser alone threw "loop limit exceeded")', () => {
    // 2026-04-03T15:15Z is 02:15 +11 on 04-04; the next 02:15 is +10:30 (15:45Z on 04-04).
    for (let t = Date.parse('2026-04-03T15:15:00Z'); t < Date.parse('2026-04-05T12:00:00Z'); t += 15 * 60_000) {
      expect(lhNext('15 2 * * *', new Date(t).toISOString())).toBe(t < Date.parse('2026-04-04T15:45:00Z') ? '2026-04-04T15:45:00.000Z' : '2026-04-05T15:45:00.000Z');
    }
  });
});

describe('next fire times across DST (America/New_York)', () => {
  it('spring forward: 02:30 does not exist on 2026-03-08 and fires once at 03:30 EDT', () => {
    expect(nextN('30 2 * * *', 'America/New_York', '2026-03-07T12:00:00Z', 3)).toEqual([
      '2026-03-08T07:30:00.000Z', // 03:30 EDT
      '2026-03-09T06:30:00.000Z', // 02:30 EDT
      '2026-03-10T06:30:00.000Z',
    ]);
  });

  it('fall back: 01:30 happens twice on 2026-11-01 and fires once, at the first (EDT)', () => {
    expect(nextN('30 1 * * *', 'America/New_York', '2026-10-31T12:00:00Z', 3)).toEqual([
      '2026-11-01T05:30:00.000Z', // 01:30 EDT; 01:30 EST (06:30Z) does not fire
      '2026-11-02T06:30:00.000Z',
      '2026-11-03T06:30:00.000Z',
    ]);
  });

  it('02:30 on the fall-back day exists once and fires once', () => {
    expect(nextN('30 2 * * *', 'America/New_York', '2026-10-31T12:00:00Z', 2)).toEqual(['2026-11-01T07:30:00.000Z', '2026-11-02T07:30:00.000Z']);
  });

  it('an hourly schedule fires in both repeated hours', () => {
    expect(nextN('0 * * * *', 'America/New_York', '2026-11-01T04:30:00Z', 3)).toEqual([
      '2026-11-01T05:00:00.000Z', // 01:00 EDT
      '2026-11-01T06:00:00.000Z', // 01:00 EST
      '2026-11-01T07:00:00.000Z', // 02:00 EST
    ]);
  });

  it('the same fire times whatever instant they are asked from: inside the hour after a change too', () => {
    const ny = (cron: string, after: string) => iso(cronNextAfter(cron, 'America/New_York', new Date(after)));
    // Spring forward at 07:00Z (02:00 EST -> 03:00 EDT): the shifted fire stays that day's.
    expect(ny('30 2 * * *', '2026-03-08T07:10:00Z')).toBe('2026-03-08T07:30:00.000Z'); // 03:30 EDT
    expect(ny('30 2 * * *', '2026-03-08T07:29:59.999Z')).toBe('2026-03-08T07:30:00.000Z');
    expect(ny('0 15 2 * * *', '2026-03-08T07:00:00Z')).toBe('2026-03-08T07:15:00.000Z');
    // Fall back at 06:00Z (02:00 EDT -> 01:00 EST): inside the repeated hour, 01:30 has been.
    expect(ny('30 1 * * *', '2026-11-01T06:10:00Z')).toBe('2026-11-02T06:30:00.000Z');
    expect(ny('*/20 1 * * *', '2026-11-01T06:10:00Z')).toBe('2026-11-02T06:00:00.000Z');
    // An hourly schedule still fires in the repeated hour, and a per-second one every second.
    expect(ny('0 * * * *', '2026-11-01T06:10:00Z')).toBe('2026-11-01T07:00:00.000Z');
    expect(ny('* * * * * *', '2026-11-01T08:50:00Z')).toBe('2026-11-01T08:50:01.000Z');
  });

  it('6 fields: seconds first; next is strictly after', () => {
    expect(nextN('*/15 * * * * *', 'UTC', '2026-01-01T00:00:00Z', 3)).toEqual([
      '2026-01-01T00:00:15.000Z',
      '2026-01-01T00:00:30.000Z',
      '2026-01-01T00:00:45.000Z',
    ]);
  });
});

describe('the fire plan', () => {
  const hourly = (policy: MisfirePolicy, cap = 100) => ({
    cron: '0 * * * *',
    timezone: 'UTC',
    nextRunAt: new Date('2026-01-01T01:00:00Z'),
    misfirePolicy: policy,
    misfireCap: cap,
  });
  const down = new Date('2026-01-01T03:30:00Z'); // 01:00, 02:00 and 03:00 passed, all missed

  it('downtime across three fire times: SKIP none, RUN_ONCE the latest, RUN_EACH all three', () => {
    expect(scheduleFirePlan(hourly('skip'), down).fires).toEqual([]);
    expect(scheduleFirePlan(hourly('run_once'), down).fires.map(iso)).toEqual(['2026-01-01T03:00:00.000Z']);
    expect(scheduleFirePlan(hourly('run_each'), down).fires.map(iso)).toEqual([
      '2026-01-01T01:00:00.000Z',
      '2026-01-01T02:00:00.000Z',
      '2026-01-01T03:00:00.000Z',
    ]);
    expect(scheduleFirePlan(hourly('run_each', 2), down).fires.map(iso)).toEqual(['2026-01-01T02:00:00.000Z', '2026-01-01T03:00:00.000Z']);
    for (const p of ['skip', 'run_once', 'run_each'] as const) expect(iso(scheduleFirePlan(hourly(p), down).nextRunAt)).toBe('2026-01-01T04:00:00.000Z');
  });

  it('the latest fire time within 60 s is on time and runs under every policy', () => {
    const now = new Date('2026-01-01T03:00:30Z');
    expect(scheduleFirePlan(hourly('skip'), now).fires.map(iso)).toEqual(['2026-01-01T03:00:00.000Z']);
    expect(scheduleFirePlan(hourly('run_once'), now).fires.map(iso)).toEqual(['2026-01-01T02:00:00.000Z', '2026-01-01T03:00:00.000Z']);
  });

  it('a fire moved by a spring-forward gets its job when it comes (02:30 -> 03:30 EDT)', () => {
    const gap = { cron: '30 2 * * *', timezone: 'America/New_York', nextRunAt: new Date('2026-03-08T07:30:00Z'), misfirePolicy: 'skip' as const, misfireCap: 100 };
    const plan = scheduleFirePlan(gap, new Date('2026-03-08T07:30:01Z'));
    expect(plan.fires.map(iso)).toEqual(['2026-03-08T07:30:00.000Z']);
    expect(iso(plan.nextRunAt)).toBe('2026-03-09T06:30:00.000Z');
  });

  it('not due yet: nothing, next_run_at kept', () => {
    const plan = scheduleFirePlan(hourly('run_each'), new Date('2026-01-01T00:59:59Z'));
    expect(plan.fires).toEqual([]);
    expect(iso(plan.nextRunAt)).toBe('2026-01-01T01:00:00.000Z');
  });

  it('a per-second schedule down for a week looks back only as far as its cap', () => {
    const plan = scheduleFirePlan(
      { cron: '* * * * * *', timezone: 'UTC', nextRunAt: new Date('2026-01-01T00:00:00Z'), misfirePolicy: 'run_each', misfireCap: 5 },
      new Date('2026-01-08T00:00:00.500Z'),
    );
    expect(plan.fires.map(iso)).toEqual([
      '2026-01-07T23:59:55.000Z',
      '2026-01-07T23:59:56.000Z',
      '2026-01-07T23:59:57.000Z',
      '2026-01-07T23:59:58.000Z',
      '2026-01-07T23:59:59.000Z',
      '2026-01-08T00:00:00.000Z',
    ]);
    expect(iso(plan.nextRunAt)).toBe('2026-01-08T00:00:01.000Z');
  });

  it('keys: schedule:<name>:<RFC 3339 UTC to the second>', () => {
    expect(scheduleFireKey('nightly', new Date('2026-11-26T03:00:00.000Z'))).toBe('schedule:nightly:2026-11-26T03:00:00Z');
  });
});

describe('input checks (INVALID_ARGUMENT, one line)', () => {
  const base = { name: 'n', cron: '0 3 * * *', timezone: '', queue: 'q', type: 't', payload: {}, priority: 0, maxAttempts: 0, misfirePolicy: undefined, misfireCap: 0 };
  const bad = (over: Partial<typeof base>, message: RegExp) => {
    let err: unknown;
    try {
      checkScheduleUpsert({ ...base, ...over });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(EvoraError);
    expect((err as EvoraError).code).toBe('INVALID_ARGUMENT');
    expect((err as EvoraError).message).toMatch(message);
    expect((err as EvoraError).message).not.toContain('\n');
  };

  it('refuses a bad cron, time zone, name, queue, type or cap', () => {
    bad({ cron: '61 * * * *' }, /cron "61 \* \* \* \*" is invalid/);
    bad({ cron: '* * *' }, /must have 5 fields .* or 6 .*got 3/);
    bad({ cron: '* * * * * * *' }, /got 7/);
    bad({ cron: 'every day' }, /cron/);
    bad({ cron: 'H * * * *' }, /uses H/);
    bad({ cron: '0 H(0-5) * * *' }, /uses H/);
    bad({ timezone: 'Mars/Olympus' }, /timezone "Mars\/Olympus" is not an IANA time zone/);
    bad({ name: '' }, /name is required/);
    bad({ queue: '' }, /queue is required/);
    bad({ type: '' }, /type is required/);
    bad({ misfireCap: 5000 }, /misfire_cap/);
  });

  it('defaults: UTC, RUN_ONCE, cap 100; the cron normalised', () => {
    expect(checkScheduleUpsert({ ...base, cron: ' 0  3 * * * ' })).toMatchObject({ cron: '0 3 * * *', timezone: 'UTC', misfirePolicy: 'run_once', misfireCap: 100, maxAttempts: null });
    expect(checkTimezone('Europe/Berlin')).toBe('Europe/Berlin');
    expect(checkCron('0 0 12 * * MON', 'UTC')).toBe('0 0 12 * * MON');
    expect(checkCron('0 9 * * THU', 'UTC')).toBe('0 9 * * THU'); // the H of a name is not H
  });
});

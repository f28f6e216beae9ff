import { CronExpressionParser, type CronExpression } from 'cron-parser';
import { EvoraError, failedPrecondition, invalidArgument } from './errors.js';
import type { JsonObject } from './job.js';
import { SCHEDULE_KEY_PREFIX, checkIntRange, checkMaxAttempts, checkName, checkPriority } from './validate.js';

/**
 * Recurring schedules: what one is, how its cron expression is read, and which fire times
 * become jobs (docs/api.md, "Schedules"). Pure functions of their inputs and `now`; the
 * store runs them inside the transaction that enqueues the jobs, and the API for checks.
 *
 * Cron is read by cron-parser (v5, luxon time zones): 5 fields, or 6 with leading seconds.
 * Its DST behaviour, which the docs promise and test/domain/schedule-cron.test.ts pins:
 * a wall time that does not exist (spring forward, 02:30 on 2026-03-08 in New York) fires
 * once, an hour later by the wall clock (03:30 EDT); a wall time that happens twice (fall
 * back, 01:30 on 2026-11-01) fires once, at its first occurrence (EDT); an expression
 * whose hour field is * fires in both repeated hours, as in every hour. cron-parser keeps
 * these rules only when it starts before the change, so every fire time is read through
 * cronFiresAfter, which starts there whatever instant it is asked from. In a zone that
 * shifts by part of an hour (Australia/Lord_Howe) cron-parser gets these rules wrong, so
 * there cronFiresAfter places cron-parser's wall times itself (wallClockFiresAfter).
 */

/** What the scheduler does with fire times that passed while it was not running. */
export type MisfirePolicy = 'skip' | 'run_once' | 'run_each';
/** Every misfire policy. */
export const MISFIRE_POLICIES: readonly MisfirePolicy[] = ['skip', 'run_once', 'run_each'];

/** The misfire policy of a schedule that names none. */
export const MISFIRE_POLICY_DEFAULT: MisfirePolicy = 'run_once';
/** RUN_EACH runs at most this many missed fires when a schedule names no cap. */
export const MISFIRE_CAP_DEFAULT = 100;
/** The largest misfire cap (a catch-up is one transaction). */
export const MISFIRE_CAP_MAX = 1000;
/**
 * A fire time is on time while it is the latest that has come and came less than this long
 * ago; earlier fire times, and the latest once it is older, are missed (the policy decides).
 */
export const SCHEDULE_ON_TIME_MS = 60_000;
/** Longest client-chosen trigger id (TriggerScheduleRequest.trigger_id). */
export const MAX_TRIGGER_ID_LENGTH = 64;

/** A schedule as the store holds it. */
export interface Schedule {
  name: string;
  cron: string;
  timezone: string;
  queue: string;
  type: string;
  payload: JsonObject;
  priority: number;
  /** Null: the queue's default. */
  maxAttempts: number | null;
  misfirePolicy: MisfirePolicy;
  misfireCap: number;
  paused: boolean;
  /** The next fire time the scheduler will act on (for a paused schedule: recomputed on resume). */
  nextRunAt: Date;
  lastRunAt: Date | null;
  lastJobId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** What UpsertSchedule sets: every field of a schedule a caller chooses (checked). */
export type ScheduleUpsertInput = Pick<
  Schedule,
  'name' | 'cron' | 'timezone' | 'queue' | 'type' | 'payload' | 'priority' | 'maxAttempts' | 'misfirePolicy' | 'misfireCap'
>;

/** The cron expression iterator, from `after` (exclusive) on. Throws what cron-parser throws. */
function cronIterator(cron: string, timezone: string, after: Date): CronExpression {
  return CronExpressionParser.parse(cron, { tz: timezone, currentDate: after });
}

/** Longest cron expression a schedule may have, in characters. */
export const MAX_CRON_LENGTH = 256;
/** Longest time zone name a schedule may have (IANA names are far shorter). */
export const MAX_TIMEZONE_LENGTH = 64;

/** An IANA time zone name that this runtime knows ("UTC", "America/New_York"). */
export function checkTimezone(value: string): string {
  if (!value) return 'UTC';
  if (value.length > MAX_TIMEZONE_LENGTH) throw invalidArgument(`timezone is longer than ${MAX_TIMEZONE_LENGTH} characters`);
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value });
  } catch {
    throw invalidArgument(`timezone "${value}" is not an IANA time zone (e.g. "UTC", "Europe/Berlin")`);
  }
  return value;
}

/**
 * A cron expression: 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds
 * first), each as cron-parser reads it, with at least one fire time, and without `H`.
 * Returns it trimmed, fields separated by single spaces.
 */
export function checkCron(value: string, timezone: string): string {
  if (value.length > MAX_CRON_LENGTH) throw invalidArgument(`cron is longer than ${MAX_CRON_LENGTH} characters`);
  const fields = value.trim().split(/\s+/).filter((f) => f.length > 0);
  if (fields.length !== 5 && fields.length !== 6) {
    throw invalidArgument(`cron "${value}" must have 5 fields (minute hour day month weekday) or 6 (seconds first), got ${fields.length}`);
  }
  // cron-parser's H stands for a value drawn at random at every parse (it is seeded by
  // nothing of the schedule's), so each read of the schedule would fire at other times.
  if (fields.some((f) => HASHED_FIELD.test(f))) {
    throw invalidArgument(`cron "${value}" uses H (a value chosen at random), which schedules do not support: name the time`);
  }
  const cron = fields.join(' ');
  try {
    cronIterator(cron, timezone, new Date()).next();
  } catch (err) {
    throw invalidArgument(`cron "${value}" is invalid: ${oneLine((err as Error).message)}`, { cause: err });
  }
  return cron;
}

/** A cron field that holds H on its own (not the H of a name such as THU). */
const HASHED_FIELD = /(^|[^a-z])h($|[^a-z])/i;

/** An error's text as one line of at most 200 characters, for a message that quotes it. */
function oneLine(text: string): string {
  const line = text.replace(/\s*\n\s*/g, ' ').trim();
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

/** A schedule's name: as a queue's (it is part of its jobs' idempotency keys). */
export function checkScheduleName(value: string): string {
  return checkName('name', value);
}

/**
 * A name a schedule may be created or changed under: a schedule's name, and not one with a
 * `:trigger` segment (containing `:trigger:` or ending in `:trigger`). Fires and triggers
 * key their jobs `schedule:<name>:<fire time>` and `schedule:<name>:trigger:<trigger_id>`;
 * without the rule a fire of `x:trigger` and a trigger of `x` could make one key, and the
 * later would get the earlier's job. With it, no two fires or triggers of different
 * schedules share a key (a fire time holds no letters but T and Z). Existing schedules with
 * such a name can still be read, paused, triggered and deleted (checkScheduleName).
 */
export function checkScheduleNewName(value: string): string {
  const name = checkScheduleName(value);
  if (/:trigger(:|$)/.test(name)) {
    throw invalidArgument(`name "${name}" has a ":trigger" segment, which the idempotency keys of triggered jobs use (schedule:<name>:trigger:<trigger_id>): choose another name`);
  }
  return name;
}

/** A client-chosen trigger id: letters, digits and _ . : / -, at most MAX_TRIGGER_ID_LENGTH. */
export function checkTriggerId(value: string): string {
  if (!value) return '';
  if (value.length > MAX_TRIGGER_ID_LENGTH) throw invalidArgument(`trigger_id is longer than ${MAX_TRIGGER_ID_LENGTH} characters`);
  return checkName('trigger_id', value);
}

/** Every field of an upsert, checked; one line naming the first bad field. */
export function checkScheduleUpsert(input: {
  name: string;
  cron: string;
  timezone: string;
  queue: string;
  type: string;
  payload: JsonObject;
  priority: number;
  maxAttempts: number;
  misfirePolicy: MisfirePolicy | undefined;
  misfireCap: number;
}): ScheduleUpsertInput {
  const name = checkScheduleNewName(input.name);
  const timezone = checkTimezone(input.timezone);
  return {
    name,
    cron: checkCron(input.cron, timezone),
    timezone,
    queue: checkName('queue', input.queue),
    type: checkName('type', input.type),
    payload: input.payload,
    priority: checkPriority(input.priority),
    maxAttempts: checkMaxAttempts(input.maxAttempts) || null,
    misfirePolicy: input.misfirePolicy ?? MISFIRE_POLICY_DEFAULT,
    misfireCap: input.misfireCap === 0 ? MISFIRE_CAP_DEFAULT : checkIntRange('misfire_cap', input.misfireCap, 1, MISFIRE_CAP_MAX),
  };
}

/** The first fire time strictly after `after`. */
export function cronNextAfter(cron: string, timezone: string, after: Date): Date {
  return cronFiresAfter(cron, timezone, after).next().value;
}

/**
 * The first fire time after `now` of a schedule already stored (ResumeSchedule). Its cron
 * or time zone may no longer read (a tzdata update can drop a zone that was valid when the
 * schedule was made): then FAILED_PRECONDITION, one line naming what is wrong as the
 * upsert's checks word it and how to mend it, rather than an internal error.
 */
export function storedNextAfter(s: Pick<Schedule, 'name' | 'cron' | 'timezone'>, now: Date): Date {
  try {
    return cronNextAfter(s.cron, s.timezone, now);
  } catch (err) {
    let reason = oneLine(err instanceof Error ? err.message : String(err));
    try {
      checkCron(s.cron, checkTimezone(s.timezone));
    } catch (checked) {
      if (checked instanceof EvoraError) reason = checked.message;
    }
    throw failedPrecondition(`schedule "${s.name}" can no longer fire: ${reason}; fix it with UpsertSchedule`, { cause: err });
  }
}

/**
 * How far back from the instant asked about a change of the zone's UTC offset is looked for:
 * longer than any daylight-saving shift (an hour almost everywhere, two in Antarctica/Troll).
 */
const DST_LOOKBACK_MS = 3 * 3_600_000;
/**
 * Fire times between a change of offset and the instant asked about that cronFiresAfter reads
 * past at most (each costs a step of cron-parser): an expression that fired more often since
 * the change (about once a minute or more) is read from the instant itself, which bounds the
 * cost; for it, only a fire inside the hour the change skipped or doubled can then differ.
 */
const DST_MAX_SKIPPED = 200;

/**
 * The fire times strictly after `after`, oldest first, the same sequence whatever `after` is.
 * cron-parser applies the DST rules above only from a start before the change: started in the
 * hour after a spring-forward it drops that day's shifted fire (02:30 → 03:30 EDT), and started
 * inside a repeated fall-back hour it fires that hour's wall times a second time (01:30 EST).
 * So when the zone's offset changed within DST_LOOKBACK_MS before `after`, the iterator starts
 * just before that change and what it gives up to `after` is skipped.
 */
export function* cronFiresAfter(cron: string, timezone: string, after: Date): Generator<Date, never> {
  if (shiftsByPartOfAnHour(timezone)) {
    yield* wallClockFiresAfter(cron, timezone, after);
  }
  const change = offsetChangeBefore(timezone, after.getTime());
  let it = cronIterator(cron, timezone, change === null ? after : new Date(change - 1));
  if (change !== null) {
    for (let skipped = 0; ; skipped++) {
      if (skipped === DST_MAX_SKIPPED) {
        it = cronIterator(cron, timezone, after);
        break;
      }
      const at = it.next().toDate();
      if (at.getTime() > after.getTime()) {
        yield at;
        break;
      }
    }
  }
  for (;;) yield it.next().toDate();
}

/** Per time zone: whether it changes its UTC offset by other than whole hours (shiftsByPartOfAnHour). */
const partHourZones = new Map<string, boolean>();

/**
 * Whether the zone changes its UTC offset by a step that is not a whole number of hours
 * (Australia/Lord_Howe: 30 minutes) within a year before or two after now. cron-parser's
 * DST handling assumes whole hours: in such a zone it drops a fire in the skipped half
 * hour, fires the hour after it instead, fires a repeated wall time twice when started
 * inside it, and near a change can throw "loop limit exceeded" for a valid expression.
 */
function shiftsByPartOfAnHour(timezone: string): boolean {
  let known = partHourZones.get(timezone);
  if (known === undefined) {
    known = false;
    const start = Date.now() - 365 * 86_400_000;
    let previous = utcOffsetMinutes(timezone, start);
    for (let ms = start; ms <= start + 3 * 365 * 86_400_000; ms += 43_200_000) {
      const offset = utcOffsetMinutes(timezone, ms);
      if ((offset - previous) % 60 !== 0) known = true;
      previous = offset;
    }
    partHourZones.set(timezone, known);
  }
  return known;
}

/**
 * cronFiresAfter for a zone that shifts by part of an hour: cron-parser reads the wall times
 * (in UTC, where no wall time is skipped or repeated), and each is placed in the zone by the
 * rules docs/api.md promises. A wall time in a gap fires once, later by the shift (read with
 * the offset before the change); a repeated one fires at its first occurrence, and at both
 * when the hour field names every hour. Instants are kept until no later wall time can
 * give an earlier one (a gap's fire can come after the next wall time's), then given
 * strictly increasing, so the sequence is the same from any `after`.
 */
function* wallClockFiresAfter(cron: string, timezone: string, after: Date): Generator<Date, never> {
  const near = (ms: number) => [-93_600_000, 0, 93_600_000].map((d) => utcOffsetMinutes(timezone, ms + d) * 60_000);
  // A wall time placed after `after` is at least after + the smallest offset about then.
  const walls = CronExpressionParser.parse(cron, { tz: 'UTC', currentDate: new Date(after.getTime() + Math.min(...near(after.getTime())) - 1) });
  const everyHour = walls.fields.hour.values.length === 24;
  // Sorted, distinct.
  const pending: number[] = [];
  let last = after.getTime();
  for (;;) {
    const wall = walls.next().getTime();
    const offsets = [...new Set(near(wall))];
    const matches = offsets.map((o) => wall - o).filter((t) => utcOffsetMinutes(timezone, t) * 60_000 === wall - t).sort((a, b) => a - b);
    const instants = matches.length === 0 ? [wall - Math.min(...offsets)] : everyHour ? matches : matches.slice(0, 1);
    for (const t of instants) {
      let i = pending.length;
      while (i > 0 && pending[i - 1]! > t) i--;
      if (pending[i - 1] !== t) pending.splice(i, 0, t);
    }
    // Every later wall time is placed at or after this.
    const floor = wall - Math.max(...offsets);
    while (pending.length > 0 && pending[0]! < floor) {
      const t = pending.shift()!;
      if (t > last) {
        last = t;
        yield new Date(t);
      }
    }
  }
}

/** A formatter per time zone that prints its UTC offset ("GMT-05:00"). */
const offsetFormats = new Map<string, Intl.DateTimeFormat>();

/** The zone's UTC offset at `ms`, in minutes east of UTC. */
function utcOffsetMinutes(timezone: string, ms: number): number {
  let format = offsetFormats.get(timezone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', { timeZone: timezone, timeZoneName: 'longOffset' });
    offsetFormats.set(timezone, format);
  }
  const name = format.formatToParts(ms).find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
  const m = /^GMT([+-])(\d{2}):(\d{2})$/.exec(name);
  return m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) : 0;
}

/**
 * The first instant (ms) of the zone's latest change of UTC offset in (ms − DST_LOOKBACK_MS,
 * ms], or null when there was none: the offset is read at both ends, and the change is found
 * by halving the interval to the millisecond.
 */
function offsetChangeBefore(timezone: string, ms: number): number | null {
  let lo = ms - DST_LOOKBACK_MS;
  let hi = ms;
  const before = utcOffsetMinutes(timezone, lo);
  if (utcOffsetMinutes(timezone, hi) === before) return null;
  // Invariant: the offset at lo is `before`, at hi it is not.
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (utcOffsetMinutes(timezone, mid) === before) lo = mid;
    else hi = mid;
  }
  return hi;
}

/** The idempotency key of a schedule's job for one fire time: `schedule:<name>:<RFC 3339 UTC, seconds>`. */
export function scheduleFireKey(name: string, fireAt: Date): string {
  return `${SCHEDULE_KEY_PREFIX}${name}:${fireAt.toISOString().replace(/\.\d{3}Z$/, 'Z')}`;
}

/** The idempotency key of a TriggerSchedule job: `schedule:<name>:trigger:<trigger id>`. */
export function scheduleTriggerKey(name: string, triggerId: string): string {
  return `${SCHEDULE_KEY_PREFIX}${name}:trigger:${triggerId}`;
}

/** What the scheduler does for one due schedule at `now`. */
export interface ScheduleFirePlan {
  /** The fire times that get a job, oldest first. */
  fires: Date[];
  /** The fire times that came and get none (counted, as far as looked back; for logs). */
  skipped: number;
  /** The schedule's next fire time: the first strictly after `now`. */
  nextRunAt: Date;
}

/**
 * Which fire times of a due schedule (nextRunAt <= now) get a job at `now`. Of the fire
 * times in [nextRunAt, now], the latest is on time if it came less than SCHEDULE_ON_TIME_MS
 * ago and always runs; the others are missed: SKIP runs none, RUN_ONCE the latest missed,
 * RUN_EACH the latest `misfireCap` missed. Looks back only as far as it needs (a per-second
 * schedule down for a week costs a few thousand steps, not 600,000).
 */
export function scheduleFirePlan(
  s: Pick<Schedule, 'cron' | 'timezone' | 'nextRunAt' | 'misfirePolicy' | 'misfireCap'>,
  now: Date,
): ScheduleFirePlan {
  const nextRunAt = cronNextAfter(s.cron, s.timezone, now);
  if (s.nextRunAt.getTime() > now.getTime()) return { fires: [], skipped: 0, nextRunAt: s.nextRunAt };
  const missedWanted = s.misfirePolicy === 'run_each' ? s.misfireCap : s.misfirePolicy === 'run_once' ? 1 : 0;
  const keep = missedWanted + 1;
  const from = s.nextRunAt.getTime() - 1;
  let windowMs = 2 * SCHEDULE_ON_TIME_MS;
  let fires: Date[] = [];
  let total = 0;
  let reachedStart = false;
  for (;;) {
    const start = Math.max(from, now.getTime() - windowMs);
    reachedStart = start === from;
    fires = [];
    total = 0;
    const it = cronFiresAfter(s.cron, s.timezone, new Date(start));
    for (;;) {
      const at = it.next().value;
      if (at.getTime() > now.getTime()) break;
      total++;
      fires.push(at);
      if (fires.length > keep) fires.shift();
    }
    if (reachedStart || total >= keep) break;
    windowMs *= 8;
  }
  const latest = fires[fires.length - 1];
  if (latest === undefined) return { fires: [], skipped: 0, nextRunAt };
  const onTime = now.getTime() - latest.getTime() < SCHEDULE_ON_TIME_MS;
  const missed = onTime ? fires.slice(0, -1) : fires;
  const run = missedWanted === 0 ? [] : missed.slice(-missedWanted);
  const chosen = onTime ? [...run, latest] : run;
  return { fires: chosen, skipped: Math.max(0, total - chosen.length), nextRunAt };
}

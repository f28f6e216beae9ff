import { readFileSync } from 'node:fs';
import { MAX_TIME_MS, MIN_TIME_MS } from '../domain/validate.js';
import { DURATION_MAX_SECONDS, INT32_MAX, INT32_MIN } from '../sdk/checks.js';
import type { Job, JobAttempt, JobProgress, JsonObject, Queue, QueueStats } from '../sdk/index.js';

/**
 * Parsing of command-line values and human-readable rendering for the client commands. A
 * value past what the wire or the server takes (an int32, a Duration, a Timestamp) is refused
 * here, naming the flag: the SDK would refuse it too, but naming its own field
 * (`job.priority`), which the user never typed.
 */

/** A bad flag or argument: exit code 2, one line on stderr. */
export class UsageError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'UsageError';
  }
}

const UNITS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400 };


/** A duration such as `500ms`, `5s`, `10m`, `1h`, `2d` or `1h30m`; a bare number is seconds; at most about 10,000 years. Returns seconds. */
export function parseDuration(text: string, flag: string): number {
  const t = text.trim();
  let seconds: number;
  if (/^\d+(\.\d+)?$/.test(t)) {
    seconds = Number(t);
  } else {
    const parts = [...t.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)];
    if (parts.length === 0 || parts.map((p) => p[0]).join('') !== t) {
      throw new UsageError(`${flag} must be a duration such as 500ms, 5s, 10m, 1h or 1h30m, got "${text}"`);
    }
    seconds = parts.reduce((sum, p) => sum + Number(p[1]) * (UNITS[p[2] as string] ?? 1), 0);
  }
  if (!(seconds <= DURATION_MAX_SECONDS)) throw new UsageError(`${flag} must be at most ${DURATION_MAX_SECONDS}s (about 10,000 years), got "${text}"`);
  return seconds;
}

/**
 * An ISO 8601 date and time with its zone, as the CLI prints times and as the server means
 * them: `2030-01-02T15:04:05Z`, `2030-01-02 15:04:05+02:00` (the space form is what the
 * CLI prints, so a time can be copied from its output); seconds and their fraction are
 * optional. A date alone (`2030-01-02`) is its midnight UTC, as the CLI shows times in UTC.
 * Stricter than Date.parse on purpose: that reads a date-time without a zone in this
 * machine's zone, rolls a day that does not exist over (2030-02-30 is March 2) and guesses
 * at other forms (1/2/2030), so a job would silently run at another time than the one
 * meant. A date-time without a zone, or a date or time that does not exist, is refused with
 * one line; null: `t` is not of this form at all (the caller says what it expected).
 */
function isoTimeParse(t: string, flag: string, text: string): Date | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i.exec(t);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map((v) => Number(v ?? 0)) as [number, number, number, number, number, number];
  const zone = m[8];
  if (m[4] !== undefined && !zone) throw new UsageError(`${flag} "${text}" has no zone: add Z for UTC, or an offset such as +02:00`);
  const z = zone ? /^([+-])(\d{2}):?(\d{2})?$/.exec(zone) : null;
  const offsetHours = z ? Number(z[2]) : 0;
  const offsetMinutes = z ? Number(z[3] ?? 0) : 0;
  const at = new Date(0);
  at.setUTCFullYear(year, month - 1, day);
  at.setUTCHours(hour, minute, second, Number((m[7] ?? '').slice(0, 3).padEnd(3, '0')));
  const exists =
    at.getUTCFullYear() === year && at.getUTCMonth() === month - 1 && at.getUTCDate() === day && hour < 24 && minute < 60 && second < 60;
  if (!exists || offsetHours > 23 || offsetMinutes > 59) throw new UsageError(`${flag} "${text}" is not a valid date and time`);
  const offsetMs = (z?.[1] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000;
  return new Date(at.getTime() - offsetMs);
}

/** `at`, if the server takes it (0001-01-01 to 9999-12-31 UTC, a Timestamp's range); else refused, naming the flag. */
function dateInRange(at: Date, flag: string, text: string): Date {
  if (!(at.getTime() >= MIN_TIME_MS && at.getTime() <= MAX_TIME_MS)) throw new UsageError(`${flag} "${text}" is outside 0001-01-01 to 9999-12-31 (UTC)`);
  return at;
}

/** Whether `t` reads as a duration (`10m`, `1h30m`) rather than a date. */
function looksLikeDuration(t: string): boolean {
  return /^[\d.]+(ms|s|m|h|d)/.test(t) && !/^\d{4}-/.test(t);
}

/** A time: an ISO 8601 date and time with its zone (isoTimeParse), or a duration from now (`10m`, `+10m`). */
export function parseTime(text: string, flag: string): Date {
  const t = text.trim();
  const rel = t.startsWith('+') ? t.slice(1) : t;
  if (looksLikeDuration(rel)) return dateInRange(new Date(Date.now() + parseDuration(rel, flag) * 1000), flag, text);
  const at = isoTimeParse(t, flag, text);
  if (!at) throw new UsageError(`${flag} must be an ISO 8601 time (2030-01-02T15:04:05Z) or a delay such as 10m, got "${text}"`);
  return dateInRange(at, flag, text);
}

/** A time in the past: an age (`7d`, `12h`: that long ago) or an ISO 8601 date and time with its zone (isoTimeParse). */
export function parseAgeOrTime(text: string, flag: string): Date {
  const t = text.trim();
  if (looksLikeDuration(t)) return dateInRange(new Date(Date.now() - parseDuration(t, flag) * 1000), flag, text);
  const at = isoTimeParse(t, flag, text);
  if (!at) throw new UsageError(`${flag} must be an age such as 7d or an ISO 8601 time (2030-01-02T15:04:05Z), got "${text}"`);
  return dateInRange(at, flag, text);
}

/**
 * The value of a flag that names something (a queue, a type, an idempotency key, job ids),
 * refused when empty: the server reads an empty value as "not given", so an unset variable
 * in a script (`--queue "$Q"`) would widen a purge to every queue, or submit a job without
 * its idempotency key or without the parents it must wait for.
 */
export function nonEmpty(value: string | undefined, flag: string): string | undefined {
  if (value !== undefined && value.trim() === '') throw new UsageError(`${flag} is empty: give a value, or leave the flag out`);
  return value;
}

/**
 * The bounds in words: "from 0 to 1", "at least 1", "at most 10" (never "to Infinity").
 * An infinite bound is no bound.
 */
function rangeText(min: number, max: number): string {
  if (Number.isFinite(min) && Number.isFinite(max)) return `from ${min} to ${max}`;
  if (Number.isFinite(min)) return `at least ${min}`;
  return `at most ${max}`;
}

/**
 * A whole number within bounds; bounds not given are the int32 range the wire carries, so a
 * value past it is named by its flag (an unbounded side is not said: "at least 1").
 */
export function parseInteger(text: string, flag: string, min = -Infinity, max = Infinity): number {
  if (!/^-?\d+$/.test(text.trim())) throw new UsageError(`${flag} must be a whole number, got "${text}"`);
  const n = Number(text);
  if (n < min || n > max) throw new UsageError(`${flag} must be ${rangeText(min, max)}, got ${text.trim()}`);
  if (n < INT32_MIN || n > INT32_MAX) throw new UsageError(`${flag} must be ${rangeText(Math.max(min, INT32_MIN), Math.min(max, INT32_MAX))}, got ${text.trim()}`);
  return n;
}

/** A number within bounds. */
export function parseNumber(text: string, flag: string, min: number, max: number): number {
  const n = Number(text.trim());
  if (text.trim() === '' || !Number.isFinite(n)) throw new UsageError(`${flag} must be a number, got "${text}"`);
  if (n < min || n > max) throw new UsageError(`${flag} must be ${rangeText(min, max)}, got ${n}`);
  return n;
}

/** A rate: `5/s`, `300/m`, `10/h`, or a number (per second); `0` or `none` is 0 (no limit). Per second. */
export function parseRate(text: string, flag: string): number {
  const t = text.trim().toLowerCase();
  if (t === 'none' || t === 'off') return 0;
  const m = /^([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(?:\/\s*(s|sec|m|min|h|hour))?$/.exec(t);
  const n = m ? Number(m[1]) : NaN;
  if (!m || !Number.isFinite(n)) throw new UsageError(`${flag} must be a rate such as 5/s, 300/m or 10/h (or 0/none), got "${text}"`);
  const per = m[2]?.startsWith('h') ? 3600 : m[2]?.startsWith('m') ? 60 : 1;
  return n / per;
}

/** A rate limit as the CLI shows it: `5/s, burst 1`, or `none`. */
export function rateText(q: Queue): string {
  if (!q.rateLimit) return 'none';
  return `${String(+q.rateLimit.perSecond.toPrecision(6))}/s, burst ${q.rateLimit.burst}`;
}

/** A JSON object given inline, or with `@file` read from that file (`--payload` of submit and schedule set). */
export function parsePayload(text: string, flag: string): JsonObject {
  if (!text.startsWith('@')) return parseJsonObject(text, flag);
  let content: string;
  try {
    content = readFileSync(text.slice(1), 'utf8');
  } catch (err) {
    throw new UsageError(`${flag} ${text}: ${(err as Error).message}`);
  }
  return parseJsonObject(content, `${flag} ${text}`);
}

/** A JSON object given inline. */
export function parseJsonObject(text: string, flag: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${flag} is not valid JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new UsageError(`${flag} must be a JSON object`);
  return value as JsonObject;
}

// ----- rendering ------------------------------------------------------------------------

/** `2030-01-02 15:04:05Z`, or `-`. */
export function time(d: Date | null): string {
  return d ? d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '-';
}

/** Seconds as `1h30m`, `5s`, `250ms`. */
export function duration(seconds: number): string {
  if (seconds === 0) return '0s';
  if (seconds < 1) return `${Math.round(seconds * 1000)}ms`;
  let left = Math.round(seconds);
  const out: string[] = [];
  for (const [unit, size] of [['d', 86_400], ['h', 3600], ['m', 60], ['s', 1]] as const) {
    if (left >= size) {
      out.push(`${Math.floor(left / size)}${unit}`);
      left %= size;
    }
  }
  return out.join('');
}

/** Rows as columns padded to the widest cell. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/**
 * Label/value lines. A value of several lines (a stack trace in a last error) continues
 * under its first line, indented past the labels, so that no line of it reads as a field.
 */
export function fields(pairs: [string, string][]): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  const indent = ' '.repeat(width + 2);
  return pairs.map(([k, v]) => `${k.padEnd(width)}  ${v.replace(/\r?\n/g, `\n${indent}`)}`).join('\n');
}

/** `text` on one line (runs of white space as one space), cut to `max` characters with an ellipsis. */
export function oneLine(text: string, max: number): string {
  const t = text.replace(/\s+/g, ' ');
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/**
 * A bulk dry run's line: how many jobs the action would touch and, when any, the
 * --finished-before that keeps the action to them (the dry run's bound, as an ISO time the
 * flag reads back exactly), so that jobs failing after the count are not taken unseen.
 */
export function countedText(counted: { count: number; finishedBefore: Date | null }, done: 'retried' | 'deleted', verb: 'retry' | 'delete'): string {
  const jobs = `${counted.count} job${counted.count === 1 ? '' : 's'}`;
  if (counted.count === 0 || !counted.finishedBefore) return `${jobs} would be ${done}`;
  const bound = counted.finishedBefore.toISOString();
  return `${jobs} would be ${done}; to ${verb} ${counted.count === 1 ? 'it' : 'these'} and none that finish later, add --finished-before ${bound}`;
}

/**
 * `text` as one shell word a POSIX shell reads back exactly: as it is when it holds only
 * characters no shell treats specially, else in single quotes (a ' inside as '\''). Used for
 * the commands the CLI prints for copying (`dlq`'s retry and list of a group, the check after
 * a timed-out write), so that a copied one names exactly what was meant.
 */
export function shellWord(text: string): string {
  if (/^[A-Za-z0-9_.,:/@%+=-]+$/.test(text)) return text;
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** Children listed by `evora get` before "and N more". */
const CHILDREN_SHOWN = 10;

/** One job, a field per line (`evora get`), with the ids of its direct children (GetJob's dependents). */
export function jobDetails(job: Job, dependents: readonly string[] = []): string {
  const children =
    dependents.length === 0
      ? '-'
      : dependents.slice(0, CHILDREN_SHOWN).join(', ') + (dependents.length > CHILDREN_SHOWN ? `, and ${dependents.length - CHILDREN_SHOWN} more` : '');
  return fields([
    ['id', job.id],
    ['queue', job.queue],
    ['type', job.type],
    ['state', job.state + (job.cancelRequested && job.state === 'RUNNING' ? ' (cancel requested)' : '')],
    ['attempt', `${job.attempt} of ${job.maxAttempts}`],
    ['priority', String(job.priority)],
    ['run at', time(job.runAt)],
    ['created', time(job.createdAt)],
    ['started', time(job.startedAt)],
    ['finished', time(job.finishedAt)],
    ['lease until', time(job.leaseExpiresAt)],
    ['worker', job.workerId ?? '-'],
    ['idempotency key', job.idempotencyKey ?? '-'],
    ['concurrency key', job.concurrencyKey ?? '-'],
    ['depends on', job.dependsOn.length > 0 ? job.dependsOn.join(', ') : '-'],
    ['children', children],
    ['last error', job.lastError ?? '-'],
    ['progress', job.progress ? progressText(job.progress) : '-'],
    ['payload', JSON.stringify(job.payload)],
    ['result', job.result ? JSON.stringify(job.result) : '-'],
  ]);
}

/** A progress report on one line: `40% (attempt 2, 2026-11-26 10:00:00) copying`. */
function progressText(p: JobProgress): string {
  const amount = p.percent !== null ? `${p.percent}%` : p.done !== null ? `${p.done}/${p.total ?? '?'}` : '-';
  return `${amount} (attempt ${p.attempt}, ${time(p.reportedAt)})${p.message ? ` ${oneLine(p.message, 80)}` : ''}`;
}

/** A job's attempts, one line each, oldest first (`evora get`); a long error is cut to one short line. */
export function attemptTable(attempts: JobAttempt[]): string {
  if (attempts.length === 0) return 'attempts: none yet';
  return table(
    ['ATTEMPT', 'OUTCOME', 'WORKER', 'STARTED', 'ENDED', 'ERROR'],
    attempts.map((a) => [
      String(a.attempt),
      a.outcome,
      a.workerId ?? '-',
      time(a.startedAt),
      time(a.finishedAt),
      a.error ? oneLine(a.error, 60) : '-',
    ]),
  );
}

/** Jobs, one line each (`evora list`); a long last error is cut to one short line. */
export function jobTable(jobs: Job[]): string {
  return table(
    ['ID', 'QUEUE', 'TYPE', 'STATE', 'ATTEMPT', 'PRIO', 'RUN AT', 'CREATED', 'LAST ERROR'],
    jobs.map((j) => [
      j.id,
      j.queue,
      j.type,
      j.state,
      `${j.attempt}/${j.maxAttempts}`,
      String(j.priority),
      time(j.runAt),
      time(j.createdAt),
      j.lastError ? oneLine(j.lastError, 60) : '-',
    ]),
  );
}

function backoffText(q: Queue): string {
  const b = q.backoff;
  return `${b.kind} ${duration(b.baseSeconds)}..${duration(b.capSeconds)}${b.jitter ? ` ±${Math.round(b.jitter * 100)}%` : ''}`;
}

/** A retention in seconds as shown: `7d`, or `forever` for 0. */
function retentionText(seconds: number): string {
  return seconds === 0 ? 'forever' : duration(seconds);
}

/** Parses a retention flag: a duration (`7d`, `12h`), or `0` / `forever` to keep finished jobs forever. Returns seconds. */
export function parseRetention(text: string, flag: string): number {
  return text.trim().toLowerCase() === 'forever' ? 0 : parseDuration(text, flag);
}

/** Queues and their settings, one line each (`evora queues`); a queue that deletes its jobs at completion keeps completed ones "deleted". */
export function queueTable(queues: Queue[]): string {
  return table(
    ['NAME', 'STATUS', 'MAX ATTEMPTS', 'LEASE', 'BACKOFF', 'MAX CONCURRENCY', 'KEEP COMPLETED/CANCELLED/DLQ'],
    queues.map((q) => [
      q.name,
      q.paused ? 'paused' : 'active',
      String(q.maxAttempts),
      duration(q.leaseSeconds),
      backoffText(q),
      q.maxConcurrency === 0 ? 'unlimited' : String(q.maxConcurrency),
      [q.deleteOnComplete ? 'deleted' : retentionText(q.completedRetentionSeconds), ...[q.cancelledRetentionSeconds, q.dlqRetentionSeconds].map(retentionText)].join('/'),
    ]),
  );
}

const ms = (v: number) => (v === 0 ? '-' : v < 10 ? `${v.toFixed(1)}ms` : `${Math.round(v)}ms`);
const rate = (v: number) => (v === 0 ? '0' : v < 10 ? v.toFixed(2) : String(Math.round(v)));

/** One line per queue: counts, throughput, latency, failure rate, workers. */
export function statsTable(stats: QueueStats[]): string {
  return table(
    ['QUEUE', 'PENDING', 'RUNNING', 'COMPLETED', 'DLQ', 'CANCELLED', 'JOBS/S 1M', 'WAIT P50/P99', 'RUN P50/P99', 'FAIL %', 'WORKERS'],
    stats.map((s) => [
      s.queue,
      String(s.counts.PENDING),
      String(s.counts.RUNNING),
      String(s.counts.COMPLETED),
      String(s.counts.DLQ),
      String(s.counts.CANCELLED),
      rate(s.throughput.last1m),
      `${ms(s.wait.p50Ms)}/${ms(s.wait.p99Ms)}`,
      `${ms(s.run.p50Ms)}/${ms(s.run.p99Ms)}`,
      (s.failureRate * 100).toFixed(1),
      `${s.connectedWorkers} (${s.freeSlots} free)`,
    ]),
  );
}

/** All of one queue's stats. */
export function statsDetails(s: QueueStats): string {
  return fields([
    ['queue', s.queue],
    ['pending / running', `${s.counts.PENDING} / ${s.counts.RUNNING}`],
    ['waiting (for parents)', String(s.counts.WAITING)],
    ['completed / dlq / cancelled', `${s.counts.COMPLETED} / ${s.counts.DLQ} / ${s.counts.CANCELLED}`],
    ['jobs/s (1m, 5m, 60m)', `${rate(s.throughput.last1m)}, ${rate(s.throughput.last5m)}, ${rate(s.throughput.last60m)}`],
    ['wait p50/p95/p99', `${ms(s.wait.p50Ms)} / ${ms(s.wait.p95Ms)} / ${ms(s.wait.p99Ms)}`],
    ['run p50/p95/p99', `${ms(s.run.p50Ms)} / ${ms(s.run.p95Ms)} / ${ms(s.run.p99Ms)}`],
    ['last 60m', `${s.submitted60m} submitted, ${s.completed60m} completed, ${s.failed60m} failed, ${s.deadLettered60m} dead-lettered`],
    ['failure rate', `${(s.failureRate * 100).toFixed(1)}%`],
    ['workers (all servers)', `${s.connectedWorkers}, ${s.freeSlots} free slots`],
    ['events not yet counted', `${s.outboxLagEstimated ? 'about ' : ''}${s.outboxLagEvents}`],
  ]);
}

/** One queue's settings, a field per line (`evora queue get`, `evora queue set`). */
export function queueDetails(q: Queue): string {
  return fields([
    ['name', q.name],
    ['status', q.paused ? 'paused' : 'active'],
    ['max attempts', String(q.maxAttempts)],
    ['lease', duration(q.leaseSeconds)],
    ['backoff', backoffText(q)],
    ['max concurrency', q.maxConcurrency === 0 ? 'unlimited' : String(q.maxConcurrency)],
    ['max per key', q.maxConcurrencyPerKey === 0 ? 'unlimited' : String(q.maxConcurrencyPerKey)],
    ['rate limit', rateText(q)],
    [
      'keep completed',
      q.deleteOnComplete
        ? `no: deleted at completion (those with dependents: ${retentionText(q.completedRetentionSeconds)})`
        : retentionText(q.completedRetentionSeconds),
    ],
    ['keep cancelled', retentionText(q.cancelledRetentionSeconds)],
    ['keep dlq', retentionText(q.dlqRetentionSeconds)],
    ['attempt timeout', q.attemptTimeoutSeconds === 0 ? 'none' : duration(q.attemptTimeoutSeconds)],
    ['created', time(q.createdAt)],
    ['updated', time(q.updatedAt)],
  ]);
}

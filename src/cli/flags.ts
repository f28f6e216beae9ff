import { readFileSync } from 'node:fs';
import { MAX_TIME_MS, MIN_TIME_MS } from '../domain/validate.js';
import { DURATION_MAX_SECONDS, INT32_MAX, INT32_MIN } from '../sdk/checks.js';
import type { JsonObject } from '../sdk/index.js';

/**
 * Parsing of command-line values for every command. A value past what the wire or the server
 * takes (an int32, a Duration, a Timestamp) is refused here, naming the flag: the SDK would
 * refuse it too, but naming its own field (`job.priority`), which the user never typed.
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

/** Parses a retention flag: a duration (`7d`, `12h`), or `0` / `forever` to keep finished jobs forever. Returns seconds. */
export function parseRetention(text: string, flag: string): number {
  return text.trim().toLowerCase() === 'forever' ? 0 : parseDuration(text, flag);
}

/** Formatting shared by the pages: states, counts, times and durations as people read them. */
import type { Int64, JobState } from './types.js';

/**
 * Whether `text` is a job id (a UUID, any case). The jobs filter refuses anything else, and
 * the job page offers no copy button for an id that names no job.
 */
export function isJobId(text: string): boolean {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(text);
}

/** "JOB_STATE_DLQ" -> "dlq"; any enum name loses its prefix and goes lower case. */
export function enumLabel(value: string | undefined, prefix: string): string {
  if (!value) return '—';
  return value.startsWith(prefix) ? value.slice(prefix.length).toLowerCase().replace(/_/g, ' ') : value;
}

/** A job state for people ("pending", "dlq"). */
export function stateLabel(state: JobState | undefined): string {
  return enumLabel(state, 'JOB_STATE_');
}

/** An int64 count as text ("0" when unset): exact, no rounding through a float. */
export function count(value: Int64 | undefined): string {
  return value === undefined ? '0' : String(value);
}

/** An int64 count with its noun, singular for exactly one ("1 job", "3 jobs", "0 events"). */
export function countOf(value: Int64 | undefined, noun: string): string {
  const n = count(value);
  return `${n} ${n === '1' ? noun : `${noun}s`}`;
}

/**
 * The outcome of a bulk action confirmed after its dry run: "Retried 3 jobs" when it did what
 * was counted; otherwise the difference, said. Fewer: jobs counted changed meanwhile (another
 * operator retried or purged them) or were busy (held by another call, which can also end
 * the action's batches early: docs/api.md "Batches"), so a new count tells what is left. More (rare:
 * a job that finished in the same millisecond as the newest one counted, or whose transaction
 * committed just after the count; docs/api.md "Acting on what was counted"): said as well.
 * Without `counted` (an action on checked rows, with no dry run) only what was done. A cancel
 * ("Cancelled": cancelled, or running and asked to stop) has no bound: more than counted were
 * submitted between the count and the confirm.
 */
export function bulkOutcome(verb: 'Retried' | 'Purged' | 'Cancelled', done: Int64 | undefined, counted?: Int64): string {
  const n = Number(count(done));
  const c = counted === undefined ? n : Number(count(counted));
  if (n === c) return `${verb} ${countOf(done, 'job')}`;
  if (n < c) {
    const left = c - n;
    return `${verb} ${n} of the ${countOf(c, 'job')} counted: the other ${left} changed meanwhile or ${left === 1 ? 'was' : 'were'} busy; count again to see what is left`;
  }
  const extra = n - c;
  const why =
    verb === 'Cancelled'
      ? `${extra === 1 ? 'it was' : 'they were'} submitted after the count`
      : `${extra === 1 ? 'it' : 'they'} finished just as the count was made`;
  return `${verb} ${countOf(done, 'job')}, ${extra} more than the ${c} counted: ${why}`;
}

/**
 * The telemetry lag for the overview: "about N events" when the server estimated it (a long
 * outbox is counted exactly only over its first rows: docs/telemetry.md "The outbox lag"), so
 * an estimate is never read as an exact count.
 */
export function outboxLagText(events: Int64 | undefined, estimated: boolean | undefined): string {
  const text = countOf(events, 'event');
  return estimated ? `about ${text}` : text;
}

/** A number with at most `digits` decimals. */
export function num(value: number | undefined, digits = 1): string {
  if (value === undefined || !Number.isFinite(value)) return '0';
  return Number(value.toFixed(digits)).toString();
}

/** Milliseconds as "850 ms", "2.4 s", "3.1 min". */
export function ms(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return '—';
  if (value < 1000) return `${Math.round(value)} ms`;
  if (value < 60_000) return `${num(value / 1000)} s`;
  return `${num(value / 60_000)} min`;
}

/**
 * A timestamp in the browser's locale and zone, the zone named ("28/11/2026, 22:10:05 UTC"),
 * so a time read off a screenshot or a shared screen is not ambiguous.
 */
export function time(value: string | undefined): string {
  if (!value) return '—';
  const date = new Date(value);
  // With only timeZoneName set, the date and time keep their locale defaults.
  return Number.isNaN(date.getTime()) ? value : date.toLocaleString(undefined, { timeZoneName: 'short' });
}

/**
 * The browser's time zone as `time` names it ("EST", "UTC", "GMT+1"), for what shows times
 * without a date of their own to carry the name (the charts' time axis).
 */
export function zoneName(at = new Date()): string {
  return new Intl.DateTimeFormat(undefined, { timeZoneName: 'short' }).formatToParts(at).find((p) => p.type === 'timeZoneName')?.value ?? '';
}

/** "2 min ago" / "in 5 s" relative to now. */
export function ago(value: string | undefined, now = Date.now()): string {
  if (!value) return '—';
  const delta = new Date(value).getTime() - now;
  if (Number.isNaN(delta)) return value;
  const abs = Math.abs(delta);
  const text = abs < 60_000 ? `${Math.round(abs / 1000)} s` : abs < 3_600_000 ? `${Math.round(abs / 60_000)} min` : `${num(abs / 3_600_000)} h`;
  return delta < 0 ? `${text} ago` : `in ${text}`;
}

/** A proto Duration ("1.500s") as seconds; undefined when unset or malformed. */
export function durationSeconds(value: string | undefined): number | undefined {
  if (!value) return undefined;
  const match = /^(-?\d+(?:\.\d+)?)s$/.exec(value);
  return match ? Number(match[1]) : undefined;
}

/** Seconds as a proto Duration ("30s"). */
export function toDuration(seconds: number): string {
  return `${seconds}s`;
}

/** JSON for a payload or result, indented; "—" when unset. */
export function json(value: unknown): string {
  return value === undefined ? '—' : JSON.stringify(value, null, 2);
}

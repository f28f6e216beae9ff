import { type JobState } from '../domain/job.js';
import { outboxColumn, outboxEventsUnpack, type JobEvent, type OutboxEvents } from '../domain/events.js';
import { MAX_SERIES_MINUTES } from '../domain/validate.js';

/**
 * The projection: how outbox events become telemetry. Pure functions, no I/O, one logic
 * for every sink (MongoDB or the embedded Postgres tables). A sink applies a
 * `ProjectionUpdate` atomically per document; the projector makes that exactly-once.
 */

/** The outbox's event types, defined with the other domain types (src/domain/events.ts). */
export type { JobEvent, JobEventKind, OutboxEvents } from '../domain/events.js';

/** Per-minute counters of one queue. */
export interface MinuteCounters {
  submitted: number;
  completed: number;
  /** Failed attempts: failed and retrying, dead-lettered after an attempt, lease expired. */
  failed: number;
  deadLettered: number;
}

/** A histogram: bin index -> count (see latencyBin). */
export type Histogram = Record<number, number>;

/** What one minute of one queue gains from a batch. */
export interface MinuteDelta extends MinuteCounters {
  queue: string;
  /** Start of the minute (UTC). */
  minute: Date;
  wait: Histogram;
  run: Histogram;
}

/** Everything a batch of events changes in the telemetry store. */
export interface ProjectionUpdate {
  /** queue -> state -> change in the number of jobs in that state. */
  counts: Map<string, Partial<Record<JobState, number>>>;
  /** `${queue}|${minute ISO}` -> counters to add. */
  minutes: Map<string, MinuteDelta>;
  /**
   * The events themselves, for the recent-events collection, when the outbox was read with
   * details (a sink whose `storesEvents` is true); empty otherwise.
   */
  events: JobEvent[];
  /** Which outbox rows the batch is (a sink in the same database copies them in SQL). */
  outbox: OutboxRange;
}

/**
 * A projector batch's outbox rows: id <= hiId, written by a transaction older than horizon
 * (the horizon keeps out rows of transactions still open; see the outbox in
 * src/store/migrations/0001_baseline.sql). Fixed while the batch is open.
 */
export interface OutboxRange {
  hiId: string;
  horizon: string;
}

/**
 * Latency histogram bins: four per power of two of milliseconds (each bin about 19% wide),
 * so p50/p95/p99 read from them are within that resolution. Bin 0 holds 0..1 ms.
 */
export function latencyBin(ms: number): number {
  return ms <= 1 ? 0 : Math.min(127, Math.ceil(Math.log2(ms) * 4));
}

/** The upper edge of a bin in milliseconds (what a percentile read from it reports). */
export function latencyBinUpperMs(bin: number): number {
  return bin === 0 ? 1 : 2 ** (bin / 4);
}

/** The q-quantile (0..1) of a histogram, as a bin's upper edge; null when empty. */
export function histogramQuantile(h: Histogram, q: number): number | null {
  const bins = Object.entries(h)
    .map(([b, n]) => [Number(b), n] as const)
    .filter(([, n]) => n > 0)
    .sort((a, b) => a[0] - b[0]);
  const total = bins.reduce((s, [, n]) => s + n, 0);
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (const [bin, n] of bins) {
    seen += n;
    if (seen >= rank) return latencyBinUpperMs(bin);
  }
  return latencyBinUpperMs(bins[bins.length - 1]![0]);
}

/** Adds histogram b into a (in place) and returns a. */
export function histogramAdd(a: Histogram, b: Histogram): Histogram {
  for (const [bin, n] of Object.entries(b)) a[Number(bin)] = (a[Number(bin)] ?? 0) + n;
  return a;
}

function minuteStart(d: Date): Date {
  return new Date(Math.floor(d.getTime() / 60_000) * 60_000);
}

/** Folds a batch of outbox rows into the changes it makes to the telemetry store. */
export function projectEvents(rows: readonly OutboxEvents[], outbox: OutboxRange): ProjectionUpdate {
  const counts = new Map<string, Partial<Record<JobState, number>>>();
  const minutes = new Map<string, MinuteDelta>();
  for (const row of rows) {
    // The events of a row share their time; most rows also their queue, so the minute
    // bucket of the previous event is reused, not looked up again by a key built per event.
    const minute = minuteStart(row.at);
    const minuteKey = minute.toISOString();
    let lastQueue: string | null = null;
    let m!: MinuteDelta; // set together with lastQueue, on the first event
    for (let i = 0; i < row.n; i++) {
      const queue = outboxColumn(row.queue, i);
      const kind = outboxColumn(row.kind, i);
      const fromState = outboxColumn(row.fromState, i);
      const toState = outboxColumn(row.toState, i);
      let c = counts.get(queue);
      if (!c) counts.set(queue, (c = {}));
      c[toState] = (c[toState] ?? 0) + 1;
      if (fromState) c[fromState] = (c[fromState] ?? 0) - 1;

      if (queue !== lastQueue) {
        const key = `${queue}|${minuteKey}`;
        let found = minutes.get(key);
        if (!found) {
          found = { queue, minute, submitted: 0, completed: 0, failed: 0, deadLettered: 0, wait: {}, run: {} };
          minutes.set(key, found);
        }
        m = found;
        lastQueue = queue;
      }
      if (kind === 'submitted') m.submitted++;
      if (kind === 'completed') m.completed++;
      if (kind === 'failed_retrying' || kind === 'lease_expired' || (kind === 'dead_lettered' && fromState === 'RUNNING')) {
        m.failed++;
      }
      if (kind === 'dead_lettered') m.deadLettered++;
      const waitMs = row.waitMs[i];
      if (waitMs !== null && waitMs !== undefined) {
        const bin = latencyBin(waitMs);
        m.wait[bin] = (m.wait[bin] ?? 0) + 1;
      }
      const runMs = row.runMs[i];
      if (runMs !== null && runMs !== undefined) {
        const bin = latencyBin(runMs);
        m.run[bin] = (m.run[bin] ?? 0) + 1;
      }
    }
  }
  const events = rows.length > 0 && rows[0]!.details ? outboxEventsUnpack(rows) : [];
  return { counts, minutes, events, outbox };
}

/** p50, p95 and p99 of a histogram (null when empty): how every reading of the sinks reports latency. */
export function histogramPercentiles(h: Histogram): { p50: number | null; p95: number | null; p99: number | null } {
  return { p50: histogramQuantile(h, 0.5), p95: histogramQuantile(h, 0.95), p99: histogramQuantile(h, 0.99) };
}

/** Stats of one queue as read back from a sink. */
export interface QueueTelemetry {
  queue: string;
  counts: Partial<Record<JobState, number>>;
  /** Completed jobs per second over the last 1, 5 and 60 minutes (completedRate). */
  throughput: { m1: number; m5: number; m60: number };
  /** Percentiles in ms over the last 60 minutes; null without data. */
  waitMs: { p50: number | null; p95: number | null; p99: number | null };
  runMs: { p50: number | null; p95: number | null; p99: number | null };
  /** Failed attempts / (completed + failed attempts) over the last 60 minutes; 0 without data. */
  failureRate: number;
  submitted60m: number;
  completed60m: number;
  failed60m: number;
  deadLettered60m: number;
}

/**
 * Completed jobs per second over the `mins` minutes before `now`, from minute buckets. A
 * bucket that starts inside the window counts whole (the current one holds what completed so
 * far); the bucket the window's start falls in counts for the share of its minute inside
 * the window, as if its completions were spread evenly over it. Must stay true: a steady
 * rate reads the same at every second of a minute (counting whole buckets only, a 1-minute
 * rate fell to 0 as each minute began and climbed back by its end).
 */
export function completedRate(minutes: readonly MinuteDelta[], now: Date, mins: number): number {
  const start = now.getTime() - mins * 60_000;
  let completed = 0;
  for (const m of minutes) {
    const at = m.minute.getTime();
    if (at >= start) completed += m.completed;
    else if (at + 60_000 > start) completed += (m.completed * (at + 60_000 - start)) / 60_000;
  }
  return completed / (mins * 60);
}

/**
 * Combines a queue's state counts and its minute buckets into stats as of `now`. Shared by
 * the sinks so that both answer the same way.
 */
export function queueTelemetryFrom(
  queue: string,
  counts: Partial<Record<JobState, number>>,
  minutes: MinuteDelta[],
  now: Date,
): QueueTelemetry {
  const since = (mins: number) => minutes.filter((m) => m.minute.getTime() > now.getTime() - mins * 60_000);
  const last60 = since(60);
  const sum = (f: (m: MinuteDelta) => number) => last60.reduce((s, m) => s + f(m), 0);
  const wait = last60.reduce((h, m) => histogramAdd(h, m.wait), {} as Histogram);
  const run = last60.reduce((h, m) => histogramAdd(h, m.run), {} as Histogram);
  const completed = sum((m) => m.completed);
  const failed = sum((m) => m.failed);
  return {
    queue,
    counts,
    throughput: { m1: completedRate(minutes, now, 1), m5: completedRate(minutes, now, 5), m60: completedRate(minutes, now, 60) },
    waitMs: histogramPercentiles(wait),
    runMs: histogramPercentiles(run),
    failureRate: completed + failed === 0 ? 0 : failed / (completed + failed),
    submitted60m: sum((m) => m.submitted),
    completed60m: completed,
    failed60m: failed,
    deadLettered60m: sum((m) => m.deadLettered),
  };
}

/**
 * How long a sink keeps minute buckets (minutes since the bucket's start): twice the
 * longest read (a series of MAX_SERIES_MINUTES; stats read 61 minutes), so every read
 * finds all its buckets, with a day of margin. Must stay at least MAX_SERIES_MINUTES + 1.
 */
export const MINUTES_KEPT = 2 * MAX_SERIES_MINUTES;

/** What a sink stores, read back raw: counts by queue and state, and minute buckets. */
export interface TelemetryRows {
  counts: { queue: string; state: JobState; n: number }[];
  minutes: MinuteDelta[];
}

/**
 * A telemetry store. `apply` must be idempotent per batch id: applying the same batch
 * again (after a crash mid-apply) changes each document at most once in total.
 */
export interface TelemetrySink {
  readonly name: string;
  /**
   * True when the sink stores each event (ProjectionUpdate.events): the projector then
   * reads the outbox with details. A sink in the outbox's database copies events in SQL.
   */
  readonly storesEvents: boolean;
  /** Creates collections/tables and indexes it needs. */
  init(): Promise<void>;
  /**
   * Applies one batch. `signal` aborts when the projector is stopped: a sink may then stop
   * between writes (throwing), as a crash would; the batch stays open in the outbox and
   * applying it again must complete it without counting anything twice.
   */
  apply(batchId: number, update: ProjectionUpdate, signal?: AbortSignal): Promise<void>;
  /** The counts and the minute buckets since `since`, of the given queues (null: all). */
  read(params: { queues: string[] | null; since: Date }): Promise<TelemetryRows>;
  /**
   * One bounded pass of retention (the projector runs it: docs/telemetry.md, "Retention"):
   * deletes up to `limit` minute buckets that start more than MINUTES_KEPT minutes before
   * `now`, up to `limit` recent events past their retention (unless the store expires them
   * itself), and whatever else of the sink's bookkeeping exactly-once no longer needs.
   * Returns how many rows or documents it deleted; `limit` or more means more may be due.
   * Must keep what a batch applied again needs to be recognised as applied. `now` is the
   * database's clock (Store.dbNow), the one the events' times come from, never this
   * process's: the leader's clock may be off.
   */
  prune(params: { limit: number; now: Date }): Promise<number>;
  close(): Promise<void>;
}

/**
 * Stats of the given queues (null: every queue the sink knows), as of `now`, by queue
 * name. One reading for every sink. `now` is the database's clock (Store.dbNow), the one
 * the events' times and so the minute buckets come from, never this process's: a server
 * whose clock is off would read the wrong window (the last hour's counts short, the last
 * minute's rate zero).
 */
export async function telemetryStats(
  sink: TelemetrySink,
  params: { queues: string[] | null; now: Date },
): Promise<QueueTelemetry[]> {
  const now = params.now;
  const rows = await sink.read({ queues: params.queues, since: new Date(now.getTime() - 61 * 60_000) });
  const byQueue = new Map<string, { counts: Partial<Record<JobState, number>>; minutes: MinuteDelta[] }>();
  const entry = (q: string) => {
    let e = byQueue.get(q);
    if (!e) byQueue.set(q, (e = { counts: {}, minutes: [] }));
    return e;
  };
  for (const c of rows.counts) entry(c.queue).counts[c.state] = c.n;
  for (const m of rows.minutes) entry(m.queue).minutes.push(m);
  return [...byQueue]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([q, e]) => queueTelemetryFrom(q, e.counts, e.minutes, now));
}

/** One minute of a series (GetQueueSeries): counters summed over its queues, percentiles of the merged histograms. */
export interface SeriesPoint extends MinuteCounters {
  /** Start of the minute (UTC). */
  minute: Date;
  waitMs: { p50: number | null; p95: number | null; p99: number | null };
  runMs: { p50: number | null; p95: number | null; p99: number | null };
}

/**
 * The last `minutes` minutes as of `now` (the database's clock, as for telemetryStats), one
 * point per minute oldest first (the current, partial minute last; a minute without data is
 * a point of zeros), summed over the given queues (null: every queue; only those are read,
 * so name a scoped caller's). Percentiles come from the summed histograms, read as
 * telemetryStats reads them. One reading for every sink.
 */
export async function telemetrySeries(
  sink: TelemetrySink,
  params: { queues: string[] | null; minutes: number; now: Date },
): Promise<SeriesPoint[]> {
  const now = params.now;
  const last = minuteStart(now).getTime();
  const first = last - (params.minutes - 1) * 60_000;
  const rows = await sink.read({ queues: params.queues, since: new Date(first - 1) });
  const byMinute = new Map<number, { c: MinuteCounters; wait: Histogram; run: Histogram }>();
  for (let t = first; t <= last; t += 60_000) {
    byMinute.set(t, { c: { submitted: 0, completed: 0, failed: 0, deadLettered: 0 }, wait: {}, run: {} });
  }
  for (const m of rows.minutes) {
    const e = byMinute.get(minuteStart(m.minute).getTime());
    if (!e) continue;
    e.c.submitted += m.submitted;
    e.c.completed += m.completed;
    e.c.failed += m.failed;
    e.c.deadLettered += m.deadLettered;
    histogramAdd(e.wait, m.wait);
    histogramAdd(e.run, m.run);
  }
  return [...byMinute].map(([t, e]) => ({ minute: new Date(t), ...e.c, waitMs: histogramPercentiles(e.wait), runMs: histogramPercentiles(e.run) }));
}

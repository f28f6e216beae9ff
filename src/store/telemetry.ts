import type { StorePool } from './pool.js';
import type { JobState } from '../domain/job.js';
import { inTransaction, rowOf, rowsOf, statement, type None } from './statements.js';

/**
 * The embedded telemetry sink's tables (src/telemetry/pg-sink.ts is the sink; this is its
 * SQL): a projector batch applied in one transaction together with its id, so applying it
 * again after a crash is a no-op, and the reads behind the stats API. The shapes here are
 * the store's own, so the store imports nothing from telemetry.
 */

/** A latency histogram: bin index -> count. */
export type TelemetryHistogram = Record<number, number>;

/** A change in the number of jobs of a queue in a state. */
export interface TelemetryCountDelta {
  queue: string;
  state: JobState;
  n: number;
}

/** What one minute of one queue gains (or, read back, holds). */
export interface TelemetryMinute {
  queue: string;
  /** Start of the minute (UTC). */
  minute: Date;
  submitted: number;
  completed: number;
  failed: number;
  deadLettered: number;
  wait: TelemetryHistogram;
  run: TelemetryHistogram;
}

const telemetryBatchMarkAppliedSql = statement<{ batchId: number }, { batch_id: string }>(
  'telemetry-batch-mark-applied',
  { batchId: 'int8' },
  { batch_id: 'int8' },
);
const telemetryCountsAddSql = statement<{ queues: string[]; states: JobState[]; deltas: number[] }, None>(
  'telemetry-counts-add',
  { queues: 'text[]', states: 'evora.job_state[]', deltas: 'int8[]' },
  {},
);
interface TelemetryMinutesAddParams {
  queues: string[];
  minutes: Date[];
  submitted: number[];
  completed: number[];
  failed: number[];
  deadLettered: number[];
  waitHists: string[];
  runHists: string[];
}
const telemetryMinutesAddSql = statement<TelemetryMinutesAddParams, None>(
  'telemetry-minutes-add',
  {
    queues: 'text[]',
    minutes: 'timestamptz[]',
    submitted: 'int8[]',
    completed: 'int8[]',
    failed: 'int8[]',
    deadLettered: 'int8[]',
    waitHists: 'jsonb[]',
    runHists: 'jsonb[]',
  },
  {},
);
const telemetryRecentEventsCopySql = statement<{ hiId: string; horizon: string }, None>(
  'telemetry-recent-events-copy',
  { hiId: 'int8', horizon: 'xid8' },
  {},
);
const telemetryRecentEventsPruneSql = statement<{ retentionSeconds: number; limit: number; now: Date | null }, { events: number }>(
  'telemetry-recent-events-prune',
  { retentionSeconds: 'float8', limit: 'int8', now: 'timestamptz' },
  { events: 'int4' },
);
const telemetryMinutesPruneSql = statement<{ keepMinutes: number; limit: number; now: Date | null }, { minutes: number }>(
  'telemetry-minutes-prune',
  { keepMinutes: 'int4', limit: 'int8', now: 'timestamptz' },
  { minutes: 'int4' },
);
const telemetryAppliedBatchesPruneSql = statement<{ limit: number }, { batches: number }>(
  'telemetry-applied-batches-prune',
  { limit: 'int8' },
  { batches: 'int4' },
);
const telemetryCountsReadSql = statement<{ queues: string[] | null }, { queue: string; state: JobState; n: string }>(
  'telemetry-counts-read',
  { queues: 'text[]' },
  { queue: 'text', state: 'evora.job_state', n: 'int8' },
);
interface TelemetryMinuteRow {
  queue: string;
  minute: Date;
  submitted: string;
  completed: string;
  failed: string;
  dead_lettered: string;
  wait_hist: TelemetryHistogram;
  run_hist: TelemetryHistogram;
}
const telemetryMinutesReadSql = statement<{ queues: string[] | null; since: Date }, TelemetryMinuteRow>(
  'telemetry-minutes-read',
  { queues: 'text[]', since: 'timestamptz' },
  {
    queue: 'text',
    minute: 'timestamptz',
    submitted: 'int8',
    completed: 'int8',
    failed: 'int8',
    dead_lettered: 'int8',
    wait_hist: 'jsonb',
    run_hist: 'jsonb',
  },
);

/** Applies a projector batch to the embedded sink's tables (Store.telemetryApply). */
export async function telemetryApply(
  pool: StorePool,
  params: {
    batchId: number;
    counts: TelemetryCountDelta[];
    minutes: TelemetryMinute[];
    outbox: { hiId: string; horizon: string };
  },
): Promise<{ applied: boolean }> {
  return pool.withClient((client) =>
    inTransaction(client, async () => {
      if (!(await rowOf(client, telemetryBatchMarkAppliedSql, { batchId: params.batchId }))) {
        return { applied: false };
      }
      const { counts, minutes } = params;
      if (counts.length > 0) {
        await rowsOf(client, telemetryCountsAddSql, {
          queues: counts.map((c) => c.queue),
          states: counts.map((c) => c.state),
          deltas: counts.map((c) => c.n),
        });
      }
      if (minutes.length > 0) {
        await rowsOf(client, telemetryMinutesAddSql, {
          queues: minutes.map((m) => m.queue),
          minutes: minutes.map((m) => m.minute),
          submitted: minutes.map((m) => m.submitted),
          completed: minutes.map((m) => m.completed),
          failed: minutes.map((m) => m.failed),
          deadLettered: minutes.map((m) => m.deadLettered),
          waitHists: minutes.map((m) => JSON.stringify(m.wait)),
          runHists: minutes.map((m) => JSON.stringify(m.run)),
        });
      }
      // Recent events: the batch's packed outbox rows, copied as they are.
      // (Old ones are deleted by retention, telemetryPrune, in bounded passes.)
      await rowsOf(client, telemetryRecentEventsCopySql, { hiId: params.outbox.hiId, horizon: params.outbox.horizon });
      return { applied: true };
    }),
  );
}

/**
 * One bounded pass of the embedded sink's retention (Store.telemetryPrune): deletes up to
 * `limit` minute buckets older than `keepMinutes`, up to `limit` markers of closed projector
 * batches, and up to `limit` recent events older than `eventRetentionSeconds`, each in a
 * statement of its own. Returns how many of each.
 */
export async function telemetryPrune(
  pool: StorePool,
  params: { keepMinutes: number; eventRetentionSeconds: number; limit: number; now: Date | null },
): Promise<{ minutes: number; batches: number; events: number }> {
  const { keepMinutes, eventRetentionSeconds, limit, now } = params;
  const minutes = (await rowOf(pool, telemetryMinutesPruneSql, { keepMinutes, limit, now }))?.minutes ?? 0;
  const batches = (await rowOf(pool, telemetryAppliedBatchesPruneSql, { limit }))?.batches ?? 0;
  const events = (await rowOf(pool, telemetryRecentEventsPruneSql, { retentionSeconds: eventRetentionSeconds, limit, now }))?.events ?? 0;
  return { minutes, batches, events };
}

/** The embedded sink's counts and minutes (Store.telemetryRead). */
export async function telemetryRead(
  pool: StorePool,
  params: { queues: string[] | null; since: Date },
): Promise<{ counts: TelemetryCountDelta[]; minutes: TelemetryMinute[] }> {
  const counts = await rowsOf(pool, telemetryCountsReadSql, { queues: params.queues });
  const minutes = await rowsOf(pool, telemetryMinutesReadSql, { queues: params.queues, since: params.since });
  return {
    counts: counts.map((r) => ({ queue: r.queue, state: r.state, n: Number(r.n) })),
    minutes: minutes.map((r) => ({
      queue: r.queue,
      minute: r.minute,
      submitted: Number(r.submitted),
      completed: Number(r.completed),
      failed: Number(r.failed),
      deadLettered: Number(r.dead_lettered),
      wait: r.wait_hist,
      run: r.run_hist,
    })),
  };
}

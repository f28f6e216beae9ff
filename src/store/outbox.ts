import type { StorePool } from './pool.js';
import type { OutboxEvents } from '../domain/events.js';
import { rowOf, rowsOf, statement, type None } from './statements.js';

/**
 * The outbox as the projector sees it: batches opened, read and closed (docs/telemetry.md
 * explains why nothing is lost or counted twice), and the two scrape-time gauges that read
 * the queue's state (queue depths, outbox lag).
 */

/** A projector batch: its id and the outbox rows it is (id <= hi_id, xid < horizon). */
interface BatchRow {
  id: string;
  hi_id: string;
  horizon: string;
}
const BATCH_COLUMNS = { id: 'int8', hi_id: 'int8', horizon: 'xid8' } as const;

const projectorBatchOpenGetSql = statement<None, BatchRow>('projector-batch-open-get', {}, BATCH_COLUMNS);
const projectorBatchOpenSql = statement<{ limit: number; sink: string }, BatchRow>(
  'projector-batch-open',
  { limit: 'int8', sink: 'text' },
  BATCH_COLUMNS,
);

interface OutboxReadRow {
  id: string;
  at: Date;
  n: number;
  /** PackedEvents as JSON. */
  e: string;
}
const OUTBOX_READ_COLUMNS = { id: 'int8', at: 'timestamptz', n: 'int4', e: 'text' } as const;
const outboxReadSql = statement<{ hiId: string; horizon: string }, OutboxReadRow>(
  'outbox-read',
  { hiId: 'int8', horizon: 'xid8' },
  OUTBOX_READ_COLUMNS,
  { prepared: true },
);
const outboxReadDetailsSql = statement<{ hiId: string; horizon: string }, OutboxReadRow>(
  'outbox-read-details',
  { hiId: 'int8', horizon: 'xid8' },
  OUTBOX_READ_COLUMNS,
  { prepared: true },
);

const projectorBatchCloseSql = statement<{ batchId: number }, None>('projector-batch-close', { batchId: 'int8' }, {});

const queueDepthsSql = statement<{ now: Date | null }, { queue: string; depth: number }>(
  'queue-depths',
  { now: 'timestamptz' },
  { queue: 'text', depth: 'int4' },
);

const outboxLagSql = statement<{ exactRows: number; now: Date | null }, { n: number; estimated: boolean; age: number | null }>(
  'outbox-lag',
  { exactRows: 'int8', now: 'timestamptz' },
  { n: 'float8', estimated: 'bool', age: 'float8' },
);

/**
 * Outbox rows the lag counts exactly (sql/outbox-lag.sql); beyond them the event count is an
 * estimate, marked as such. The projector keeps the outbox at a few rows while it keeps up,
 * so the lag is exact unless the telemetry store has been away, and a scrape then costs what
 * it does on a short outbox: ~0.5 ms of PostgreSQL's time at 1,000,000 outbox rows, where the
 * sum over every row took ~760 ms (`npx tsx bench/experiments/outbox-lag.ts`; docs/telemetry.md,
 * "The outbox lag"). 10,000 rows cost ~15 ms (a heap fetch per row), hence 1,000.
 */
export const OUTBOX_LAG_EXACT_ROWS = 1000;

/** Telemetry's lag (Store.outboxLag). */
export interface OutboxLag {
  /** Events not yet projected: exact, or an estimate when `estimated`. */
  events: number;
  /** The outbox has more than the rows counted exactly, and `events` is an estimate. */
  estimated: boolean;
  /** Age of the oldest event not yet projected, in seconds (0 when there is none). */
  oldestSeconds: number;
}

/** One packed outbox row as outbox-read.sql returns it (then the details of outbox-read-details.sql). */
type PackedEvents = [
  OutboxEvents['queue'], OutboxEvents['kind'], OutboxEvents['fromState'], OutboxEvents['toState'],
  (number | null)[], (number | null)[],
  string[]?, string[]?, number[]?, (string | null)[]?,
];

/** The projector's next batch (Store.projectorBatchOpen). */
export async function projectorBatchOpen(
  pool: StorePool,
  params: { sink: string; limit: number; details: boolean },
): Promise<{ batchId: number; outbox: { hiId: string; horizon: string }; rows: OutboxEvents[]; reopened: boolean } | null> {
  let batch = await rowOf(pool, projectorBatchOpenGetSql, {});
  let reopened = batch !== undefined;
  if (!batch) {
    batch = await rowOf(pool, projectorBatchOpenSql, { limit: params.limit, sink: params.sink });
    if (!batch) {
      // Nothing to project, or another projector opened a batch first (only one may be
      // open): then that batch is this one too (each sink applies a batch once).
      batch = await rowOf(pool, projectorBatchOpenGetSql, {});
      reopened = batch !== undefined;
    }
  }
  if (!batch) return null;
  const rows = await rowsOf(pool, params.details ? outboxReadDetailsSql : outboxReadSql, { hiId: batch.hi_id, horizon: batch.horizon });
  const out: OutboxEvents[] = rows.map((row) => {
    const [queue, kind, fromState, toState, waitMs, runMs, jobIds, types, attempts, workerIds] = JSON.parse(row.e) as PackedEvents;
    return {
      rowId: Number(row.id),
      at: row.at,
      n: row.n,
      queue,
      kind,
      fromState,
      toState,
      waitMs,
      runMs,
      details: jobIds ? { jobIds, types: types!, attempts: attempts!, workerIds: workerIds! } : null,
    };
  });
  return { batchId: Number(batch.id), outbox: { hiId: batch.hi_id, horizon: batch.horizon }, rows: out, reopened };
}

/** Closes an applied batch (Store.projectorBatchClose). */
export async function projectorBatchClose(pool: StorePool, batchId: number): Promise<void> {
  await rowsOf(pool, projectorBatchCloseSql, { batchId });
}

/** Claimable jobs for every known queue, 0 for a drained one (Store.queueDepths). */
export async function queueDepths(pool: StorePool, now: Date | null): Promise<{ queue: string; depth: number }[]> {
  return rowsOf(pool, queueDepthsSql, { now });
}

/** Telemetry's lag (Store.outboxLag). */
export async function outboxLag(pool: StorePool, params: { exactRows: number; now: Date | null }): Promise<OutboxLag> {
  const row = await rowOf(pool, outboxLagSql, { exactRows: Math.max(1, Math.floor(params.exactRows)), now: params.now });
  return { events: row?.n ?? 0, estimated: row?.estimated ?? false, oldestSeconds: Math.max(0, row?.age ?? 0) };
}

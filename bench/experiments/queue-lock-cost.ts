/**
 * What the queue's shared advisory lock costs a submit (DeleteQueue's guard: every insert
 * into evora.jobs makes its queue rows through evora.queues_ensure, 0025, which takes
 * pg_advisory_xact_lock_shared on each distinct queue and looks for the rows in a snapshot
 * taken after it; sql/queue-delete-lock.sql says why). Runs the store's statements as they
 * are (`lock`) against the same files with the new-queue CTE put back to the form before it
 * (`noLock`: an INSERT ... WHERE NOT EXISTS on the statement's snapshot, no lock),
 * interleaved round by round on an embedded PostgreSQL, all into one existing queue:
 *   batch      job-insert-many.sql, 1,000 jobs: median wall ms per batch
 * and `inlineLock` (the lock in the statement, the row made by ON CONFLICT alone: it waits for
 * a transaction updating the row, which is why the store does not use it):
 *   handoff    job-insert-handoff.sql, one job (SubmitJob's statement), on CONNS connections
 *              at once (a hand-off to a worker id; the queue fills, so most go PENDING):
 *              submits per second over the round
 * and each statement's mean execution time in PostgreSQL (pg_stat_statements), which the
 * client's scheduling on a busy machine disturbs less than the wall times.
 * Measurement only. Usage: npx tsx bench/experiments/queue-lock-cost.ts [rounds=8]
 * (CONNS=1,8: the hand-off's connection counts, empty for none; PLAN=custom|generic)
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { uuidv7 } from '../../src/domain/ids.js';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { migrate } from '../../src/store/migrate.js';
import { sqlParse } from '../../src/store/statements.js';
import { insertBatchValues } from './insert-batch.js';

const ROUNDS = Number(process.argv[2] ?? 8);
const CONNS = (process.env.CONNS ?? '1,8').split(',').filter(Boolean).map(Number);
const HANDOFF_SECONDS = 2;
const dir = await mkdtemp(join(tmpdir(), 'evora-queue-lock-cost-'));
const pgh = await embeddedPostgresStart({
  dataDir: dir,
  port: await freePort(),
  postgresFlags: ['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=top'],
});
await migrate(pgh.url);
const pool = new pg.Pool({ connectionString: pgh.url, max: Math.max(1, ...CONNS) });
// PLAN=custom|generic: the plan cache mode of every connection (default: PostgreSQL's auto).
if (process.env.PLAN) pool.on('connect', (c) => void c.query(`SET plan_cache_mode = force_${process.env.PLAN}_plan`));
await pool.query("INSERT INTO evora.queues (name) VALUES ('enq') ON CONFLICT DO NOTHING");
await pool.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');

const file = (name: string) => readFileSync(new URL(`../../src/store/sql/${name}.sql`, import.meta.url), 'utf8');
/** The statement before the lock: the queue row made only when its snapshot shows none. */
function noLock(sql: string): string {
  const out = sql.replace(
    /new_queues AS MATERIALIZED \([\s\S]*?\n\),\n/,
    `new_queues AS (
  INSERT INTO evora.queues (name)
  SELECT DISTINCT i.queue FROM input i
  WHERE NOT EXISTS (SELECT 1 FROM evora.queues q WHERE q.name = i.queue)
  ON CONFLICT (name) DO NOTHING
  RETURNING name, max_attempts
),
`,
  );
  if (out === sql || out.includes('FROM evora.queues_ensure(')) throw new Error('the noLock variant did not apply');
  return out;
}
/** The lock taken in the statement itself, the row made by ON CONFLICT alone (waits for an updater of the row). */
function inlineLock(sql: string): string {
  const out = sql.replace(
    /new_queues AS MATERIALIZED \([\s\S]*?\n\),\n/,
    `locked AS MATERIALIZED (
  SELECT d.queue, pg_advisory_xact_lock_shared(7301847, hashtext(d.queue))::text AS locked
  FROM (SELECT DISTINCT i.queue FROM input i) d
),
new_queues AS (
  INSERT INTO evora.queues (name)
  SELECT l.queue FROM locked l
  ON CONFLICT (name) DO NOTHING
  RETURNING name, max_attempts
),
`,
  );
  if (out === sql) throw new Error('the inlineLock variant did not apply');
  return out;
}
const statements = {
  batch: {
    lock: sqlParse(file('job-insert-many'), 'lock.sql'),
    noLock: sqlParse(noLock(file('job-insert-many')), 'noLock.sql'),
    inlineLock: sqlParse(inlineLock(file('job-insert-many')), 'inlineLock.sql'),
  },
  handoff: {
    lock: sqlParse(file('job-insert-handoff'), 'lock.sql'),
    noLock: sqlParse(noLock(file('job-insert-handoff')), 'noLock.sql'),
    inlineLock: sqlParse(inlineLock(file('job-insert-handoff')), 'inlineLock.sql'),
  },
};
type Variant = 'lock' | 'noLock' | 'inlineLock';
const VARIANTS: Variant[] = ['lock', 'noLock', 'inlineLock'];

async function batch(v: Variant): Promise<number> {
  const p = statements.batch[v];
  const values = insertBatchValues(1000);
  const t0 = performance.now();
  await pool.query({ name: `batch_${v}`, text: p.text, values: p.paramNames.map((n) => values[n]) });
  return performance.now() - t0;
}

/** Submits per second of `conns` connections each submitting one job at a time for HANDOFF_SECONDS. */
async function handoff(v: Variant, conns: number): Promise<number> {
  const p = statements.handoff[v];
  // Each run starts from an empty queue (the hand-off probes the queue's claimable jobs).
  await pool.query("DELETE FROM evora.jobs WHERE queue = 'enq'");
  const end = performance.now() + HANDOFF_SECONDS * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: conns }, async () => {
      const client = await pool.connect();
      try {
        while (performance.now() < end) {
          const values: Record<string, unknown> = {
            id: uuidv7(), queue: 'enq', type: 'noop', payload: '{"n":1}', priority: 0, runAt: null, idempotencyKey: null,
            maxAttempts: null, policy: null, handoffWorkerId: 'w', now: null,
          };
          await client.query({ name: `handoff_${v}`, text: p.text, values: p.paramNames.map((k) => values[k]) });
          n++;
        }
      } finally {
        client.release();
      }
    }),
  );
  return n / HANDOFF_SECONDS;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const batchMs: Record<Variant, number[]> = { lock: [], noLock: [], inlineLock: [] };
const rates: Record<string, number[]> = {};
for (const v of VARIANTS) for (let k = 0; k < 3; k++) await batch(v); // prepare, warm up
await pool.query('SELECT pg_stat_statements_reset()');
for (let r = 0; r < ROUNDS; r++) {
  for (const v of r % 2 ? [...VARIANTS].reverse() : VARIANTS) {
    await pool.query("DELETE FROM evora.jobs WHERE queue = 'enq'");
    batchMs[v].push(await batch(v));
    for (const c of CONNS) (rates[`${v} x${c}`] ??= []).push(await handoff(v, c));
  }
}
console.table(VARIANTS.map((v) => ({ variant: v, 'batch of 1,000: wall ms (median)': +median(batchMs[v]).toFixed(2) })));
// The statements' own execution time in PostgreSQL (less disturbed by the client's scheduling).
const { rows } = await pool.query<{ query: string; calls: string; mean_ms: number }>(
  `SELECT query, calls, mean_exec_time AS mean_ms FROM pg_stat_statements WHERE query LIKE '%INSERT INTO evora.jobs%'`,
);
// pg_stat_statements replaces the constants of a text with $n: each row is told apart by what
// only one statement, and one variant, holds.
const statOf = (k: 'batch' | 'handoff', v: Variant) =>
  rows.filter(
    (r) =>
      r.query.includes('LEFT JOIN LATERAL') === (k === 'handoff') &&
      r.query.includes('evora.queues_ensure(') === (v === 'lock') &&
      r.query.includes('pg_advisory_xact_lock_shared') === (v === 'inlineLock'),
  );
console.table(
  (['batch', 'handoff'] as const).flatMap((k) =>
    VARIANTS.map((v) => {
      const stats = statOf(k, v);
      const calls = stats.reduce((n, r) => n + Number(r.calls), 0);
      const mean = calls ? stats.reduce((t, r) => t + Number(r.mean_ms) * Number(r.calls), 0) / calls : null;
      return { statement: k, variant: v, calls, 'exec ms (mean)': mean === null ? null : +mean.toFixed(3) };
    }),
  ),
);
console.table(Object.entries(rates).map(([k, xs]) => ({ 'hand-off submit': k, 'submits/s (median)': Math.round(median(xs)) })));
await pool.end();
await pgh.stop();
await rm(dir, { recursive: true, force: true });

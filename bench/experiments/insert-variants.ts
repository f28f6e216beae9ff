/**
 * Is there a cheaper form of the batch insert (job-insert-many.sql)? Runs batches of 1,000
 * jobs through variants of it as named prepared statements on one connection, interleaved
 * round by round on an embedded PostgreSQL, and prints the median wall ms per batch
 * (driver encode, the statement, its commit) and the statement's own execution time
 * (pg_stat_statements). Measurement only: the store keeps job-insert-many.sql's form
 * unless a variant here pays.
 *   current      the file as it is (jsonb[] payloads and policies, the new-queue CTE)
 *   ids          job-insert-many-ids.sql (returns only the ids)
 *   idsWide      the same, its insert CTE returning whole rows (as job-insert-many.sql's does)
 *   text         payloads as text[], cast to jsonb per row
 *   noQueueCte   without the new-queue CTE (all queues exist)
 *   jsonArray    payloads as one JSON array text (jsonb_array_elements WITH ORDINALITY);
 *                unsafe as a real API (payload_json text could inject elements), measured only
 * Usage: npx tsx bench/experiments/insert-variants.ts [rounds=8]
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { migrate } from '../../src/store/migrate.js';
import { sqlParse } from '../../src/store/statements.js';
import { insertBatchValues, insertPayloads } from './insert-batch.js';

const ROUNDS = Number(process.argv[2] ?? 8);
const SIZE = 1000;
const dir = await mkdtemp(join(tmpdir(), 'evora-insert-variants-'));
const pgh = await embeddedPostgresStart({
  dataDir: dir,
  port: await freePort(),
  postgresFlags: ['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=all'],
});
await migrate(pgh.url);
const db = new pg.Client({ connectionString: pgh.url });
await db.connect();
await db.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
await db.query("INSERT INTO evora.queues (name) VALUES ('enq') ON CONFLICT DO NOTHING");

const file = (name: string) => readFileSync(new URL(`../../src/store/sql/${name}.sql`, import.meta.url), 'utf8');
const current = file('job-insert-many');
const variants: Record<string, string> = {
  current,
  ids: file('job-insert-many-ids'),
  idsWide: file('job-insert-many-ids').replace('  RETURNING id, queue, type, state, attempt, worker_id, created_at, run_at\n', '  RETURNING *\n'),
  text: current.replace(':payloads::jsonb[]', ':payloads::text[]').replace('SELECT i.id, i.queue, i.type, i.payload,', 'SELECT i.id, i.queue, i.type, i.payload::jsonb,'),
  noQueueCte: current
    .replace(/new_queues AS \([\s\S]*?RETURNING name, max_attempts\n\),\n/, '')
    .replace('coalesce(i.max_attempts, q.max_attempts, nq.max_attempts)', 'coalesce(i.max_attempts, q.max_attempts)')
    .replace('  LEFT JOIN new_queues nq ON nq.name = i.queue\n', ''),
  jsonArray: current
    .replace(
      /SELECT \*\n  FROM unnest\(([\s\S]*?)\)\n    AS i\(([\s\S]*?)\)\n\)/,
      `SELECT u.id, u.queue, u.type, p.value AS payload, u.priority, u.run_at, u.idempotency_key, u.max_attempts, u.policy
  FROM unnest(:ids::uuid[], :queues::text[], :types::text[], :priorities::int[],
              :runAts::timestamptz[], :idempotencyKeys::text[], :maxAttempts::int[], :policies::jsonb[])
    WITH ORDINALITY AS u(id, queue, type, priority, run_at, idempotency_key, max_attempts, policy, n)
  JOIN jsonb_array_elements(:payloads::jsonb) WITH ORDINALITY AS p(value, n) ON p.n = u.n
)`,
    ),
};
for (const [name, sql] of Object.entries(variants)) if (name !== 'current' && sql === current) throw new Error(`variant ${name} did not apply`);
if (variants.idsWide === variants.ids) throw new Error('variant idsWide did not apply');

function params(name: string, paramNames: string[]): unknown[] {
  const payloads = insertPayloads(SIZE);
  const values = insertBatchValues(SIZE, name === 'jsonArray' ? `[${payloads.join(',')}]` : payloads);
  return paramNames.map((p) => values[p]);
}

const parsed = Object.fromEntries(Object.entries(variants).map(([name, sql]) => [name, sqlParse(sql, `${name}.sql`)]));
const walls: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((n) => [n, []]));
const run = async (name: string) => {
  const p = parsed[name]!;
  const values = params(name, p.paramNames);
  const t0 = performance.now();
  await db.query({ name: `v_${name}`, text: p.text, values });
  return performance.now() - t0;
};
for (const name of Object.keys(variants)) for (let k = 0; k < 3; k++) await run(name); // prepare, warm up
await db.query('SELECT pg_stat_statements_reset()');
for (let r = 0; r < ROUNDS; r++) for (const name of Object.keys(variants)) walls[name]!.push(await run(name));

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const { rows } = await db.query<{ query: string; calls: string; mean_ms: number }>(
  `SELECT query, calls, mean_exec_time AS mean_ms FROM pg_stat_statements WHERE query LIKE '%INSERT INTO evora.jobs%'`,
);
console.table(
  Object.keys(variants).map((name) => {
    const text = parsed[name]!.text;
    const stat = rows.find((r) => r.query.replace(/\s+/g, ' ').trim() === text.replace(/\s+/g, ' ').trim());
    return {
      variant: name,
      'wall ms / 1000 (median)': +median(walls[name]!).toFixed(2),
      'µs / job': +((median(walls[name]!) * 1000) / SIZE).toFixed(1),
      'exec ms (pg_stat_statements mean)': stat ? +Number(stat.mean_ms).toFixed(2) : null,
    };
  }),
);
await db.end();
await pgh.stop();
await rm(dir, { recursive: true, force: true });

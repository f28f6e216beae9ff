/**
 * Prints the claim statement's plan on a table holding many finished jobs, to show the
 * hot path does not grow with history. Usage: npx tsx scripts/explain-claim.ts [finished] [pending]
 * Starts its own embedded PostgreSQL in a temp folder unless DATABASE_URL is set.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { embeddedPostgresStart, freePort } from '../src/server/embedded-postgres.js';
import { migrate } from '../src/store/migrate.js';
import { Store } from '../src/store/store.js';

const finished = Number(process.argv[2] ?? 1_000_000);
const pending = Number(process.argv[3] ?? 1_000);
/** Jobs to claim (CLAIM=1000 to see a full-size claim). */
const claimSize = Number(process.env.CLAIM ?? 100);
const dir = await mkdtemp(join(tmpdir(), 'evora-explain-'));
const embedded = process.env.DATABASE_URL ? null : await embeddedPostgresStart({ dataDir: dir, port: await freePort() });
const url = process.env.DATABASE_URL ?? embedded!.url;
const pool = new pg.Pool({ connectionString: url });
try {
  await migrate(url);
  await pool.query(`INSERT INTO evora.queues (name) VALUES ('explain') ON CONFLICT DO NOTHING`);
  const client = await pool.connect();
  // Seeding history directly as COMPLETED: replica mode skips the transition trigger.
  await client.query(`SET session_replication_role = replica`);
  await client.query(
    `INSERT INTO evora.jobs (queue, type, state, max_attempts, attempt, lease_token, finished_at, result)
     SELECT 'explain', 'noop', 'COMPLETED', 5, 1, gen_random_uuid(), now(), '{}' FROM generate_series(1, $1)`,
    [finished],
  );
  client.release();
  await pool.query(
    `INSERT INTO evora.jobs (queue, type, max_attempts) SELECT 'explain', 'noop', 5 FROM generate_series(1, $1)`,
    [pending],
  );
  await pool.query('VACUUM ANALYZE evora.jobs');
  const store = new Store({ connectionString: url });
  // Show the plan of exactly the statement the store runs, inside a rolled-back transaction.
  const claim = (await import('../src/store/catalog.js')).statementNamed('jobClaim');
  const c = await pool.connect();
  let rows: Record<string, string>[];
  try {
    await c.query('BEGIN');
    // One worker: the distinct worker ids, and slot i's index into them ($3, $5).
    const workerIds = ['explain-worker'];
    const slotWorkers = Array.from({ length: claimSize }, () => 1);
    const args: Record<string, unknown> = { queues: ['explain'], limit: claimSize, workerIds, now: null, slotWorkers };
    ({ rows } = await c.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${claim.text}`, claim.paramNames.map((p) => args[p])));
    await c.query('ROLLBACK');
  } finally {
    c.release();
  }
  console.log(`claim of ${claimSize} with ${finished} COMPLETED and ${pending} PENDING rows:`);
  for (const r of rows) console.log(r['QUERY PLAN']);
  await store.close();
} finally {
  await pool.end();
  await embedded?.stop();
  await rm(dir, { recursive: true, force: true });
}

/**
 * What a completion costs PostgreSQL, against cheaper statements that do less: the store's
 * jobCompleteMany, the same UPDATE without its outbox event, a bare state change, an update
 * of one unindexed column (HOT when the page has room), and a DELETE (what graphile-worker
 * does), and a DELETE that moves the row into a table of finished jobs. Each variant completes 20 × 1,000 freshly claimed jobs after a CHECKPOINT; only the
 * completion statements are timed, by wall time and by the CPU time of the one PostgreSQL
 * backend that runs them (from /proc, the steadier of the two on a busy machine); three
 * rounds, interleaved. Measurement only: the other
 * statements here are not Evora's. docs/benchmarks.md quotes it.
 * Usage: npx tsx scripts/completion-variants.ts [variants=full,noevents,minimal,unindexed,delete,move]
 * (FILLFACTOR=50 sets the jobs table's fillfactor first). Starts its own durable embedded
 * PostgreSQL in a temp folder.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { embeddedPostgresStart, freePort } from '../src/server/embedded-postgres.js';
import { migrate } from '../src/store/migrate.js';
import { Store } from '../src/store/store.js';
import { processCpuUs } from '../bench/lib/cpu.js';

/** The completion's input (one report per lease) and its lease check, as the store writes them. */
const LEASED_INPUT = `WITH input AS (SELECT DISTINCT ON (id, token) * FROM unnest($1::uuid[], $2::uuid[], $3::jsonb[]) AS c(id, token, result))`;
const LEASE_HELD = `j.id = c.id AND j.lease_token = c.token AND (CASE WHEN j.state = 'RUNNING' THEN true END)`;
/** What the completion reads back, from the written table aliased `j`. */
const READ_BACK = `RETURNING j.id, j.lease_token, j.queue, j.type, j.state, j.attempt, j.worker_id, j.last_error`;

/** Statements over $1 = job ids, $2 = lease tokens, $3 = results (null: the store's own). */
const VARIANTS: Record<string, string | null> = {
  full: null,
  noevents: `
    ${LEASED_INPUT}
    UPDATE evora.jobs j SET state = 'COMPLETED', result = c.result, locked_until = NULL, finished_at = now()
    FROM input c WHERE ${LEASE_HELD}
    ${READ_BACK}`,
  minimal: `UPDATE evora.jobs j SET state = 'COMPLETED', finished_at = now() FROM unnest($1::uuid[]) AS c(id) WHERE j.id = c.id`,
  unindexed: `UPDATE evora.jobs j SET finished_at = now() FROM unnest($1::uuid[]) AS c(id) WHERE j.id = c.id`,
  delete: `DELETE FROM evora.jobs j USING unnest($1::uuid[]) AS c(id) WHERE j.id = c.id`,
  // Finished jobs kept in a table of their own (primary key only): what moving them out of
  // the hot table would cost instead of an UPDATE. Shaped like `noevents` (lease check,
  // result, the same columns read back), so the two compare like for like.
  move: `
    ${LEASED_INPUT},
    moved AS (
      DELETE FROM evora.jobs j USING input c
      WHERE ${LEASE_HELD}
      RETURNING j.*, c.result AS new_result
    )
    INSERT INTO finished_jobs AS j (id, queue, type, payload, state, priority, run_at, attempt, max_attempts, lease_token,
                                    worker_id, idempotency_key, result, last_error, created_at, started_at, finished_at)
    SELECT id, queue, type, payload, 'COMPLETED', priority, run_at, attempt, max_attempts, lease_token,
           worker_id, idempotency_key, new_result, last_error, created_at, started_at, now()
    FROM moved
    ${READ_BACK}`,
};
const BATCHES = 20;
const BATCH = 1000;

const order = (process.argv[2] ?? Object.keys(VARIANTS).join(',')).split(',');
for (const v of order) if (!(v in VARIANTS)) throw new Error(`unknown variant "${v}" (one of ${Object.keys(VARIANTS).join(', ')})`);

const dir = await mkdtemp(join(tmpdir(), 'evora-completion-'));
const pgh = await embeddedPostgresStart({ dataDir: dir, port: await freePort() });
// One connection: every statement runs in the backend whose CPU time is read.
const store = new Store({ connectionString: pgh.url, maxConnections: 1 });
try {
  await migrate(store.pool);
  await store.pool.query('CREATE TABLE finished_jobs (LIKE evora.jobs INCLUDING DEFAULTS, PRIMARY KEY (id))');
  if (process.env.FILLFACTOR) await store.pool.query(`ALTER TABLE evora.jobs SET (fillfactor = ${Number(process.env.FILLFACTOR)})`);
  const backend = (await store.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  const usPerJob: Record<string, number[]> = {};
  const cpuUsPerJob: Record<string, number[]> = {};
  for (let round = 0; round < 3; round++) {
    for (const v of order) {
      for (let i = 0; i < BATCHES; i++) {
        await store.jobSubmitMany({ jobs: Array.from({ length: BATCH }, () => ({ queue: 'q', type: 'noop', payload: { a: 1, b: 'x' } })) });
      }
      await store.pool.query('ANALYZE evora.jobs');
      await store.pool.query('CHECKPOINT');
      let ms = 0;
      let cpuUs = 0;
      for (let i = 0; i < BATCHES; i++) {
        const jobs = await store.jobClaim({ queues: ['q'], limit: BATCH, workerId: 'w' });
        const cpuStarted = processCpuUs([{ pid: backend, children: false }]);
        const started = performance.now();
        const sql = VARIANTS[v] ?? null;
        if (sql === null) await store.jobCompleteMany({ completions: jobs.map((j) => ({ id: j.id, token: j.leaseToken!, result: null })) });
        else await store.pool.query(sql, sql.includes('$3') ? [jobs.map((j) => j.id), jobs.map((j) => j.leaseToken), jobs.map(() => null)] : [jobs.map((j) => j.id)]);
        ms += performance.now() - started;
        cpuUs += processCpuUs([{ pid: backend, children: false }]) - cpuStarted;
      }
      (usPerJob[v] ??= []).push(Math.round((ms * 10_000) / (BATCHES * BATCH)) / 10);
      (cpuUsPerJob[v] ??= []).push(Math.round((cpuUs * 10) / (BATCHES * BATCH)) / 10);
    }
  }
  for (const v of order) {
    console.log(`${v.padEnd(10)} ${usPerJob[v]!.join(' / ')} µs per job; PostgreSQL CPU ${cpuUsPerJob[v]!.join(' / ')} µs per job`);
  }
} finally {
  await store.close();
  await pgh.stop();
  await rm(dir, { recursive: true, force: true });
}

/**
 * What a completion costs PostgreSQL, against cheaper statements that do less: Evora's
 * completion (`full`), the same UPDATE without its outbox event, a bare state change, an
 * update of one unindexed column (HOT when the page has room), a DELETE (what
 * graphile-worker does), and a DELETE that moves the row into a table of finished jobs.
 * Each variant completes BATCHES × 1,000 freshly claimed jobs after a CHECKPOINT; only the
 * completion statements are timed, by wall time and by the CPU time of the one PostgreSQL
 * backend that runs them (from /proc, the steadier of the two on a busy machine); ROUNDS
 * rounds, interleaved. Measurement only: the statements are in
 * bench/experiments/completion-variants/*.sql, one per file; `full.sql` is a copy of the
 * store's completion and must be kept in step with it; the submit and the claim there are
 * not Evora's (they only make jobs to complete). docs/benchmarks.md quotes the results.
 *
 * Usage: npx tsx bench/experiments/completion-variants.ts [variants=full,noevents,minimal,unindexed,delete,move]
 * Environment: FILLFACTOR=50 sets the jobs table's fillfactor first; DROP_INDEXES=a,b drops
 * those indexes of the migrated schema first (what an index costs); ROUNDS (default 3) and
 * BATCHES (default 20) set the size. Starts its own durable embedded PostgreSQL in a temp
 * folder, creates Evora's schema with `evora migrate`, and talks to it over one connection
 * of its own: the store is not used, so the experiment does not depend on its internals.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { processCpuUs } from '../lib/cpu.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const sql = (name: string) => readFileSync(new URL(`./completion-variants/${name}.sql`, import.meta.url), 'utf8');

const VARIANTS = ['full', 'noevents', 'minimal', 'unindexed', 'delete', 'move'] as const;
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const BATCHES = Number(process.env.BATCHES ?? 20);
const BATCH = 1000;
const QUEUE = 'q';

const order = (process.argv[2] ?? VARIANTS.join(',')).split(',');
for (const v of order) if (!(VARIANTS as readonly string[]).includes(v)) throw new Error(`unknown variant "${v}" (one of ${VARIANTS.join(', ')})`);

/** The highest `$n` a statement uses: which of ids, tokens, results and now it takes. */
const paramCount = (text: string) => Math.max(0, ...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));

const dir = await mkdtemp(join(tmpdir(), 'evora-completion-'));
const pgh = await embeddedPostgresStart({ dataDir: dir, port: await freePort() });
// One connection (not a pool that may replace it): every statement runs in the backend
// whose CPU time is read.
const db = new pg.Client({ connectionString: pgh.url });
try {
  execFileSync(process.execPath, ['--import', 'tsx', join(ROOT, 'src/cli/main.ts'), 'migrate', '--database-url', pgh.url], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  await db.connect();
  await db.query(sql('setup'));
  if (process.env.FILLFACTOR) await db.query(`ALTER TABLE evora.jobs SET (fillfactor = ${Number(process.env.FILLFACTOR)})`);
  // What an index costs the completion: DROP_INDEXES=jobs_finished_idx measures without it.
  for (const index of (process.env.DROP_INDEXES ?? '').split(',').filter(Boolean)) {
    await db.query(`DROP INDEX evora.${pg.escapeIdentifier(index)}`);
  }
  const backend = (await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  const submit = sql('submit');
  const claim = sql('claim');
  const statements = Object.fromEntries(order.map((v) => [v, sql(v)]));
  const usPerJob: Record<string, number[]> = {};
  const cpuUsPerJob: Record<string, number[]> = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const v of order) {
      for (let i = 0; i < BATCHES; i++) await db.query({ name: 'submit', text: submit, values: [QUEUE, BATCH] });
      await db.query('ANALYZE evora.jobs');
      await db.query('CHECKPOINT');
      const text = statements[v]!;
      const params = paramCount(text);
      let ms = 0;
      let cpuUs = 0;
      for (let i = 0; i < BATCHES; i++) {
        const { rows: jobs } = await db.query<{ id: string; lease_token: string }>({ name: 'claim', text: claim, values: [QUEUE, BATCH, 'w'] });
        const values = [jobs.map((j) => j.id), jobs.map((j) => j.lease_token), jobs.map(() => null), null].slice(0, params);
        const cpuStarted = processCpuUs([{ pid: backend, children: false }]);
        const started = performance.now();
        // Named, so planned once per connection: as the store runs its hot statements.
        const done = await db.query({ name: `complete_${v}`, text, values });
        ms += performance.now() - started;
        cpuUs += processCpuUs([{ pid: backend, children: false }]) - cpuStarted;
        // A variant that changed fewer rows than it was given measured something else.
        if (done.rowCount !== jobs.length) throw new Error(`${v}: ${done.rowCount} of ${jobs.length} jobs completed`);
      }
      (usPerJob[v] ??= []).push(Math.round((ms * 10_000) / (BATCHES * BATCH)) / 10);
      (cpuUsPerJob[v] ??= []).push(Math.round((cpuUs * 10) / (BATCHES * BATCH)) / 10);
    }
  }
  for (const v of order) {
    console.log(`${v.padEnd(10)} ${usPerJob[v]!.join(' / ')} µs per job; PostgreSQL CPU ${cpuUsPerJob[v]!.join(' / ')} µs per job`);
  }
} finally {
  await db.end().catch(() => undefined);
  await pgh.stop();
  await rm(dir, { recursive: true, force: true });
}

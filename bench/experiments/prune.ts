/**
 * What retention costs: on N finished jobs past their retention (COMPLETED, finished 8 days
 * ago, one queue), how long migration 0003's `jobs_finished_idx` takes to build (the time the
 * upgrade blocks writes to evora.jobs), then the real pruner (src/maintenance/pruner.ts, the
 * store's jobPrune) deleting them all: jobs/s, and each batch's duration, which is how long
 * its locks are held. Meanwhile a claim + complete loop of 100 jobs runs on another
 * connection, timed per round: what the queue feels while the pruner works. Measurement only;
 * docs/store.md quotes the results.
 *
 * Usage: npx tsx bench/experiments/prune.ts [finished=1000000] [batchSize=1000]
 * Starts its own durable embedded PostgreSQL in a temp folder.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { silentLogger } from '../../src/logger.js';
import { Pruner } from '../../src/maintenance/pruner.js';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { migrate } from '../../src/store/migrate.js';
import { Store } from '../../src/store/store.js';

const FINISHED = Number(process.argv[2] ?? 1_000_000);
const BATCH = Number(process.argv[3] ?? 1000);
const QUEUE = 'prune';

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
const ms = (v: number) => `${v.toFixed(1)} ms`;

const dir = await mkdtemp(join(tmpdir(), 'evora-prune-'));
const pgh = await embeddedPostgresStart({ dataDir: dir, port: await freePort() });
const db = new pg.Client({ connectionString: pgh.url });
let store: Store | null = null;
try {
  await migrate(pgh.url);
  await db.connect();
  store = new Store({ connectionString: pgh.url, maxConnections: 4 });
  await store.queueUpsert({ name: QUEUE, leaseSeconds: 3600 });
  // The history, as the server leaves it, without the index: the migration builds it over existing rows.
  await db.query('DROP INDEX evora.jobs_finished_idx');
  let t = performance.now();
  await db.query('SET session_replication_role = replica');
  await db.query(
    `INSERT INTO evora.jobs (queue, type, state, max_attempts, attempt, lease_token, worker_id, created_at, started_at, finished_at, result)
     SELECT $1, 'noop', 'COMPLETED', 5, 1, gen_random_uuid(), 'seed', now() - interval '8 days', now() - interval '8 days',
            now() - interval '8 days' + g * interval '1 millisecond', '{}'
     FROM generate_series(1, $2) g`,
    [QUEUE, FINISHED],
  );
  await db.query('RESET session_replication_role');
  console.log(`seeded ${FINISHED.toLocaleString('en-US')} COMPLETED jobs in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  await db.query('VACUUM ANALYZE evora.jobs');
  await db.query('CHECKPOINT');
  t = performance.now();
  await db.query(`CREATE INDEX jobs_finished_idx ON evora.jobs (queue, state, finished_at) WHERE state IN ('COMPLETED', 'CANCELLED', 'DLQ')`);
  console.log(`CREATE INDEX jobs_finished_idx (migration 0003 on this history): ${((performance.now() - t) / 1000).toFixed(1)} s`);
  await db.query('ANALYZE evora.jobs');
  await db.query('CHECKPOINT');

  // The queue at work: submit, claim and complete 100 jobs per round; first alone, then while the pruner works.
  const round = async (into: number[]) => {
    const started = performance.now();
    await store!.jobSubmitMany({ jobs: Array.from({ length: 100 }, () => ({ queue: 'work', type: 'noop', payload: {} })) });
    const jobs = await store!.jobClaim({ queues: ['work'], limit: 100, workerId: 'w' });
    await store!.jobCompleteMany({ completions: jobs.map((j) => ({ id: j.id, token: j.leaseToken! })) });
    into.push(performance.now() - started);
  };
  const alone: number[] = [];
  for (let i = 0; i < 100; i++) await round(alone);
  alone.sort((a, b) => a - b);
  let pruning = true;
  const rounds: number[] = [];
  const queueLoop = (async () => {
    while (pruning) await round(rounds);
  })();

  const batches: number[] = [];
  let last = performance.now();
  const pruner = new Pruner({
    store,
    logger: silentLogger(),
    batchSize: BATCH,
    onPruned: () => {
      const now = performance.now();
      batches.push(now - last);
      last = now;
    },
  });
  t = performance.now();
  last = t;
  const run = await pruner.runOnce(new AbortController().signal);
  const seconds = (performance.now() - t) / 1000;
  pruning = false;
  await queueLoop;
  batches.sort((a, b) => a - b);
  rounds.sort((a, b) => a - b);
  console.log(
    `pruned ${run.pruned.toLocaleString('en-US')} jobs in ${run.batches} batches of ${BATCH} in ${seconds.toFixed(1)} s ` +
      `(${Math.round(run.pruned / seconds).toLocaleString('en-US')} jobs/s); per batch (pause included): ` +
      `p50 ${ms(pct(batches, 0.5))}, p99 ${ms(pct(batches, 0.99))}, max ${ms(batches.at(-1) ?? 0)}`,
  );
  console.log(
    `meanwhile ${rounds.length} rounds of submit + claim + complete 100 jobs: p50 ${ms(pct(rounds, 0.5))}, ` +
      `p99 ${ms(pct(rounds, 0.99))}, max ${ms(rounds.at(-1) ?? 0)}; before, without the pruner (100 rounds): ` +
      `p50 ${ms(pct(alone, 0.5))}, p99 ${ms(pct(alone, 0.99))}, max ${ms(alone.at(-1) ?? 0)}`,
  );
  const left = (await db.query<{ n: string }>(`SELECT count(*) AS n FROM evora.jobs WHERE queue = $1`, [QUEUE])).rows[0]!.n;
  if (Number(left) !== 0) throw new Error(`${left} jobs left`);
} finally {
  await store?.close();
  await db.end().catch(() => undefined);
  await pgh.stop();
  await rm(dir, { recursive: true, force: true });
}

/**
 * What running the store's statements unnamed costs (EVORA_DB_POOLER: behind pgbouncer in
 * transaction mode every statement is parsed and planned at each call instead of once per
 * connection): the time of a claim and of a completion of LIMIT jobs through three stores of
 * one connection each, interleaved round by round: straight to PostgreSQL with named
 * prepared statements (the default), straight to PostgreSQL unnamed, and unnamed through a
 * pgbouncer 1.x in transaction mode (skipped when pgbouncer is not installed). Each round
 * submits LIMIT jobs (untimed), claims them, completes them. docs/store.md ("Behind
 * pgbouncer") quotes the medians.
 *
 * Usage: npx tsx bench/experiments/unnamed-statements.ts [rounds=2000] [limits=1,10]
 * Starts its own embedded PostgreSQL in a temp folder (fsync off: the statements' planning
 * and execution are measured, not the WAL flush) and, if installed, a pgbouncer in front of
 * it (test/helpers/pgbouncer.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { migrate } from '../../src/store/migrate.js';
import { Store } from '../../src/store/store.js';
import { findPgbouncer, pgbouncerStart, type Pgbouncer } from '../../test/helpers/pgbouncer.js';

const ROUNDS = Number(process.argv[2] ?? 2000);
const LIMITS = (process.argv[3] ?? '1,10').split(',').map(Number);
const WARMUP = 100;

const dir = await mkdtemp(join(tmpdir(), 'evora-unnamed-'));
const pgh = await embeddedPostgresStart({ dataDir: dir, port: await freePort(), postgresFlags: ['-c', 'fsync=off'] });
let bouncer: Pgbouncer | null = null;
const stores: [string, Store][] = [];
try {
  await migrate(pgh.url);
  stores.push(['direct, named', new Store({ connectionString: pgh.url, maxConnections: 1 })]);
  stores.push(['direct, unnamed', new Store({ connectionString: pgh.url, maxConnections: 1, pooled: true })]);
  const tool = findPgbouncer();
  if (tool.ok) {
    bouncer = await pgbouncerStart({ path: tool.path, upstreamUrl: pgh.url, defaultPoolSize: 3 });
    stores.push(['pgbouncer, unnamed', new Store({ connectionString: bouncer.through(pgh.url), maxConnections: 1, pooled: true })]);
  } else console.log(`pgbouncer skipped: ${tool.reason}`);

  const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
  for (const limit of LIMITS) {
    const queue = `q${limit}`;
    const times = new Map(stores.map(([name]) => [name, { claim: [] as number[], complete: [] as number[] }]));
    for (let round = 0; round < WARMUP + ROUNDS; round++) {
      for (const [name, store] of stores) {
        await store.jobSubmitMany({ jobs: Array.from({ length: limit }, () => ({ queue, type: 't', payload: {} })) });
        let t0 = process.hrtime.bigint();
        const jobs = await store.jobClaim({ queues: [queue], limit, workerId: 'w' });
        const claimMs = Number(process.hrtime.bigint() - t0) / 1e6;
        t0 = process.hrtime.bigint();
        await store.jobCompleteMany({ completions: jobs.map((j) => ({ id: j.id, token: j.leaseToken!, result: null })) });
        const completeMs = Number(process.hrtime.bigint() - t0) / 1e6;
        if (jobs.length !== limit) throw new Error(`claimed ${jobs.length} of ${limit}`);
        if (round < WARMUP) continue;
        times.get(name)!.claim.push(claimMs);
        times.get(name)!.complete.push(completeMs);
      }
    }
    for (const [name, t] of times) {
      console.log(`${limit} job(s), ${name}: claim median ${median(t.claim).toFixed(3)} ms, complete median ${median(t.complete).toFixed(3)} ms`);
    }
  }
} finally {
  await Promise.all(stores.map(([, s]) => s.close()));
  await bouncer?.stop();
  await pgh.stop();
  await rm(dir, { recursive: true, force: true });
}

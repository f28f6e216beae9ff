/**
 * Where does a burn-down spend its time? Runs N no-op jobs through a server (in this
 * process) and one raw-stream worker process, on an embedded PostgreSQL with
 * pg_stat_statements, then prints jobs/s and the statements by total time.
 * Usage: npx tsx bench/experiments/profile-hotpath.ts [N=20000] [slots=200]
 * (add `node --cpu-prof --import tsx` to profile the server's JavaScript too)
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { configLoad } from '../../src/server/config.js';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { silentLogger } from '../../src/logger.js';
import { serverStart } from '../../src/server/server.js';
import { JobServiceClient } from '../../src/gen/evora/v1/job.js';
import * as grpc from '@grpc/grpc-js';

const N = Number(process.argv[2] ?? 20_000);
const SLOTS = Number(process.argv[3] ?? 200);
const dir = await mkdtemp(join(tmpdir(), 'evora-profile-'));
const pgh = await embeddedPostgresStart({
  dataDir: dir,
  port: await freePort(),
  postgresFlags: ['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=all'],
});
const server = await serverStart(configLoad({ databaseUrl: pgh.url, port: '0', httpPort: '0', ...(process.env.PROFILE_NO_PROJECTOR ? { projectIntervalMs: '3600000' } : {}) }, {}), silentLogger());
const admin = new pg.Client({ connectionString: pgh.url });
await admin.connect();
await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
const jobs = new JobServiceClient(server.address, grpc.credentials.createInsecure());
const submit = (req: Parameters<JobServiceClient['submitJobs']>[0]) =>
  new Promise<void>((resolve, reject) => jobs.submitJobs(req, (err) => (err ? reject(err) : resolve())));
for (let i = 0; i < N; i += 1000) {
  await submit({ idsOnly: false, jobs: Array.from({ length: Math.min(1000, N - i) }, () => ({ queue: 'burn', type: 'noop', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) })) });
}
await admin.query('SELECT pg_stat_statements_reset()');
const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./noop-worker.ts', import.meta.url)), server.address, 'burn', String(SLOTS)], { stdio: ['ignore', 'pipe', 'inherit'] });
const t0 = performance.now();
let acks = 0;
await new Promise<void>((resolve) => {
  createInterface({ input: child.stdout }).on('line', (line) => {
    const m = JSON.parse(line) as { acks?: number };
    if (m.acks !== undefined) acks = m.acks;
    if (acks >= N) resolve();
  });
});
const seconds = (performance.now() - t0) / 1000;
console.log(JSON.stringify({ jobs: N, slots: SLOTS, seconds: +seconds.toFixed(2), jobsPerSecond: Math.round(N / seconds) }));
child.kill('SIGTERM');
const { rows } = await admin.query(
  `SELECT calls, round(total_exec_time)::int AS total_ms, round(mean_exec_time::numeric, 3) AS mean_ms, rows,
          left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS query
   FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 12`,
);
console.table(rows);
await admin.end();
jobs.close();
await server.stop();
await pgh.stop();
await rm(dir, { recursive: true, force: true });

/**
 * Measures the dispatcher end to end over real gRPC and a durable embedded PostgreSQL:
 *  - burn-down: N no-op jobs submitted in batches, then one worker process (S slots)
 *    drains them; jobs/s from the first push to the last committed ack;
 *  - push latency: an idle worker, R single submits per second for D seconds; submit to
 *    receipt p50/p95/p99 (payload carries the submit time).
 * Usage: npx tsx bench/experiments/dispatcher.ts [N=20000] [S=200]
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { configLoad } from '../../src/server/config.js';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { silentLogger } from '../../src/logger.js';
import { serverStart } from '../../src/server/server.js';
import { JobServiceClient } from '../../src/gen/evora/v1/job.js';

const N = Number(process.argv[2] ?? 20_000);
const SLOTS = Number(process.argv[3] ?? 200);
const dir = await mkdtemp(join(tmpdir(), 'evora-bench-'));
const pgh = process.env.DATABASE_URL ? null : await embeddedPostgresStart({ dataDir: dir, port: await freePort(), postgresFlags: process.env.BENCH_PG_FLAGS ? process.env.BENCH_PG_FLAGS.split(' ') : [] });
const server = await serverStart(configLoad({ databaseUrl: process.env.DATABASE_URL ?? pgh!.url, port: '0', httpPort: '0' }, {}), silentLogger());
const jobs = new JobServiceClient(server.address, grpc.credentials.createInsecure());
const submitJobs = (req: Parameters<JobServiceClient['submitJobs']>[0]) =>
  new Promise<void>((resolve, reject) => jobs.submitJobs(req, (err) => (err ? reject(err) : resolve())));
const submitJob = (req: Parameters<JobServiceClient['submitJob']>[0]) =>
  new Promise<void>((resolve, reject) => jobs.submitJob(req, (err) => (err ? reject(err) : resolve())));

function startWorker(queue: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./noop-worker.ts', import.meta.url)), server.address, queue, String(SLOTS)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const state = { ready: false, acks: 0, latencies: [] as number[], firstAt: 0 };
  createInterface({ input: child.stdout }).on('line', (line) => {
    const m = JSON.parse(line) as { ready?: boolean; acks?: number; latencies?: number[] };
    if (m.ready) state.ready = true;
    if (m.acks !== undefined) {
      if (m.acks > 0 && !state.firstAt) state.firstAt = performance.now();
      state.acks = m.acks;
      state.latencies.push(...(m.latencies ?? []));
    }
  });
  return { child, state };
}
const until = async (f: () => boolean) => {
  while (!f()) await new Promise((r) => setTimeout(r, 5));
};
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

// Burn-down.
const q1 = 'burn';
for (let i = 0; i < N; i += 1000) {
  await submitJobs({ idsOnly: false,
    jobs: Array.from({ length: Math.min(1000, N - i) }, () => ({ queue: q1, type: 'noop', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) })),
  });
}
const w1 = startWorker(q1);
const t0 = performance.now();
await until(() => w1.state.acks >= N);
const seconds = (performance.now() - t0) / 1000;
console.log(JSON.stringify({ scenario: 'burn-down', jobs: N, slots: SLOTS, seconds: +seconds.toFixed(2), jobsPerSecond: Math.round(N / seconds) }));
w1.child.kill('SIGTERM');

// Push latency with an idle worker.
const q2 = 'latency';
const w2 = startWorker(q2);
await until(() => w2.state.ready);
const rate = 100;
const total = 500;
for (let i = 0; i < total; i++) {
  await submitJob({ queue: q2, type: 'noop', payload: { t: Date.now() }, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
  await new Promise((r) => setTimeout(r, 1000 / rate));
}
await until(() => w2.state.acks >= total);
const l = w2.state.latencies;
console.log(JSON.stringify({ scenario: 'push-latency', submits: total, perSecond: rate, p50ms: pct(l, 50), p95ms: pct(l, 95), p99ms: pct(l, 99) }));
w2.child.kill('SIGTERM');

jobs.close();
await server.stop();
await pgh?.stop();
await rm(dir, { recursive: true, force: true });

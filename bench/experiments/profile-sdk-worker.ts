/**
 * Per-job CPU cost of the Work stream with the SDK's EvoraWorker: runs N no-op jobs through
 * a server (in this process) and one EvoraWorker process, on an embedded PostgreSQL, and
 * prints jobs/s and the CPU time each process (and PostgreSQL's) spent per job during the burn-down.
 * (bench/experiments/profile-hotpath.ts does the same with a raw-stream worker and shows the SQL.)
 * Usage: npx tsx bench/experiments/profile-sdk-worker.ts [N=20000] [slots=1000] [payloadKeys=4]
 * (the worker process is this file with `--worker <address> <queue> <slots>`; PROFILE_DIR=dir
 * writes the worker's V8 CPU profile there; SERVER_PROFILE=file.cpuprofile writes the
 * server's, of the burn-down only)
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { configLoad } from '../../src/server/config.js';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { JobServiceClient } from '../../src/gen/evora/v1/job.js';
import { silentLogger } from '../../src/logger.js';
import { EvoraWorker } from '../../src/sdk/index.js';
import { serverStart } from '../../src/server/server.js';
import { childCpuByPid, postmasterPid, processCpuUs } from '../lib/cpu.js';

/** CPU time (µs) of the PostgreSQL server in `dataDir` so far: the postmaster and its children. */
function postgresCpuUs(dataDir: string): number {
  const pid = postmasterPid(dataDir);
  return pid === null ? 0 : processCpuUs([{ pid, children: true }]);
}

interface Progress {
  ready?: boolean;
  done?: number;
  cpuUs?: number;
}

if (process.argv[2] === '--worker') {
  const [address = '127.0.0.1:50051', queue = 'burn', slots = '1000'] = process.argv.slice(3);
  const worker = new EvoraWorker({ address, queues: [queue], slots: Number(slots), workerId: `sdk-burn-${process.pid}` });
  let done = 0;
  worker.handle('noop', () => undefined);
  worker.on('jobFinished', (o) => {
    if (o.accepted && o.outcome === 'completed') done++;
  });
  const line = (p: Progress) => process.stdout.write(JSON.stringify(p) + '\n');
  setInterval(() => {
    const c = process.cpuUsage();
    line({ done, cpuUs: c.user + c.system });
  }, 50);
  let allocSession: Session | null = null;
  if (process.env.ALLOC_PROF) {
    allocSession = new Session();
    allocSession.connect();
    await allocSession.post('HeapProfiler.startSampling', { samplingInterval: 512, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true } as never);
  }
  process.on('SIGTERM', async () => {
    if (allocSession) {
      const { profile } = (await allocSession.post('HeapProfiler.stopSampling')) as { profile: unknown };
      await writeFile(process.env.ALLOC_PROF!, JSON.stringify(profile));
    }
    process.exit(0);
  });
  await worker.start({ timeoutMs: 30_000 });
  const c = process.cpuUsage();
  line({ ready: true, done, cpuUs: c.user + c.system });
} else {
  const N = Number(process.argv[2] ?? 20_000);
  const SLOTS = Number(process.argv[3] ?? 1000);
  const KEYS = Number(process.argv[4] ?? 4);
  const payload = Object.fromEntries(Array.from({ length: KEYS }, (_, i) => [`k${i}`, i % 2 ? `value-${i}` : i]));
  const dir = await mkdtemp(join(tmpdir(), 'evora-sdk-profile-'));
  const pgh = await embeddedPostgresStart({ dataDir: dir, port: await freePort() });
  const server = await serverStart(configLoad({ databaseUrl: pgh.url, port: '0', httpPort: '0' }, {}), silentLogger());
  const jobs = new JobServiceClient(server.address, grpc.credentials.createInsecure());
  const submit = (req: Parameters<JobServiceClient['submitJobs']>[0]) =>
    new Promise<void>((resolve, reject) => jobs.submitJobs(req, (err) => (err ? reject(err) : resolve())));
  for (let i = 0; i < N; i += 1000) {
    await submit({ idsOnly: false,
      jobs: Array.from({ length: Math.min(1000, N - i) }, () => ({
        queue: 'burn', type: 'noop', payload, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0),
      })),
    });
  }
  const admin = new pg.Client({ connectionString: pgh.url });
  await admin.connect();
  if (process.env.DELETE_ON_COMPLETE) await admin.query(`UPDATE evora.queues SET delete_on_complete = true WHERE name = 'burn'`);
  await admin.query('ANALYZE');
  await admin.query('CHECKPOINT');
  await admin.end();

  const self = fileURLToPath(import.meta.url);
  const prof = process.env.PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.PROFILE_DIR}`] : [];
  const child = spawn(process.execPath, [...prof, '--import', 'tsx', self, '--worker', server.address, 'burn', String(SLOTS)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const inspector = process.env.SERVER_PROFILE ? new Session() : null;
  if (inspector) {
    inspector.connect();
    await inspector.post('Profiler.enable');
  }
  let t0 = 0;
  let cpu0 = process.cpuUsage();
  let pgCpu0 = 0;
  let pgChildren0 = new Map<number, { title: string; us: number }>();
  let childCpu0 = 0;
  let childCpu = 0;
  let done = 0;
  await new Promise<void>((resolve) => {
    createInterface({ input: child.stdout }).on('line', (text) => {
      const m = JSON.parse(text) as Progress;
      if (m.cpuUs !== undefined) childCpu = m.cpuUs;
      if (m.ready && t0 === 0) {
        // The worker's start-up (tsx, imports) is not part of the burn-down.
        t0 = performance.now();
        cpu0 = process.cpuUsage();
        pgCpu0 = postgresCpuUs(dir);
        pgChildren0 = childCpuByPid(postmasterPid(dir) ?? 0);
        childCpu0 = childCpu;
        void inspector?.post('Profiler.start');
      }
      if (m.done !== undefined) done = m.done;
      if (t0 && done >= N) resolve();
    });
  });
  const seconds = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(cpu0);
  const pgCpu = postgresCpuUs(dir) - pgCpu0;
  if (process.env.PG_BREAKDOWN) {
    // Which of PostgreSQL's processes the burn-down's time went to, µs per job.
    for (const [pid, { title, us }] of childCpuByPid(postmasterPid(dir) ?? 0)) {
      const spent = us - (pgChildren0.get(pid)?.us ?? 0);
      if (spent > 0) console.error(`${(spent / N).toFixed(2).padStart(7)} µs/job  ${pid} ${title}`);
    }
  }
  if (inspector) {
    const { profile } = await inspector.post('Profiler.stop');
    await writeFile(process.env.SERVER_PROFILE!, JSON.stringify(profile));
    inspector.disconnect();
  }
  console.log(
    JSON.stringify({
      jobs: N,
      slots: SLOTS,
      payloadKeys: KEYS,
      seconds: +seconds.toFixed(2),
      jobsPerSecond: Math.round(N / seconds),
      serverCpuUsPerJob: Math.round((c.user + c.system) / N),
      workerCpuUsPerJob: Math.round((childCpu - childCpu0) / N),
      postgresCpuUsPerJob: Math.round(pgCpu / N),
    }),
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
  jobs.close();
  await server.stop();
  await pgh.stop();
  await rm(dir, { recursive: true, force: true });
}

/**
 * Throughput and start-time fairness of a queue with `max_concurrency_per_key` (issue 16),
 * against the same load on a queue without the per-key limit. Each run has its own embedded
 * PostgreSQL in a temp folder, a server in this process and raw Work-stream worker processes
 * (fairness-worker.ts) that hold each job `holdMs` and report every start's key and time.
 * The backlog is submitted (SubmitJobs, batches of 1,000) before the workers connect.
 *
 * Variants, interleaved round by round:
 *  - skewed-perkey: key k0 with `big` jobs submitted first, then `smallKeys` keys with
 *    `small` jobs each (key after key), on a queue with max_concurrency_per_key = `perKey`;
 *  - skewed-fifo: the same load on a queue without the per-key limit (plain FIFO);
 *  - uniform-perkey / uniform-unlimited: 1 + `smallKeys` keys with `uniform` jobs each,
 *    submitted interleaved (job i has key i mod keys), with and without the per-key limit.
 *
 * Measures (t0 = the run's first start): jobs/s from t0 to the last completion's ack; for the
 * small keys, the time from t0 to each key's first and last start; the position, in global
 * start order, of each small key's last start and how many of k0's jobs had started by then;
 * the top statements by PostgreSQL time while the workers ran (pg_stat_statements); and
 * Jain's fairness index J = (Σx)² / (n·Σx²) of x_i = starts of key i (all n keys, k0 included)
 * from t0 to the last small-key start: 1 = every key started equally often while the small
 * keys were active, 1/n = one key took them all.
 *
 * Usage: npx tsx bench/experiments/fairness.ts [big=5000] [small=50] [smallKeys=99]
 *   [perKey=2] [slots=200] [workers=1] [holdMs=2] [uniform=100] [rounds=3] [top=4]
 *   [variants=skewed-perkey,skewed-fifo,uniform-perkey,uniform-unlimited]
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { configLoad } from '../../src/server/config.js';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { silentLogger } from '../../src/logger.js';
import { serverStart } from '../../src/server/server.js';
import { JobServiceClient, type SubmitJobRequest } from '../../src/gen/evora/v1/job.js';
import { QueueServiceClient } from '../../src/gen/evora/v1/queue.js';

const defaults = {
  big: 5_000,
  small: 50,
  smallKeys: 99,
  perKey: 2,
  slots: 200,
  workers: 1,
  holdMs: 2,
  uniform: 100,
  rounds: 3,
  top: 4,
};
const opts: typeof defaults = { ...defaults };
let variants = ['skewed-perkey', 'skewed-fifo', 'uniform-perkey', 'uniform-unlimited'];
for (const arg of process.argv.slice(2)) {
  const [name, value] = arg.split('=');
  if (name === 'variants' && value) variants = value.split(',');
  else if (name && name in defaults && Number.isFinite(Number(value))) opts[name as keyof typeof defaults] = Number(value);
  else throw new Error(`unknown argument ${arg} (name=value; names: ${Object.keys(defaults).join(', ')}, variants)`);
}
console.log(JSON.stringify({ parameters: { ...opts, variants } }));

/** One job to submit: its key (also in the payload, which is what the worker sees). */
type Load = string[];

function loadOf(variant: string): Load {
  const smallKeys = Array.from({ length: opts.smallKeys }, (_, i) => `k${i + 1}`);
  if (variant.startsWith('skewed')) {
    return [...Array<string>(opts.big).fill('k0'), ...smallKeys.flatMap((k) => Array<string>(opts.small).fill(k))];
  }
  const keys = ['k0', ...smallKeys];
  return Array.from({ length: keys.length * opts.uniform }, (_, i) => keys[i % keys.length]!);
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? NaN;
};
const median = (xs: number[]) => pct(xs, 50);
const round = (x: number, d = 0) => +x.toFixed(d);

interface RunResult {
  variant: string;
  round: number;
  load: string;
  jobs: number;
  seconds: number;
  jobsPerSecond: number;
  /** The statements by total time while the workers ran (pg_stat_statements, nested included). */
  statements?: { calls: number; meanMs: number; totalMs: number; query: string }[];
  /** Only for skewed loads. */
  small?: {
    firstStartMs: { p50: number; p99: number; max: number };
    lastStartMs: { p50: number; max: number };
    lastPositionMax: number;
    bigStartedBefore: number;
    jain: number;
    windowJobsPerSecond: number;
    tailJobsPerSecond: number;
  };
}

async function runOnce(variant: string, roundNo: number): Promise<RunResult> {
  const load = execFileSync('uptime', { encoding: 'utf8' }).trim().replace(/^.*load average: /, '');
  const dir = await mkdtemp(join(tmpdir(), 'evora-fair-'));
  const pgh = await embeddedPostgresStart({
    dataDir: dir,
    port: await freePort(),
    postgresFlags: ['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=all'],
  });
  const admin = new pg.Client({ connectionString: pgh.url });
  await admin.connect();
  const server = await serverStart(configLoad({ databaseUrl: pgh.url, port: '0', httpPort: '0' }, {}), silentLogger());
  const jobs = new JobServiceClient(server.address, grpc.credentials.createInsecure());
  const queues = new QueueServiceClient(server.address, grpc.credentials.createInsecure());
  const children: ChildProcess[] = [];
  try {
    const queue = 'fair';
    const perKey = variant.endsWith('perkey') ? opts.perKey : 0;
    await new Promise<void>((resolve, reject) =>
      queues.upsertQueue({ name: queue, maxConcurrencyPerKey: perKey }, (err) => (err ? reject(err) : resolve())),
    );
    const keys = loadOf(variant);
    for (let i = 0; i < keys.length; i += 1000) {
      const batch: SubmitJobRequest[] = keys.slice(i, i + 1000).map((k) => ({
        queue,
        type: 'hold',
        payload: { k, ms: opts.holdMs },
        dependsOn: [],
        ref: '',
        dependsOnRefs: [], payloadJson: Buffer.alloc(0),
        priority: 0,
        idempotencyKey: '',
        maxAttempts: 0,
        concurrencyKey: k,
      }));
      await new Promise<void>((resolve, reject) => jobs.submitJobs({ idsOnly: false, jobs: batch }, (err) => (err ? reject(err) : resolve())));
    }

    await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await admin.query('SELECT pg_stat_statements_reset()');
    const starts: [string, number][] = [];
    const acks: number[] = [];
    const lastAckAt: number[] = [];
    const slotsEach = Math.ceil(opts.slots / opts.workers);
    const done = Promise.all(
      Array.from({ length: opts.workers }, (_, w) => {
        const child = spawn(
          process.execPath,
          ['--import', 'tsx', fileURLToPath(new URL('./fairness-worker.ts', import.meta.url)), server.address, queue, String(slotsEach)],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        );
        children.push(child);
        acks[w] = 0;
        lastAckAt[w] = 0;
        return new Promise<void>((resolve, reject) => {
          child.on('exit', (code) => reject(new Error(`worker ${w} exited (${code}) before the run ended`)));
          createInterface({ input: child.stdout! }).on('line', (line) => {
            const m = JSON.parse(line) as { starts?: [string, number][]; acks?: number; lastAckAt?: number };
            if (m.starts) starts.push(...m.starts);
            if (m.acks !== undefined) acks[w] = m.acks;
            if (m.lastAckAt) lastAckAt[w] = m.lastAckAt;
            if (acks.reduce((a, b) => a + b, 0) >= keys.length) resolve();
          });
        });
      }),
    );
    await done;

    const { rows: top } = await admin.query<{ calls: string; mean_ms: string; total_ms: string; query: string }>(
      `SELECT calls, round(mean_exec_time::numeric, 2) AS mean_ms, round(total_exec_time)::int AS total_ms,
              left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS query
       FROM pg_stat_statements WHERE query NOT ILIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT ${opts.top}`,
    );
    starts.sort((a, b) => a[1] - b[1]);
    const t0 = starts[0]![1];
    const seconds = (Math.max(...lastAckAt) - t0) / 1000;
    const result: RunResult = { variant, round: roundNo, load, jobs: keys.length, seconds: round(seconds, 2), jobsPerSecond: Math.round(keys.length / seconds) };
    if (opts.top > 0) result.statements = top.map((r) => ({ calls: Number(r.calls), meanMs: Number(r.mean_ms), totalMs: Number(r.total_ms), query: r.query }));
    if (variant.startsWith('skewed')) {
      const first = new Map<string, number>();
      const last = new Map<string, { at: number; position: number }>();
      starts.forEach(([k, at], i) => {
        if (!first.has(k)) first.set(k, at - t0);
        last.set(k, { at: at - t0, position: i + 1 });
      });
      const small = [...first.keys()].filter((k) => k !== 'k0');
      const firsts = small.map((k) => first.get(k)!);
      const lasts = small.map((k) => last.get(k)!.at);
      const lastPositionMax = Math.max(...small.map((k) => last.get(k)!.position));
      const windowEnd = Math.max(...lasts);
      const inWindow = starts.slice(0, lastPositionMax);
      const perKeyStarts = new Map<string, number>();
      for (const [k] of inWindow) perKeyStarts.set(k, (perKeyStarts.get(k) ?? 0) + 1);
      const xs = [...perKeyStarts.values()];
      const n = 1 + opts.smallKeys;
      const jain = xs.reduce((a, b) => a + b, 0) ** 2 / (n * xs.reduce((a, b) => a + b * b, 0));
      const tail = starts.length - lastPositionMax;
      const tailSeconds = (Math.max(...lastAckAt) - t0 - windowEnd) / 1000;
      result.small = {
        firstStartMs: { p50: round(median(firsts)), p99: round(pct(firsts, 99)), max: round(Math.max(...firsts)) },
        lastStartMs: { p50: round(median(lasts)), max: round(windowEnd) },
        lastPositionMax,
        bigStartedBefore: perKeyStarts.get('k0') ?? 0,
        jain: round(jain, 3),
        windowJobsPerSecond: Math.round(lastPositionMax / Math.max(windowEnd / 1000, 1e-3)),
        tailJobsPerSecond: tail > 0 ? Math.round(tail / tailSeconds) : 0,
      };
    }
    return result;
  } finally {
    for (const child of children) {
      child.removeAllListeners('exit');
      child.kill('SIGTERM');
    }
    jobs.close();
    queues.close();
    await admin.end();
    await server.stop();
    await pgh.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

const results: RunResult[] = [];
for (let r = 1; r <= opts.rounds; r++) {
  for (const variant of variants) {
    const result = await runOnce(variant, r);
    results.push(result);
    console.log(JSON.stringify(result));
  }
}

console.log('\nmedians over rounds (min–max):');
for (const variant of variants) {
  const rs = results.filter((r) => r.variant === variant);
  const span = (f: (r: RunResult) => number) => {
    const xs = rs.map(f);
    return `${median(xs)} (${Math.min(...xs)}–${Math.max(...xs)})`;
  };
  const row: Record<string, string> = { jobs: String(rs[0]!.jobs), 'jobs/s': span((r) => r.jobsPerSecond), seconds: span((r) => r.seconds) };
  if (rs[0]!.small) {
    const s = (f: (x: NonNullable<RunResult['small']>) => number) => span((r) => f(r.small!));
    Object.assign(row, {
      'first start p50 ms': s((x) => x.firstStartMs.p50),
      'first start p99 ms': s((x) => x.firstStartMs.p99),
      'first start max ms': s((x) => x.firstStartMs.max),
      'last start p50 ms': s((x) => x.lastStartMs.p50),
      'last start max ms': s((x) => x.lastStartMs.max),
      'last small start #': s((x) => x.lastPositionMax),
      'k0 started before it': s((x) => x.bigStartedBefore),
      jain: s((x) => x.jain),
      'window jobs/s': s((x) => x.windowJobsPerSecond),
      'k0 tail jobs/s': s((x) => x.tailJobsPerSecond),
    });
  }
  console.log(variant, JSON.stringify(row));
}

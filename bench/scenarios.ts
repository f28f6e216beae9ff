/**
 * The scenarios, the same for every system: each runs on a fresh database (opened by the
 * caller) and returns the numbers of its one JSON line.
 */
import { readFileSync } from 'node:fs';
import { processCpuUs, type CpuProcess } from './lib/cpu.js';
import { burnDown, WorkerGroup } from './lib/workers.js';
import { log, now, percentile, pool, round, sleep } from './lib/util.js';
import type { SystemDriver, SystemInstance } from './systems/types.js';

export const SCENARIOS = ['throughput', 'latency', 'enqueue', 'flat', 'memory'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export interface Sizes {
  /** Jobs burned down in the throughput and flat-cost scenarios. */
  throughputJobs: number;
  /**
   * Burn-downs per throughput and flat-cost scenario; the median is reported (identical
   * single runs differ by up to ±30% on a 2-core machine; a median of five moves less
   * between runs than one of three).
   */
  burnRounds: number;
  latencyRate: number;
  latencySeconds: number;
  enqueueSequential: number;
  enqueueConcurrent: number;
  enqueueConcurrency: number;
  enqueueBatchJobs: number;
  batchSize: number;
  /** Finished jobs seeded before the flat-cost burn-down. */
  flatSeed: number;
  /** Jobs of Evora's memory run (0: skipped). */
  memoryJobs: number;
}

export const FULL: Sizes = {
  throughputJobs: 20_000,
  burnRounds: 5,
  latencyRate: 100,
  latencySeconds: 10,
  enqueueSequential: 2_000,
  enqueueConcurrent: 5_000,
  enqueueConcurrency: 16,
  enqueueBatchJobs: 20_000,
  batchSize: 1_000,
  flatSeed: 1_000_000,
  memoryJobs: 200_000,
};

export const QUICK: Sizes = {
  throughputJobs: 5_000,
  burnRounds: 1,
  latencyRate: 100,
  latencySeconds: 3,
  enqueueSequential: 500,
  enqueueConcurrent: 1_000,
  enqueueConcurrency: 16,
  enqueueBatchJobs: 5_000,
  batchSize: 1_000,
  flatSeed: 100_000,
  memoryJobs: 0,
};

export type Numbers = Record<string, number | string>;

export interface RunContext {
  driver: SystemDriver;
  inst: SystemInstance;
  sizes: Sizes;
  /** Extra node flags for worker processes (profiling). */
  workerNodeFlags: string[];
  /** Runs a PostgreSQL CHECKPOINT (so that a bulk seed's dirty pages are not flushed during the measurement). */
  checkpoint(): Promise<void>;
  /**
   * The store the system keeps its jobs in, as processes whose CPU a burn-down accounts for
   * (PostgreSQL's postmaster with its children, or redis-server); null when unknown (a
   * DATABASE_URL server may be on another machine).
   */
  store: { name: 'postgres' | 'redis'; processes: CpuProcess[] } | null;
}

async function enqueueBatches(inst: SystemInstance, n: number, batchSize: number): Promise<number> {
  const t0 = now();
  for (let i = 0; i < n; i += batchSize) {
    await inst.submitBatch(Array.from({ length: Math.min(batchSize, n - i) }, () => ({})));
  }
  return (now() - t0) / 1000;
}

function startWorkers(ctx: RunContext): Promise<WorkerGroup> {
  const { driver, inst } = ctx;
  return WorkerGroup.start({
    system: driver.name,
    processes: driver.processes,
    queue: inst.queue,
    target: inst.target,
    config: driver.config,
    nodeFlags: driver.name === 'evora' ? ctx.workerNodeFlags : [],
  });
}

/** RSS of a process in bytes, from /proc (0 if unreadable). */
export function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

const MiB = (b: number) => round(b / 1024 / 1024, 1);

/**
 * N jobs enqueued in batches, then the workers (started and connected beforehand) are let
 * go; jobs/s from the first handler start to the last committed completion, measured in the
 * worker processes.
 */
async function burn(ctx: RunContext, n: number, onProgress?: (done: number) => void): Promise<Numbers> {
  const { inst, sizes } = ctx;
  const enqueueSeconds = await enqueueBatches(inst, n, sizes.batchSize);
  // A live system's tables have statistics (autovacuum analyzes within a minute); a table
  // filled a moment ago has none, and the planner's guesses for it can be far off.
  await inst.analyze();
  const group = await startWorkers(ctx);
  try {
    // CPU of each party over the jobs/s window: from the first progress report that shows a
    // handler started (reports come every 20 ms) to the last completion, per job completed
    // in it. The processes' start (connecting, the first claim) stays out, as it does of jobs/s.
    const parties = cpuParties(ctx, group);
    let cpu0: { us: number[]; done: number } | null = null;
    group.go();
    await group.waitDone(n, Math.min(300_000, 30_000 + n * 5), () => {
      if (!cpu0 && group.started > 0) cpu0 = { us: parties.map((p) => processCpuUs(p.processes)), done: group.done };
      onProgress?.(group.done);
    });
    const from = cpu0 as { us: number[]; done: number } | null;
    const cpuUsPerJob = from
      ? Object.fromEntries(parties.map((p, i) => [`${p.name}CpuUsPerJob`, Math.round((processCpuUs(p.processes) - from.us[i]!) / Math.max(1, n - from.done))]))
      : {};
    const reports = await group.reports();
    const { seconds, jobsPerSecond } = burnDown(reports, n);
    const remaining = await inst.remaining();
    if (remaining !== 0) log(`${ctx.driver.name}: ${remaining} jobs still unfinished after the burn-down`);
    return {
      jobs: n,
      jobsPerSecond: Math.round(jobsPerSecond),
      seconds: round(seconds, 3),
      enqueueJobsPerSecond: Math.round(n / enqueueSeconds),
      remaining,
      ...cpuUsPerJob,
    };
  } finally {
    await group.stop();
  }
}

/**
 * The processes a burn-down's CPU is counted for: the system's store (PostgreSQL or Redis),
 * its server (Evora), a pooler in front of PostgreSQL (Evora with pgbouncer) and its worker
 * processes. Their names become the result line's `<name>CpuUsPerJob` fields.
 */
function cpuParties(ctx: RunContext, group: WorkerGroup): { name: string; processes: CpuProcess[] }[] {
  const parties: { name: string; processes: CpuProcess[] }[] = [];
  if (ctx.store) parties.push(ctx.store);
  if (ctx.inst.serverPid !== null) parties.push({ name: 'server', processes: [{ pid: ctx.inst.serverPid }] });
  if (ctx.inst.poolerPid) parties.push({ name: 'pooler', processes: [{ pid: ctx.inst.poolerPid }] });
  parties.push({ name: 'workers', processes: group.pids.map((pid) => ({ pid })) });
  return parties;
}

/**
 * burnRounds burn-downs of n jobs, one after the other on the same system: the numbers of
 * the median one (by jobs/s), and every round's jobs/s in `jobsPerSecondRounds`.
 */
async function burnRounds(ctx: RunContext, n: number): Promise<Numbers> {
  const rounds: Numbers[] = [];
  for (let i = 0; i < Math.max(1, ctx.sizes.burnRounds); i++) rounds.push(await burn(ctx, n));
  const sorted = [...rounds].sort((a, b) => Number(a.jobsPerSecond) - Number(b.jobsPerSecond));
  const median = sorted[Math.floor((sorted.length - 1) / 2)] as Numbers;
  return rounds.length === 1 ? median : { ...median, jobsPerSecondRounds: rounds.map((r) => r.jobsPerSecond).join(' ') };
}

export async function throughput(ctx: RunContext): Promise<Numbers> {
  return burnRounds(ctx, ctx.sizes.throughputJobs);
}

/** Throughput again, with many finished jobs already in the table (seeded, vacuumed, analyzed). */
export async function flat(ctx: RunContext): Promise<Numbers> {
  const t0 = now();
  const seeded = await ctx.inst.seedFinished(ctx.sizes.flatSeed);
  const seedSeconds = (now() - t0) / 1000;
  log(`${ctx.driver.name}: seeded in ${seedSeconds.toFixed(1)} s: ${seeded}`);
  // What is measured is the cost of a big table, not of having just written one.
  await ctx.checkpoint();
  const r = await burnRounds(ctx, ctx.sizes.throughputJobs);
  return { finishedInTable: ctx.sizes.flatSeed, ...r, seedSeconds: round(seedSeconds, 1), seeded };
}

/**
 * Idle workers, ready; then single submits at a fixed rate (open loop: each at its planned
 * time, not waiting for the previous one), the first second of them a warm-up; the
 * enqueue-to-handler-start time of the others from payload.t.
 */
export async function latency(ctx: RunContext): Promise<Numbers> {
  const { inst, sizes } = ctx;
  const group = await startWorkers(ctx);
  try {
    group.go();
    // Let the workers connect, make their first (empty) fetch and settle into waiting.
    await sleep(1500);
    const total = sizes.latencyRate * sizes.latencySeconds;
    const interval = 1000 / sizes.latencyRate;
    // One second of the same traffic first, not measured (no `t`): every system starts warm.
    const warmup = sizes.latencyRate;
    const submitMs: number[] = [];
    const inflight: Promise<void>[] = [];
    const t0 = now();
    for (let i = 0; i < warmup + total; i++) {
      const wait = t0 + i * interval - now();
      if (wait > 0) await sleep(wait);
      if (i < warmup) {
        inflight.push(inst.submitOne({}));
        continue;
      }
      const t = now();
      inflight.push(inst.submitOne({ t }).then(() => void submitMs.push(now() - t)));
    }
    await Promise.all(inflight);
    await group.waitDone(warmup + total, 30_000);
    const reports = await group.reports();
    const l = reports.flatMap((r) => r.latencies).sort((a, b) => a - b);
    const s = submitMs.sort((a, b) => a - b);
    return {
      jobs: total,
      perSecond: sizes.latencyRate,
      p50ms: round(percentile(l, 50), 2),
      p95ms: round(percentile(l, 95), 2),
      p99ms: round(percentile(l, 99), 2),
      maxMs: round(l[l.length - 1] ?? NaN, 2),
      submitP50ms: round(percentile(s, 50), 2),
    };
  } finally {
    await group.stop();
  }
}

/** Enqueue rate with the system's own client API, no workers running. */
export async function enqueue(ctx: RunContext): Promise<Numbers> {
  const { inst, sizes } = ctx;
  for (let i = 0; i < 20; i++) await inst.submitOne({}); // warm the connection
  let t0 = now();
  for (let i = 0; i < sizes.enqueueSequential; i++) await inst.submitOne({});
  const sequential = sizes.enqueueSequential / ((now() - t0) / 1000);
  t0 = now();
  await pool(sizes.enqueueConcurrent, sizes.enqueueConcurrency, () => inst.submitOne({}));
  const concurrent = sizes.enqueueConcurrent / ((now() - t0) / 1000);
  const batchSeconds = await enqueueBatches(inst, sizes.enqueueBatchJobs, sizes.batchSize);
  return {
    singleSequentialPerSecond: Math.round(sequential),
    singleConcurrentPerSecond: Math.round(concurrent),
    concurrency: sizes.enqueueConcurrency,
    batchPerSecond: Math.round(sizes.enqueueBatchJobs / batchSeconds),
    batchSize: sizes.batchSize,
  };
}

/** Evora only: a long burn-down, with the server process's RSS sampled at start, middle and end. */
export async function memory(ctx: RunContext): Promise<Numbers> {
  const pid = ctx.inst.serverPid;
  if (!pid) throw new Error('memory: no server process to sample');
  const n = ctx.sizes.memoryJobs;
  const idle = rssOf(pid);
  const samples: { done: number; rss: number }[] = [];
  let nextAt = 0;
  const r = await burn(ctx, n, (done) => {
    if (done < nextAt) return;
    samples.push({ done, rss: rssOf(pid) });
    nextAt = samples.length === 1 ? n / 10 : nextAt + n / 10;
  });
  samples.push({ done: n, rss: rssOf(pid) });
  const start = samples[0]!.rss;
  const middle = samples.reduce((best, s) => (Math.abs(s.done - n / 2) < Math.abs(best.done - n / 2) ? s : best)).rss;
  const end = samples[samples.length - 1]!.rss;
  return {
    jobs: n,
    jobsPerSecond: r.jobsPerSecond!,
    rssIdleMiB: MiB(idle),
    rssStartMiB: MiB(start),
    rssMiddleMiB: MiB(middle),
    rssEndMiB: MiB(end),
    rssMaxMiB: MiB(Math.max(...samples.map((s) => s.rss))),
    rssSamplesMiB: samples.map((s) => MiB(s.rss)).join(' '),
  };
}

export const RUNNERS: Record<ScenarioName, (ctx: RunContext) => Promise<Numbers>> = { throughput, latency, enqueue, flat, memory };

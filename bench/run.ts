/**
 * `npm run bench` — Evora side by side with graphile-worker, pg-boss and BullMQ, in one run,
 * on one PostgreSQL server (embedded in /tmp unless DATABASE_URL is set), each system and
 * scenario on a fresh database. Prints one JSON line per system and scenario on stdout
 * (progress goes to stderr) and, for a full run of everything, rewrites the results block
 * of docs/benchmarks.md (the block it replaces moves to bench/results/history.md).
 *
 *   npm run bench                         full run (about 6-8 minutes)
 *   npm run bench -- --quick              smaller sizes (under 2 minutes), does not write the docs
 *   npm run bench -- --systems evora,graphile --scenarios throughput,latency
 *   npm run bench -- --set graphile.concurrency=32 --set pgboss.batchSize=1000
 *   npm run bench -- --jobs 50000         throughput/flat burn-down size
 *   npm run bench -- --rounds 5           burn-downs per throughput/flat scenario, median reported (full 5, quick 1)
 *   npm run bench -- --flat-seed 10000000 finished jobs seeded before the flat-cost burn-down (full 1,000,000)
 *   npm run bench -- --out /tmp/b.md      write the results block to another file (any run)
 *   npm run bench -- --no-write           never write
 *   npm run bench -- --profile DIR        CPU profiles of Evora's server and worker processes into DIR
 *                                         (summarize one: npx tsx bench/profile-summary.ts FILE; thread 0 is the main thread)
 *   npm run bench -- --pgss               pg_stat_statements: top statements per system and scenario (stderr)
 *   npm run bench -- --redis-persistence everysec|always|none   (default everysec)
 *   npm run bench -- --evora-tls          Evora's gRPC over TLS (a throwaway CA made with openssl)
 *   npm run bench -- --evora-token        Evora with auth on: the workers send a worker token, the producer an admin one
 *                                         (both also as --set evora.tls=true / evora.token=true; neither writes the docs)
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { cpus } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cpuSample, otherCpu } from './lib/cpu.js';
import { cleanupAll, postgresStart, redisStart, tempDir, which, type Redis, type RedisPersistence } from './lib/infra.js';
import type { SystemName } from './lib/protocol.js';
import { errorText, log, now } from './lib/util.js';
import { archiveResults, renderResults, targets, writeResults, type ResultLine, type RunInfo } from './report.js';
import { FULL, QUICK, RUNNERS, SCENARIOS, type RunContext, type ScenarioName, type Sizes } from './scenarios.js';
import { bullmqDriver } from './systems/bullmq.js';
import { evoraDriver } from './systems/evora.js';
import { graphileDriver } from './systems/graphile.js';
import { pgBossDriver } from './systems/pgboss.js';
import type { SystemDriver, SystemInstance } from './systems/types.js';

const DOC = fileURLToPath(new URL('../docs/benchmarks.md', import.meta.url));
const HISTORY = fileURLToPath(new URL('./results/history.md', import.meta.url));
const ALL_SYSTEMS: SystemName[] = ['evora', 'graphile-worker', 'pg-boss', 'bullmq'];
const ALIASES: Record<string, SystemName> = {
  evora: 'evora',
  graphile: 'graphile-worker',
  'graphile-worker': 'graphile-worker',
  pgboss: 'pg-boss',
  'pg-boss': 'pg-boss',
  bullmq: 'bullmq',
  bull: 'bullmq',
};

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    systems: { type: 'string' },
    scenarios: { type: 'string' },
    jobs: { type: 'string' },
    rounds: { type: 'string' },
    'flat-seed': { type: 'string' },
    set: { type: 'string', multiple: true, default: [] },
    out: { type: 'string' },
    'no-write': { type: 'boolean', default: false },
    profile: { type: 'string' },
    pgss: { type: 'boolean', default: false },
    'redis-persistence': { type: 'string', default: 'everysec' },
    'evora-tls': { type: 'boolean', default: false },
    'evora-token': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
  strict: true,
});

if (args.help) {
  process.stderr.write(
    (await import('node:fs')).readFileSync(fileURLToPath(import.meta.url), 'utf8').split('*/')[0]!.replace(/^\/\*\*?|^ \* ?/gm, '') + '\n',
  );
  process.exit(0);
}

function list<T extends string>(raw: string | undefined, all: readonly T[], map: (s: string) => T | undefined, what: string): T[] {
  if (!raw) return [...all];
  return raw.split(',').map((s) => {
    const v = map(s.trim());
    if (!v) throw new Error(`unknown ${what} "${s}" (known: ${all.join(', ')})`);
    return v;
  });
}

const systems = list(args.systems, ALL_SYSTEMS, (s) => ALIASES[s], 'system');
const scenarios = list(args.scenarios, SCENARIOS, (s) => (SCENARIOS as readonly string[]).includes(s) ? (s as ScenarioName) : undefined, 'scenario');
const sizes: Sizes = { ...(args.quick ? QUICK : FULL) };
if (args.jobs) sizes.throughputJobs = Number(args.jobs);
if (args.rounds) sizes.burnRounds = Number(args.rounds);
if (args['flat-seed']) sizes.flatSeed = Number(args['flat-seed']);
const overrides: Record<SystemName, Record<string, string>> = { evora: {}, 'graphile-worker': {}, 'pg-boss': {}, bullmq: {} };
for (const s of args.set) {
  const m = /^([\w-]+)\.(\w+)=(.*)$/.exec(s);
  const sys = m ? ALIASES[m[1]!] : undefined;
  if (!m || !sys) throw new Error(`--set wants system.key=value (system: ${Object.keys(ALIASES).join(', ')}), got "${s}"`);
  overrides[sys][m[2]!] = m[3]!;
}
if (args['evora-tls']) overrides.evora.tls = 'true';
if (args['evora-token']) overrides.evora.token = 'true';
const persistence = args['redis-persistence'] as RedisPersistence;
if (!['none', 'everysec', 'always'].includes(persistence)) throw new Error('--redis-persistence: none, everysec or always');
const filtered = !!(args.systems || args.scenarios || args.jobs || args.rounds || args['flat-seed'] || args.set.length || args['evora-tls'] || args['evora-token']);
const writeTo = args['no-write'] ? null : args.out ? resolve(args.out) : !args.quick && !filtered ? DOC : null;
const profileDir = args.profile ? resolve(args.profile) : null;
if (profileDir) mkdirSync(profileDir, { recursive: true });

let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    interrupted = true;
    log(`${sig}: cleaning up`);
    void cleanupAll().then(() => process.exit(130));
  });
}

const startedAt = new Date();
const cpuAtStart = cpuSample();
const t0 = now();
const results: ResultLine[] = [];
let exitCode = 0;
let pendingWrite: RunInfo | null = null;
try {
  const pg = await postgresStart({ pgStatStatements: args.pgss });
  if (pg.embedded) {
    const w0 = now();
    await pg.warmUp();
    log(`warmed up the new PostgreSQL cluster (WAL segments) in ${((now() - w0) / 1000).toFixed(1)} s`);
  }
  const tmp = tempDir('evora-bench-');

  let redis: Redis | null = null;
  let redisMissing: string | null = null;
  if (systems.includes('bullmq')) {
    const bin = which('redis-server');
    if (!bin) redisMissing = 'no redis-server on PATH (Debian: apt-get install -y redis-server)';
    else {
      try {
        redis = await redisStart(bin, persistence);
        redis.version = execFileSync(bin, ['--version'], { encoding: 'utf8' }).match(/v=(\S+)/)?.[1] ?? redis.version;
      } catch (err) {
        redisMissing = `redis-server did not start: ${errorText(err)}`;
      }
    }
  }

  const drivers: SystemDriver[] = systems.map((s) => {
    switch (s) {
      case 'evora':
        return evoraDriver(overrides.evora);
      case 'graphile-worker':
        return graphileDriver(overrides['graphile-worker']);
      case 'pg-boss':
        return pgBossDriver(overrides['pg-boss']);
      case 'bullmq':
        return bullmqDriver(overrides.bullmq, redis, redisMissing);
    }
  });

  /** Where a system keeps its jobs, as processes whose CPU a burn-down counts. */
  const storeProcesses = (inst: SystemInstance): RunContext['store'] => {
    if (inst.target.redis) return redis ? { name: 'redis', processes: [{ pid: redis.pid }] } : null;
    const pid = pg.pid();
    return pid === null ? null : { name: 'postgres', processes: [{ pid, children: true }] };
  };

  log(`${args.quick ? 'quick' : 'full'} run: ${systems.join(', ')} × ${scenarios.join(', ')}`);
  for (const d of drivers) {
    if (d.unavailable) {
      log(`${d.name}: skipped: ${d.unavailable}`);
      continue;
    }
    log(`${d.name} ${d.version}: ${d.describe()}`);
    for (const scenario of scenarios) {
      if (interrupted) break;
      if (scenario === 'memory' && (d.name !== 'evora' || sizes.memoryJobs === 0)) continue;
      const dbName = `bench_${d.name.replace(/-/g, '_')}_${scenario}`;
      const s0 = now();
      let line: ResultLine;
      try {
        const databaseUrl = await pg.createDatabase(dbName);
        if (args.pgss) await pg.admin.query('SELECT pg_stat_statements_reset()');
        const inst = await d.open({ databaseUrl, redis, tmpDir: tmp, cpuProfileDir: profileDir, scenario });
        try {
          const numbers = await RUNNERS[scenario]({
            driver: d,
            inst,
            sizes,
            checkpoint: async () => {
              await pg.admin.query('CHECKPOINT').catch((err: unknown) => log(`CHECKPOINT: ${errorText(err)} (continuing)`));
            },
            workerNodeFlags: profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}/${d.name}-workers-${scenario}`] : [],
            store: storeProcesses(inst),
          });
          line = { system: d.name, scenario, ...numbers };
        } finally {
          await inst.close();
        }
        if (args.pgss) await printTopStatements(pg.admin, dbName, d.name, scenario);
      } catch (err) {
        line = { system: d.name, scenario, error: errorText(err) };
        exitCode = 1;
      } finally {
        await pg.dropDatabase(dbName).catch((err: unknown) => log(`drop ${dbName}: ${errorText(err)}`));
      }
      results.push(line);
      process.stdout.write(JSON.stringify(line) + '\n');
      log(`${d.name} ${scenario} done in ${((now() - s0) / 1000).toFixed(1)} s`);
    }
  }

  const seconds = (now() - t0) / 1000;
  log(`all done in ${seconds.toFixed(0)} s`);
  for (const t of targets(results)) {
    log(`${t.pass === null ? 'n/a ' : t.pass ? 'PASS' : 'MISS'}  ${t.what}: ${t.value} (goal ${t.goal})${t.gap ? `: ${t.gap}` : ''}`);
  }

  if (writeTo) {
    const pgInfo = await pg.describe();
    pendingWrite = {
      mode: args.quick ? 'quick' : 'full',
      startedAt,
      seconds,
      command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
      postgres: { ...pgInfo, embedded: pg.embedded },
      redis: redis
        ? `${redis.version}, a private redis-server on 127.0.0.1 with ${redis.flags.join(' ')} (persistence: ${redis.persistence})`
        : `none (${redisMissing ?? 'BullMQ not selected'})`,
      systems: drivers.map((d) => ({ name: d.name, version: d.version, config: d.describe(), skipped: d.unavailable })),
      sizes: { ...sizes },
      otherCpu: null,
    };
  }
} catch (err) {
  log(`failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  exitCode = 1;
} finally {
  await cleanupAll();
}
// Only now has every child exited (and been counted as ours).
const other = otherCpu(cpuAtStart, cpuSample(), cpus().length);
if (other) {
  const line = `other processes used ${other.coreSeconds.toFixed(1)} core-seconds during the run (${(other.share * 100).toFixed(1)}% of the machine); steal ${(other.stealShare * 100).toFixed(1)}%`;
  log(other.share > 0.05 ? `${line}: the numbers are noisier than they would be on a quiet machine` : line);
}
if (pendingWrite && writeTo) {
  pendingWrite.otherCpu = other;
  if (writeTo === DOC && archiveResults(DOC, HISTORY)) log(`moved the previous results block to ${HISTORY}`);
  writeResults(writeTo, renderResults(results, pendingWrite));
  log(`wrote ${writeTo}`);
}
process.exit(exitCode);

async function printTopStatements(admin: import('pg').Pool, dbName: string, system: string, scenario: string): Promise<void> {
  const { rows } = await admin.query<{ calls: string; total_ms: number; mean_ms: number; rows: string; query: string }>(
    `SELECT s.calls, round(s.total_exec_time::numeric, 1)::float AS total_ms, round(s.mean_exec_time::numeric, 3)::float AS mean_ms,
            s.rows, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 160) AS query
     FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
     WHERE d.datname = $1 ORDER BY s.total_exec_time DESC LIMIT 10`,
    [dbName],
  );
  log(`pg_stat_statements, ${system} ${scenario} (top 10 by total time):`);
  for (const r of rows) process.stderr.write(`  ${String(r.total_ms).padStart(9)} ms  ${String(r.calls).padStart(7)} calls  ${String(r.mean_ms).padStart(8)} ms/call  ${r.query}\n`);
}

import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import type { EvoraWorker, Job, JobContext } from '../../src/sdk/index.js';
import { EvoraClient } from '../../src/sdk/index.js';
import { freePort } from '../../src/server/embedded-postgres.js';
import { settle, verdict } from '../../test/chaos/checks.js';
import { CHAOS_QUEUES, jobsPlan } from '../../test/chaos/jobs.js';
import { Prng } from '../../test/chaos/options.js';
import { adminQuery } from '../../test/chaos/postgres.js';
import { ChaosProcess, type UnexpectedExit } from '../../test/chaos/procs.js';
import { cli, lockWatchSay, lockWatchStart, newestVersion, postgresStart, sleep, type RunContext } from './common.js';
import type { UpgradeOptions } from './options.js';
import { UpgradeSubmitter, type Sdk } from './submitter.js';

/**
 * The mixed-version run of scripts/upgrade-check.ts (its header has the steps): the older
 * checkout's servers, then this checkout's, on one PostgreSQL, with jobs flowing throughout.
 * Resolves 0 when every check held, else 1.
 */

/** One server of the run. */
interface Server {
  label: string;
  port: number;
  proc: ChaosProcess;
}

/** What the handler does, by the job's kind (test/chaos/jobs.ts); the result names the lease and the worker. */
function handlerFor(label: string) {
  return async (job: Job, ctx: JobContext): Promise<Record<string, unknown>> => {
    const payload = job.payload as { i: number; ms: number };
    await sleep(payload.ms);
    if (job.type === 'doomed') throw new Error(`doomed job ${payload.i}: always fails`);
    if (job.type === 'flaky' && job.attempt === 1) throw new Error(`flaky job ${payload.i}: the first attempt fails`);
    return { jobId: job.id, attempt: job.attempt, token: ctx.leaseToken, worker: label };
  };
}

/** Flags every server gets: short intervals, so leadership, sweeps and retention happen within the run. */
const SERVER_FLAGS = ['--sweep-interval-ms', '500', '--election-interval-ms', '1000', '--project-interval-ms', '500',
  '--poll-interval-ms', '500', '--prune-interval-ms', '1000', '--shutdown-timeout-ms', '5000', '--log-level', 'info'];

export async function mixedRun(ctx: RunContext, opts: UpgradeOptions, old: string, root: string): Promise<number> {
  if (!existsSync(join(old, 'dist/src/cli/main.js'))) throw new Error(`${old}/dist is missing: build the older checkout first (see the header)`);
  if (!existsSync(join(root, 'dist/src/cli/main.js'))) throw new Error('dist/ is missing: npm run build');
  const { say, runDir } = ctx;
  const failures: string[] = [];
  const check = (ok: boolean, what: string) => {
    say(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
    if (!ok) failures.push(what);
  };
  const { pg: postgres, dir: pgDir } = await postgresStart(ctx);
  const superUrl = postgres.url;
  const appUrl = superUrl.replace('postgres:evora@', 'evora_app:upgrade-check@');
  const asApp = opts.as === 'app';
  const serverUrl = asApp ? appUrl : superUrl;
  const unexpected: UnexpectedExit[] = [];
  const servers: Server[] = [];
  const workers = new Map<string, EvoraWorker>();
  const newSdk: Sdk = await import('../../src/sdk/index.js');
  const oldSdk = (await import(pathToFileURL(join(old, 'dist/src/sdk/index.js')).href)) as Sdk;
  const plan = jobsPlan(opts.jobs, opts.seed);
  const submitter = new UpgradeSubmitter(plan, opts.rate, new Prng(opts.seed).fork(0x5b), [newSdk, oldSdk], say);

  const serverAdd = async (label: string, checkout: string, port: number): Promise<Server> => {
    const proc = new ChaosProcess({
      name: label,
      command: process.execPath,
      args: [join(checkout, 'dist/src/cli/main.js'), 'serve', '--port', String(port), ...SERVER_FLAGS],
      env: { ...process.env, DATABASE_URL: serverUrl, EVORA_LOG_PRETTY: '0', EVORA_HTTP_PORT: '0' },
      logPath: join(runDir, `${label}.log`),
      readyPattern: /Evora listening/,
    }, (e) => {
      unexpected.push(e);
      say(`UNEXPECTED EXIT of ${e.name} (code ${e.code}, signal ${e.signal})`);
    });
    const server = { label, port, proc };
    servers.push(server);
    await proc.start();
    return server;
  };
  const workerAdd = async (label: string, sdk: Sdk, address: string, channelOptions?: Record<string, string>) => {
    const w = new sdk.EvoraWorker({ address, queues: [...CHAOS_QUEUES], slots: 24, workerId: label, channelOptions,
      reconnect: { initialDelayMs: 100, maxDelayMs: 1000, jitter: 0.3 } }) as EvoraWorker;
    for (const kind of ['fast', 'slow', 'flaky', 'doomed']) w.handle(kind, handlerFor(label));
    workers.set(label, w);
    await w.start();
  };
  const both = async (label: string, port: number, sdk: Sdk) => {
    submitter.add(label, `127.0.0.1:${port}`);
    await workerAdd(`w-${label}${sdk === oldSdk ? '.old-sdk' : ''}`, sdk, `127.0.0.1:${port}`);
  };
  const waitAcked = async (share: number) => {
    while (submitter.ackedCount < Math.ceil(plan.length * share)) await sleep(100);
  };
  const stopOld = async (s: Server) => {
    submitter.remove(s.label);
    const t = performance.now();
    await s.proc.terminate(30_000);
    say(`${s.label} stopped (SIGTERM): exit ${s.proc.child?.exitCode} after ${Math.round(performance.now() - t)} ms`);
    for (const [label, w] of workers) {
      if (!label.startsWith(`w-${s.label}`)) continue;
      const r = await w.stop({ timeoutMs: 5000 });
      workers.delete(label);
      say(`  its pinned worker ${label} stopped, unfinished: ${r.unfinished.length}`);
    }
  };

  try {
    say(`old: ${old} (migrations up to ${newestVersion(old)}); new: ${root} (up to ${newestVersion(root)}); ${opts.jobs} jobs at ` +
      `${opts.rate}/s; servers as ${asApp ? 'the application role evora_app' : 'the superuser'}${opts.limited ? '; queues with max_concurrency' : ''}`);
    if (asApp) {
      const roles = await cli(ctx, old, ['db', 'create-role', '--database-url', superUrl, '--password', 'upgrade-check']);
      say(`old \`evora db create-role\`: exit ${roles.code}: ${roles.stdout || roles.stderr}`);
    }
    // The four servers' ports, known now: the balanced worker's address lists them all.
    const ports: number[] = [];
    while (ports.length < 4) {
      const p = await freePort();
      if (!ports.includes(p)) ports.push(p);
    }
    const oldA = await serverAdd('old-A', old, ports[0]!);
    const oldB = await serverAdd('old-B', old, ports[1]!);
    const admin = new EvoraClient({ address: `127.0.0.1:${oldA.port}`, deadlineMs: 5000 });
    for (const q of CHAOS_QUEUES) {
      await admin.upsertQueue(q, { leaseSeconds: 10, maxAttempts: 25, backoff: { kind: 'fixed', baseSeconds: 0.2, capSeconds: 1, jitter: 0 },
        ...(opts.limited ? { maxConcurrency: 500 } : {}) });
    }
    admin.close();
    await both('old-A', oldA.port, newSdk);
    await both('old-B', oldB.port, oldSdk);
    await workerAdd('w-balanced', newSdk, `ipv4:${ports.map((p) => `127.0.0.1:${p}`).join(',')}`,
      { 'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }) });
    submitter.phaseStart('old only', 0.15);
    const submitting = submitter.run();
    await waitAcked(0.15);

    let migratedAt: Date;
    let newC: Server;
    let newD: Server;
    if (asApp) {
      // 1. A new server as the application role, before the migration.
      const early = await cli(ctx, root, ['serve', '--port', String(await freePort()), '--log-level', 'warn'], { DATABASE_URL: appUrl }, 60_000);
      say(`new server as evora_app before \`evora migrate\`: exit ${early.code} after ${Math.round(early.ms)} ms: ${early.stderr.split('\n').at(-1)}`);
      check(early.code === 1, 'a new server as the application role refuses a schema with pending migrations (exit 1)');
      // 2. `evora migrate` of the new version, superuser URL, while the old servers work.
      submitter.phaseStart('during migrate', 0.3);
      const watch = lockWatchStart(superUrl, 'evora-migrate');
      const migrated = await cli(ctx, root, ['migrate', '--database-url', superUrl]);
      const seen = await watch.stop();
      migratedAt = (await adminQuery<{ now: Date }>(superUrl, 'SELECT clock_timestamp() AS now'))[0]!.now;
      say(`new \`evora migrate\`: exit ${migrated.code} in ${Math.round(migrated.ms)} ms (the process, node's start included): ${migrated.stdout || migrated.stderr}`);
      lockWatchSay(ctx, seen);
      check(migrated.code === 0, '`evora migrate` of the new version applies the pending migrations');
      const denied = await adminQuery<{ name: string }>(superUrl,
        `SELECT p.oid::regprocedure::text AS name FROM pg_proc p
         WHERE p.pronamespace = 'evora'::regnamespace AND NOT has_function_privilege('evora_app', p.oid, 'EXECUTE')`);
      check(denied.length === 0, `after \`evora migrate\` alone evora_app may execute every evora function${denied.length ? ` (not: ${denied.map((d) => d.name).join(', ')})` : ''}`);
      // 3. The old servers alone on the new schema for a while, then the new servers.
      submitter.phaseStart('old only, new schema', 0.45);
      await waitAcked(0.45);
      [newC, newD] = [await serverAdd('new-C', root, ports[2]!), await serverAdd('new-D', root, ports[3]!)];
    } else {
      // 2-3. Two new servers (superuser URL) started at once while the old servers work: each migrates at its start.
      submitter.phaseStart('new servers starting', 0.45);
      const watch = lockWatchStart(superUrl, 'evora-migrate');
      const t = performance.now();
      [newC, newD] = await Promise.all([serverAdd('new-C', root, ports[2]!), serverAdd('new-D', root, ports[3]!)]);
      const seen = await watch.stop();
      migratedAt = (await adminQuery<{ now: Date }>(superUrl, 'SELECT clock_timestamp() AS now'))[0]!.now;
      const appliedBy = [newC, newD].flatMap((s) => {
        const line = readFileSync(join(runDir, `${s.label}.log`), 'utf8').split('\n').find((l) => l.includes('"migrations applied"'));
        return line ? [`${s.label} (${/"versions":(\[[\d,]*\])/.exec(line)?.[1]})`] : [];
      });
      say(`new-C and new-D started together, both ready in ${Math.round(performance.now() - t)} ms; migrations applied by: ${appliedBy.join(', ') || 'neither'}`);
      lockWatchSay(ctx, seen);
      check(appliedBy.length === 1, 'of two new servers started at once, exactly one applied the migrations');
    }
    await both('new-C', newC.port, newSdk);
    await both('new-D', newD.port, oldSdk);
    submitter.phaseStart('old and new', 0.6);
    await waitAcked(0.6);

    // 4. The old servers stopped one by one; old-A started again after the migration, twice.
    submitter.phaseStart('old-A stopped', 0.75);
    await stopOld(oldA);
    for (let i = 1; i <= 2; i++) {
      const again = await cli(ctx, old, ['serve', '--port', String(oldA.port), '--log-level', 'warn'], { DATABASE_URL: serverUrl }, 60_000);
      say(`old-A started again (#${i}) on the migrated schema: exit ${again.code} after ${Math.round(again.ms)} ms: ${again.stderr.split('\n').at(-1)}`);
      check(again.code === 1 && /newer Evora/.test(again.stderr), `an old server started after the migration refuses the newer schema (exit 1), #${i}`);
    }
    await waitAcked(0.75);
    submitter.phaseStart('new only', 1);
    await stopOld(oldB);
    await submitting;
    submitter.close();
    say(`submitted ${submitter.ackedCount}/${plan.length}; waiting for every job to end`);
    const left = await settle(superUrl, submitter.ackedCount, 300_000, false);
    check(left === 0, `every acknowledged job reached COMPLETED or DLQ (${left} not)`);

    // 5. The verdict: from the database, and the new servers' stats.
    const v = await verdict({ url: superUrl, plan, acked: submitter.acked, serverAddresses: [newC, newD].map((s) => `127.0.0.1:${s.port}`),
      runStartedAt: Date.now() - 10 * 60_000, statsTimeoutMs: 60_000, deleteOnComplete: false });
    check(submitter.ackedCount === plan.length, `every planned job acknowledged (${submitter.ackedCount}/${plan.length})`);
    check(v.lost === 0 && v.duplicates === 0, `no job lost (${v.lost}), none twice (${v.duplicates})`);
    check(v.completedTwice === 0 && v.staleResults === 0, `no job completed twice (${v.completedTwice}), no result of an older lease (${v.staleResults})`);
    check(v.notTerminal === 0 && v.dlqExact, `the DLQ is exactly the doomed jobs (${v.dlq}/${v.dlqPlanned})`);
    check(v.statsExact, `the new servers' GetQueueStats equal the database${v.statsExact ? '' : `: ${v.statsMismatches.slice(0, 3).join('; ')}`}`);
    for (const [what, list] of Object.entries(v.examples)) say(`  ${what} e.g. ${JSON.stringify(list.slice(0, 3))}`);
    await whoDidWhat(ctx, submitter, superUrl, migratedAt, check);
    // Logs, then the servers' function calls (their backends report them as they exit).
    const errorLines = servers.reduce((n, s) => n + serverLogSay(ctx, s.label), 0);
    check(errorLines === 0, `no server logged an error (${errorLines} lines)`);
    await Promise.all(servers.map((s) => s.proc.terminate(15_000)));
    const calls = (await adminQuery<{ calls: number }>(superUrl,
      `SELECT coalesce(sum(calls), 0)::int AS calls FROM pg_stat_user_functions WHERE schemaname = 'evora' AND funcname = 'audit_events_prune'`))[0]!.calls;
    check(calls > 0, `the new leader's pruner ran the audit retention (evora.audit_events_prune, migration 0022) as ${asApp ? 'evora_app' : 'the superuser'}: ${calls} calls`);
  } finally {
    submitter.stop();
    submitter.close();
    for (const w of workers.values()) await w.stop({ timeoutMs: 5000 }).catch(() => undefined);
    await Promise.all(servers.map((s) => s.proc.terminate(15_000)));
    await Promise.all(servers.map((s) => s.proc.closeLog()));
    await postgres.stop();
    rmSync(pgDir, { recursive: true, force: true });
  }
  check(unexpected.length === 0, `no server exited on its own (${unexpected.length})`);
  say(failures.length === 0 ? '\nOK' : `\nFAILED: ${failures.join('; ')}`);
  return failures.length === 0 ? 0 : 1;
}

/** Who submitted, claimed and completed what, by phase and worker; the old servers must have worked on the new schema. */
async function whoDidWhat(ctx: RunContext, submitter: UpgradeSubmitter, superUrl: string, migratedAt: Date, check: (ok: boolean, what: string) => void) {
  const { say } = ctx;
  say('\njobs acknowledged, by phase and server (through this SDK + the old SDK):');
  const keys = [...submitter.byPhase.keys()];
  for (const p of [...new Set(keys.map((k) => k.split(' | ')[0]!))]) {
    const labels = [...new Set(keys.filter((k) => k.startsWith(`${p} | `)).map((k) => k.split(' | ')[1]!.replace(' (old SDK)', '')))].sort();
    const n = (k: string) => submitter.byPhase.get(k) ?? 0;
    say(`  ${p}: ${labels.map((l) => `${l} ${n(`${p} | ${l}`)} + ${n(`${p} | ${l} (old SDK)`)}`).join(', ')}`);
  }
  if (submitter.errors.size) say(`failed submit calls (sent again to the next server): ${JSON.stringify(Object.fromEntries(submitter.errors))}`);
  const byWorker = await adminQuery<{ worker: string; completed: number; claimed_after: number; completed_after: number; attempts: number }>(superUrl,
    `SELECT result->>'worker' AS worker, count(*)::int AS completed,
            count(*) FILTER (WHERE started_at > $1)::int AS claimed_after, count(*) FILTER (WHERE finished_at > $1)::int AS completed_after,
            sum(attempt)::int AS attempts
     FROM evora.jobs WHERE state = 'COMPLETED' GROUP BY 1 ORDER BY 1`, [migratedAt]);
  say('completed jobs by worker (claimed / completed after the migration committed; attempts):');
  for (const r of byWorker) say(`  ${r.worker}: ${r.completed} (${r.claimed_after} / ${r.completed_after}; ${r.attempts})`);
  const oldWorkers = byWorker.filter((r) => r.worker.startsWith('w-old'));
  const sum = (f: (r: (typeof byWorker)[number]) => number) => oldWorkers.reduce((s, r) => s + f(r), 0);
  check(sum((r) => r.claimed_after) > 0, `the old servers' workers were given jobs claimed after the migration (${sum((r) => r.claimed_after)}; ` +
    `${sum((r) => r.completed_after)} completed after it)`);
  const oldSubmits = [...submitter.byPhase].filter(([k]) => /^(old only, new schema|old and new|old-A stopped) \| old-/.test(k)).reduce((s, [, n]) => s + n, 0);
  check(oldSubmits > 0, `the old servers acknowledged submissions after the migration (${oldSubmits})`);
  const retried = await adminQuery<{ n: number }>(superUrl, `SELECT count(*)::int AS n FROM evora.jobs WHERE state = 'COMPLETED' AND type <> 'flaky' AND attempt > 1`);
  say(`jobs (not flaky) that needed more than one attempt: ${retried[0]!.n}`);
}

/** One line on a server's log: leaderships, errors and warnings (dead letters, which the doomed jobs make, left out); returns its error lines. */
function serverLogSay(ctx: RunContext, label: string): number {
  const log = readFileSync(join(ctx.runDir, `${label}.log`), 'utf8').split('\n');
  const leader = log.filter((l) => l.includes('"elected leader"') && l.includes('"leader":true')).length;
  const errors = log.filter((l) => /"level":(50|60)/.test(l));
  const warnings = log.filter((l) => /"level":40/.test(l) && !l.includes('"job dead-lettered"'));
  ctx.say(`${label}: elected leader ${leader}x; ${errors.length} error lines${errors.length ? `, e.g. ${errors[0]!.slice(0, 300)}` : ''}; ` +
    `${warnings.length} warnings${warnings.length ? `, e.g. ${warnings[0]!.slice(0, 300)}` : ''}`);
  return errors.length;
}

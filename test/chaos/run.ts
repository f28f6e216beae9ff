import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../src/server/embedded-postgres.js';
import { EvoraClient } from '../../src/sdk/index.js';
import { settle, stuckDiagnostics, verdict, type Verdict } from './checks.js';
import { FAULT_KINDS, FaultRunner } from './faults.js';
import { CHAOS_QUEUES, jobsPlan } from './jobs.js';
import { durationFormat, optionsParse, Prng } from './options.js';
import { ChaosPostgres } from './postgres.js';
import { ChaosProcess, type UnexpectedExit } from './procs.js';
import { Submitter } from './submitter.js';

/**
 * `npm run chaos`: the fault suite (docs/chaos.md). Starts a private PostgreSQL, several
 * Evora servers on it and SDK worker processes, submits the planned jobs while the fault
 * schedule kills and freezes processes and disturbs the database, lets every job finish,
 * checks the outcome from the database, and prints one line. Exits 0 only if every check is
 * 0 and exact, every fault kind reached its count, and no process exited on its own.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const opts = optionsParse(process.argv.slice(2));
const started = Date.now();
const rng = new Prng(opts.seed);
const runDir = mkdtempSync(join(tmpdir(), `evora-chaos-${opts.seed}-`));
const pgDir = mkdtempSync(join(tmpdir(), 'evora-chaos-pg-'));
const say = (line: string) => process.stderr.write(`chaos: ${line}\n`);
say(`seed=${opts.seed} jobs=${opts.jobs} faults/kind=${opts.faultsPerKind} servers=${opts.servers} workers=${opts.workers} ` +
  `server=${opts.serverCmd.join(' ')}${opts.deleteOnComplete ? ' queues=delete_on_complete' : ''}`);
say(`run folder (logs, summary.json): ${runDir}`);

const unexpected: UnexpectedExit[] = [];
const onUnexpected = (e: UnexpectedExit) => {
  unexpected.push(e);
  say(`UNEXPECTED EXIT of ${e.name} (pid ${e.pid}, code ${e.code}, signal ${e.signal}) at +${(e.atMs / 1000).toFixed(1)}s`);
};
const postgres = new ChaosPostgres(pgDir, await freePort(), join(runDir, 'postgres.log'), 100, (pid) =>
  onUnexpected({ name: 'postgres', pid, code: null, signal: null, atMs: Date.now() - started, phase: 'run', logTail: '',
    cause: 'postmaster found dead' }));
const zombies = { attempted: 0, refused: 0, accepted: 0, error: 0, byCode: {} as Record<string, number> };
/** Each worker's last word on its slots (WorkerStats), for the diagnostics of a run that does not settle. */
const workerStats = new Map<string, object>();

const servers: ChaosProcess[] = [];
const workers: ChaosProcess[] = [];
let faults: FaultRunner | null = null;
let diagnostics: unknown = null;
let submitter: Submitter | null = null;

/** Kills every process of the run at once (Ctrl-C, a failure of the orchestrator itself). */
async function cleanupNow(): Promise<void> {
  faults?.stop();
  submitter?.stop();
  for (const p of [...workers, ...servers]) p.killNow();
  postgres.killNow(await postgres.postmasterPid());
  await new Promise((r) => setTimeout(r, 500)); // the backends follow the postmaster
}
// Whatever ends this process, no server or worker outlives it (synchronous kills only).
process.once('exit', () => {
  for (const p of [...workers, ...servers]) p.killNow();
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    say(`${signal}: killing every process of the run`);
    void cleanupNow().finally(() => {
      if (!opts.keepData) rmSync(pgDir, { recursive: true, force: true });
      process.exit(130);
    });
  });
}

async function main(): Promise<number> {
  await postgres.start();
  say(`PostgreSQL on port ${postgres.port} (data ${pgDir})`);

  const ports = await Promise.all(Array.from({ length: opts.servers }, () => freePort()));
  const [cmd, ...baseArgs] = opts.serverCmd as [string, ...string[]];
  ports.forEach((port, i) => {
    servers.push(new ChaosProcess({
      name: `server-${i}`,
      command: cmd,
      args: [...baseArgs, '--port', String(port), '--sweep-interval-ms', '500', '--election-interval-ms', '1000',
        '--project-interval-ms', '500', '--poll-interval-ms', '500', '--shutdown-timeout-ms', '3000', '--log-level', 'info'],
      env: { ...process.env, DATABASE_URL: postgres.url, EVORA_LOG_PRETTY: '0', EVORA_HTTP_PORT: '0' },
      logPath: join(runDir, `server-${i}.log`),
      readyPattern: /Evora listening/,
    }, onUnexpected));
  });
  const addresses = ports.map((p) => `127.0.0.1:${p}`);
  await servers[0]!.start(); // the first one migrates the database alone
  await Promise.all(servers.slice(1).map((s) => s.start()));
  say(`servers on ${addresses.join(', ')}`);

  const admin = new EvoraClient({ address: addresses[0]!, deadlineMs: 5000 });
  for (const q of CHAOS_QUEUES) {
    await admin.upsertQueue(q, { leaseSeconds: opts.leaseSeconds, maxAttempts: 25,
      backoff: { kind: 'fixed', baseSeconds: 0.2, capSeconds: 1, jitter: 0 }, deleteOnComplete: opts.deleteOnComplete });
  }
  admin.close();

  for (let i = 0; i < opts.workers; i++) {
    workers.push(new ChaosProcess({
      name: `worker-${i}`,
      command: process.execPath,
      args: ['--import', 'tsx', join(root, 'test/chaos/worker.ts')],
      env: { ...process.env, CHAOS_ADDRESS: addresses[i % addresses.length], CHAOS_SLOTS: String(rng.int(8, 32)),
        CHAOS_INDEX: String(i), CHAOS_LEASE_MS: String(opts.leaseSeconds * 1000) },
      logPath: join(runDir, `worker-${i}.log`),
      readyPattern: /"msg":"ready"/,
      onMessage: (m) => {
        const msg = m as { t?: string; outcome?: 'refused' | 'accepted' | 'error'; code?: string; stats?: object };
        if (msg.t === 'stats' && msg.stats) workerStats.set(`worker-${i}`, msg.stats);
        if (msg.t !== 'zombie' || !msg.outcome) return;
        zombies.attempted++;
        zombies[msg.outcome]++;
        zombies.byCode[msg.code ?? '?'] = (zombies.byCode[msg.code ?? '?'] ?? 0) + 1;
      },
    }, onUnexpected));
  }
  await Promise.all(workers.map((w) => w.start()));
  say(`${workers.length} workers up; faults and submissions start`);

  const plan = jobsPlan(opts.jobs, opts.seed);
  faults = new FaultRunner({ postgres, servers, workers, leaseSeconds: opts.leaseSeconds, logPath: join(runDir, 'faults.log') },
    rng.fork(0xfa17), opts.faultsPerKind, opts.gapMs);
  const f = faults;
  let faultsDone = false;
  submitter = new Submitter(plan, addresses, rng.fork(0x5b), () => (faultsDone ? 1 : Math.min(1, f.progress + 0.1)));
  const sub = submitter;
  const progress = setInterval(() => {
    const c = f.stats.counts;
    say(`+${durationFormat(Date.now() - started)} submitted ${sub.ackedCount}/${opts.jobs}, faults ` +
      FAULT_KINDS.map((k) => `${k}=${c[k]}`).join(' ') + `, zombies ${zombies.attempted}, unexpected exits ${unexpected.length}`);
  }, 10_000);
  try {
    const submitting = sub.run();
    await f.run();
    faultsDone = true;
    say(`faults done at +${durationFormat(Date.now() - started)}; settling`);
    const submitDeadline = setTimeout(() => sub.stop(), opts.settleTimeoutMs);
    await submitting;
    clearTimeout(submitDeadline);
    sub.close();

    // Everything up again, then wait for every job to finish.
    for (const p of [...servers, ...workers]) {
      p.thaw();
      if (!p.alive) await p.start().catch(() => undefined);
    }
    const stuck = await settle(postgres.url, sub.ackedCount, opts.settleTimeoutMs, opts.deleteOnComplete);
    say(`settled at +${durationFormat(Date.now() - started)} (${stuck} jobs not terminal); checking`);
    if (stuck > 0) {
      diagnostics = await stuckDiagnostics(postgres.url, addresses, workerStats);
      say(`not settled: ${JSON.stringify(diagnostics)}`);
    }
  } finally {
    clearInterval(progress);
  }

  const v = await verdict({ url: postgres.url, plan, acked: sub.acked, serverAddresses: addresses, runStartedAt: started,
    statsTimeoutMs: 60_000, deleteOnComplete: opts.deleteOnComplete });

  await Promise.all(workers.map((w) => w.terminate(15_000)));
  await Promise.all(servers.map((s) => s.terminate(15_000)));
  await postgres.stop();
  await Promise.all([...workers, ...servers].map((p) => p.closeLog()));
  await new Promise((r) => setTimeout(r, 400)); // the last exits' log tails

  return report(v, sub, f);
}

function report(v: Verdict, sub: Submitter, f: FaultRunner): number {
  const c = f.stats.counts;
  const faultsOk = FAULT_KINDS.every((k) => c[k] >= opts.faultsPerKind);
  const allAcked = sub.ackedCount === opts.jobs;
  const ok = allAcked && v.lost === 0 && v.duplicates === 0 && v.completedTwice === 0 && v.staleResults === 0 &&
    v.notTerminal === 0 && v.statsExact && v.dlqExact && unexpected.length === 0 && faultsOk;
  const line =
    `chaos: jobs=${allAcked ? opts.jobs : `${sub.ackedCount}/${opts.jobs}`} lost=${v.lost} duplicates=${v.duplicates} ` +
    `completed_twice=${v.completedTwice} stale_results=${v.staleResults} not_terminal=${v.notTerminal} ` +
    `stats=${v.statsExact ? 'exact' : `MISMATCH(${v.statsMismatches.length})`} dlq=${v.dlq}/${v.dlqPlanned}${v.dlqExact ? '' : '!'} ` +
    `unexpected_exits=${unexpected.length} | faults ${FAULT_KINDS.map((k) => `${k}=${c[k]}`).join(' ')} | ` +
    `zombie_completions=${zombies.attempted} refused=${zombies.refused} | ` +
    (opts.deleteOnComplete ? `delete_on_complete deleted=${v.deleted} resubmitted=${v.resubmitted} | ` : '') +
    `${durationFormat(Date.now() - started)} seed=${opts.seed} ` +
    (ok ? 'OK' : 'FAILED');
  const summary = {
    ok, line, options: opts, runDir, durationMs: Date.now() - started,
    verdict: v, diagnostics, faults: f.stats, zombies, submit: sub.stats, ackedKeys: sub.ackedCount, unexpectedExits: unexpected,
    processStarts: Object.fromEntries([...servers, ...workers].map((p) => [p.name, p.starts])), postgresRestarts: postgres.restarts,
  };
  writeFileSync(join(runDir, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`);
  for (const m of v.statsMismatches.slice(0, 10)) say(`stats: ${m}`);
  for (const [what, list] of Object.entries(v.examples)) say(`${what} e.g. ${JSON.stringify(list.slice(0, 3))}`);
  const byCause = new Map<string, number>();
  for (const e of unexpected) {
    const k = `${e.name.replace(/-\d+$/, '')}${e.phase === 'shutdown' ? ' on shutdown' : ''}: ${e.cause.slice(0, 120)}`;
    byCause.set(k, (byCause.get(k) ?? 0) + 1);
  }
  for (const [k, n] of byCause) say(`unexpected exits x${n}: ${k}`);
  say(`submit errors by status: ${JSON.stringify(sub.stats.errorsByCode)} over ${sub.stats.calls} calls`);
  process.stdout.write(`${line}\n`);
  return ok ? 0 : 1;
}

let code = 1;
try {
  code = await main();
} catch (err) {
  say(`the run itself failed: ${(err as Error).stack ?? String(err)}`);
  await cleanupNow();
} finally {
  if (!opts.keepData) rmSync(pgDir, { recursive: true, force: true });
  say(`logs kept in ${runDir}`);
}
process.exit(code);

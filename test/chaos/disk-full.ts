import { execFileSync } from 'node:child_process';
import { appendFileSync, closeSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { EvoraApiError, EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';
import { freePort, logLines, privatePostgres, serveChild, type PrivatePostgres, type ServeChild } from '../helpers/private-pg.js';

/**
 * `npm run chaos:disk-full` (docs/chaos.md, "Disk full"): PostgreSQL's disk fills up under a
 * running `evora serve`. Needs root and the right to mount (a tmpfs holds the cluster's data,
 * so "full" is real and small): where mount is refused it says so and exits 2, so it is not
 * part of `npm test` (CI containers may lack the permission). Run from the repository root.
 *
 * 1. Full data files: writes fail `53100 could not extend file ...: No space left on device`
 *    while reads go on. Calls that write are answered UNAVAILABLE with one line, `database
 *    out of disk space: ...`; the log has one warn line for it, however many statements are
 *    refused; once space is freed everything is written, every job completed once.
 * 2. Full WAL: PostgreSQL PANICs (it cannot create a WAL segment), its crash recovery fails
 *    for the same want of space and the postmaster exits. Calls are answered UNAVAILABLE,
 *    the outage is one warn line; once space is freed and PostgreSQL started again (an
 *    operator's restart; the embedded one restarts by itself), the server serves again
 *    without a restart of its own, nothing acknowledged is lost (the cluster runs with
 *    fsync and synchronous_commit on), every job completed once.
 *
 * Prints one line of checks and exits 0 when all pass, 1 otherwise; keeps the run folder
 * (server.log, postgres.log) it names.
 */

/** The tmpfs: the cluster takes about 40 MB; the rest is filled on purpose. */
const TMPFS_SIZE = '160m';
const INTERVALS = ['--poll-interval-ms', '200', '--sweep-interval-ms', '200', '--election-interval-ms', '200', '--project-interval-ms', '200'];
/** privatePostgres runs throwaway settings; these (later flags win) make a commit durable. */
const DURABLE = ['-c', 'fsync=on', '-c', 'synchronous_commit=on', '-c', 'full_page_writes=on'];
const NO_SPACE = /No space left on device/;
/** The whole run, at most (it takes about 40 s). */
const RUN_BOUND_MS = 5 * 60_000;

/** The postmaster of the cluster on the tmpfs, from its postmaster.pid (none: not running). */
function postmasterPids(): number[] {
  return readdirSync(mnt).flatMap((d) => {
    const pid = Number(readFileSafe(join(mnt, d, 'pgdata', 'postmaster.pid')).split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? [pid] : [];
  });
}

function readFileSafe(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

const say = (line: string) => process.stderr.write(`disk-full: ${line}\n`);

if (process.getuid?.() !== 0) {
  say('skipped: needs root (it mounts a tmpfs for the cluster)');
  process.exit(2);
}
const mnt = mkdtempSync(join(tmpdir(), 'evora-disk-full-mnt-'));
try {
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${TMPFS_SIZE},mode=0755`, 'tmpfs', mnt], { stdio: 'pipe' });
} catch (err) {
  rmSync(mnt, { recursive: true, force: true });
  say(`skipped: mount is not permitted here: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`);
  process.exit(2);
}
const runDir = mkdtempSync(join(tmpdir(), 'evora-disk-full-'));
/** Whatever hangs, the run ends: its processes killed, the tmpfs let go. */
const watchdog = setTimeout(() => {
  say(`FAILED: no end after ${RUN_BOUND_MS / 1000} s; killing the server and PostgreSQL (run folder: ${runDir})`);
  srv?.child.kill('SIGKILL');
  for (const pid of postmasterPids()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  execFileSync('umount', ['-l', mnt]);
  process.exit(1);
}, RUN_BOUND_MS);
watchdog.unref();
say(`run folder (server.log, postgres.log): ${runDir}`);

/** The checks, in order: name → passed, and what was seen when not. */
const checks: { name: string; ok: boolean; seen: string }[] = [];
function check(name: string, ok: boolean, seen: unknown = ''): void {
  checks.push({ name, ok, seen: ok ? '' : typeof seen === 'string' ? seen : JSON.stringify(seen) });
  say(`${ok ? 'ok  ' : 'FAIL'} ${name}${ok ? '' : `: ${checks.at(-1)!.seen}`}`);
}

/** Fills the file system of `dir` to the last block; returns the filler, whose removal frees it all. */
function fill(dir: string): string {
  const path = join(dir, 'filler');
  const fd = openSync(path, 'w');
  try {
    for (const size of [1 << 20, 4096]) {
      const chunk = Buffer.alloc(size);
      try {
        for (;;) writeSync(fd, chunk);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
      }
    }
  } finally {
    closeSync(fd);
  }
  return path;
}

/** What `p` failed with (null: it succeeded). */
async function failure(p: Promise<unknown>): Promise<EvoraApiError | null> {
  return p.then(
    () => null,
    (err: unknown) => {
      if (err instanceof EvoraApiError) return err;
      throw err;
    },
  );
}

/** PostgreSQL's own log lines. */
const pgLog: string[] = [];
let pgc: PrivatePostgres | null = null;
let srv: ServeChild | null = null;
let client: EvoraClient | null = null;
let worker: EvoraWorker | null = null;
let admin: pg.Client | null = null;
const started = Date.now();
try {
  pgc = await privatePostgres({
    parentDir: mnt,
    postgresFlags: DURABLE,
    onLog: (line) => {
      pgLog.push(line);
      appendFileSync(join(runDir, 'postgres.log'), `${line}\n`);
    },
  });
  const url = await pgc.databaseCreate();
  const port = await freePort();
  srv = serveChild(['--port', String(port), ...INTERVALS], { DATABASE_URL: url, EVORA_LOG_LEVEL: 'debug' });
  const server = srv;
  await waitFor(() => server.output().includes('Evora listening'), { timeoutMs: 60_000, what: 'the server to listen' });
  client = new EvoraClient({ address: `127.0.0.1:${port}`, deadlineMs: 10_000 });
  const api = client;

  // The jobs: their handlers wait for their phase's gate; every acknowledged id must end
  // COMPLETED by exactly one accepted completion.
  const queue = queueName('diskfull');
  const gate = () => {
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    return { promise, resolve };
  };
  const gates = { one: gate(), two: gate() };
  const acked = new Set<string>();
  const running = { one: new Set<string>(), two: new Set<string>() };
  const accepted = new Map<string, number>();
  worker = new EvoraWorker({ address: api.address, queues: [queue], slots: 4 });
  worker.handle<{ phase: 'one' | 'two' }>('t', async (job) => {
    running[job.payload.phase].add(job.id);
    await gates[job.payload.phase].promise;
    return { pad: 'r'.repeat(1000) };
  });
  worker.on('jobFinished', ({ job, accepted: yes }) => {
    if (yes) accepted.set(job.id, (accepted.get(job.id) ?? 0) + 1);
  });
  await worker.start();
  const submit = async (phase: 'one' | 'two', n: number, pad = 0) => {
    const results = await api.submitMany(Array.from({ length: n }, () => ({ queue, type: 't', payload: { phase, pad: 'p'.repeat(pad) } })));
    for (const r of results) acked.add(r.job.id);
    return results;
  };
  const allCompletedOnce = async (what: string) => {
    await waitFor(async () => (await Promise.all([...acked].map((id) => api.get(id).catch(() => null)))).every((j) => j?.state === 'COMPLETED'), {
      timeoutMs: 60_000,
      what,
    }).then(
      () => check(`${what}`, true),
      (err: unknown) => check(`${what}`, false, (err as Error).message),
    );
    const twice = [...acked].filter((id) => accepted.get(id) !== 1);
    check(`${what}: each by one accepted completion`, twice.length === 0, { jobs: twice.length, example: twice[0] });
  };
  const warnsSince = (from: number) => logLines(server.output().slice(from)).filter((l) => l.level >= 40).map((l) => l.msg);

  // ---- 1. Data files full: 53100 on writes, reads go on.
  await submit('one', 4);
  await waitFor(() => running.one.size === 4, { what: 'four jobs running' });
  let from = server.output().length;
  let filler = fill(mnt);
  // Writes until one is refused (the free room left in the tables' pages goes first).
  const refused = await waitFor(async () => failure(submit('one', 20, 2000)), { timeoutMs: 30_000, what: 'a submit refused' }).catch(() => null);
  check('full data files: a submit is UNAVAILABLE', refused?.code === 14, refused?.details ?? 'never refused');
  check(
    'full data files: its message is one line, "database out of disk space: ..."',
    /^database out of disk space: [^\n]+$/.test(refused?.details ?? '') && NO_SPACE.test(refused?.details ?? ''),
    refused?.details,
  );
  const read = await failure(api.get([...acked][0]!));
  check('full data files: reads go on', read === null, read?.details);
  gates.one.resolve(); // their completions meet the full disk
  await waitFor(() => logLines(server.output().slice(from)).filter((l) => NO_SPACE.test(String(l.reason ?? ''))).length >= 10, {
    timeoutMs: 30_000,
    what: 'refused statements',
  });
  check('full data files: one warn line, not one per refused statement', warnsSince(from).length === 1 && /^database out of disk space: /.test(warnsSince(from)[0]!), warnsSince(from));
  check('full data files: the server runs on', server.child.exitCode === null);
  rmSync(filler);
  await allCompletedOnce('full data files, space freed: every job completed');

  // ---- 2. WAL full: PANIC, failed crash recovery, the postmaster gone.
  admin = new pg.Client({ connectionString: url, application_name: 'evora-test-admin' });
  admin.on('error', () => undefined);
  await admin.connect();
  await admin.query('CREATE TABLE wal_maker (id int PRIMARY KEY, n int)');
  await admin.query('INSERT INTO wal_maker VALUES (1, 0)');
  await submit('two', 4);
  await waitFor(() => running.two.size === 4, { what: 'four more jobs running' });
  const beforePanic = new Set(acked);
  from = server.output().length;
  filler = fill(mnt);
  // A WAL segment switch with a record after it: the next segment must be created, and cannot.
  const maker = admin;
  await waitFor(
    async () => {
      try {
        await maker.query('SELECT pg_switch_wal()');
        await maker.query('UPDATE wal_maker SET n = n + 1');
        return false;
      } catch {
        return true; // the PANIC, or a refusal before it (checked below)
      }
    },
    { timeoutMs: 30_000, what: 'PostgreSQL to PANIC' },
  ).catch(() => undefined);
  // The postmaster restarts the backends and runs crash recovery, which fails for want of
  // space too, and exits. (Stopping it while that recovery runs can leave it hanging, with
  // PostgreSQL 18: so the script waits for its exit first.)
  const panicAt = pgLog.findIndex((l) => / PANIC: .*No space left on device/.test(l));
  const down = await waitFor(() => panicAt >= 0 && pgLog.slice(panicAt).some((l) => / LOG: +database system is shut down/.test(l)), {
    timeoutMs: 30_000,
    what: 'PostgreSQL to PANIC and exit',
  }).catch(() => false);
  check('full WAL: PostgreSQL PANICs, its crash recovery fails, it exits', down, pgLog.slice(Math.max(panicAt, 0)).slice(0, 5));
  const outage = await failure(api.get([...acked][0]!));
  check('full WAL: calls are UNAVAILABLE, one line', outage?.code === 14 && /^database unavailable: [^\n]+$/.test(outage.details), outage?.details ?? 'answered');
  gates.two.resolve(); // their completions meet the outage
  check('full WAL: one warn line for the outage', warnsSince(from).filter((m) => m.startsWith('database unavailable: ')).length === 1, warnsSince(from));
  check('full WAL: the server runs on', server.child.exitCode === null);
  rmSync(filler);
  await admin.end().catch(() => undefined);
  admin = null;
  await pgc.stop();
  await pgc.start(); // crash recovery, now with room for it
  const back = await waitFor(async () => (await failure(api.get([...acked][0]!))) === null, { timeoutMs: 60_000, what: 'the server to serve again' }).catch(() => false);
  check('full WAL, space freed, PostgreSQL started again: the server serves again', back);
  const missing = [];
  for (const id of beforePanic) if ((await failure(api.get(id)))?.codeName === 'NOT_FOUND') missing.push(id);
  check('full WAL: no acknowledged job lost', missing.length === 0, missing);
  await allCompletedOnce('full WAL, recovered: every job completed');
  const errors = logLines(server.output()).filter((l) => l.level >= 50);
  check('nothing logged at error level', errors.length === 0, errors.slice(0, 2));
} catch (err) {
  check('the run itself', false, (err as Error).stack ?? String(err));
} finally {
  await worker?.stop({ timeoutMs: 0, graceMs: 0 }).catch(() => undefined);
  client?.close();
  await admin?.end().catch(() => undefined);
  const code = await srv?.stop();
  if (srv) check('the server exits 0 on SIGTERM', code === 0, code);
  if (srv) writeFileSync(join(runDir, 'server.log'), srv.output());
  await pgc?.close().catch(() => undefined);
  try {
    execFileSync('umount', [mnt]);
    rmSync(mnt, { recursive: true, force: true });
  } catch (err) {
    say(`could not unmount ${mnt}: ${(err as Error).message}`);
  }
}
const failed = checks.filter((c) => !c.ok);
process.stdout.write(
  `disk-full: checks=${checks.length} failed=${failed.length}${failed.length ? ` (${failed.map((c) => c.name).join('; ')})` : ''} | ` +
    `${((Date.now() - started) / 1000).toFixed(0)}s ${failed.length ? 'FAILED' : 'OK'}\n`,
);
process.exit(failed.length ? 1 : 0);

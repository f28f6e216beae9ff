import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { MongoClient } from 'mongodb';
import { freePort } from '../../src/server/embedded-postgres.js';

/**
 * FerretDB, the MongoDB-protocol server the telemetry tests run against (no mongod can be
 * installed here; docs/ferretdb.md). Each call of `ferretdbStart` runs a private FerretDB
 * with the SQLite backend in a fresh temporary folder, on a free port of 127.0.0.1.
 *
 * Where the binary is looked for, in order:
 *   1. $EVORA_FERRETDB_BIN (then only there; any FerretDB v1 is accepted),
 *   2. where scripts/install-ferretdb.sh puts it: $GOBIN, else $(go env GOPATH)/bin,
 *   3. `ferretdb` on PATH.
 * Outside $EVORA_FERRETDB_BIN only the pinned version is used.
 *
 * Missing binary: locally the tests are skipped with a one-line reason; with
 * EVORA_TELEMETRY_REQUIRED=1 (CI, after scripts/install-ferretdb.sh) `ferretdbStart` throws.
 */

/** The pinned release; keep in step with tools/ferretdb/go.mod. */
export const FERRETDB_VERSION = 'v1.24.2';
/** Set by CI: a missing FerretDB fails the tests instead of skipping them. */
export const TELEMETRY_REQUIRED = process.env.EVORA_TELEMETRY_REQUIRED === '1';
const INSTALL_HINT = 'run scripts/install-ferretdb.sh';

export interface FerretdbHandle {
  /** `mongodb://127.0.0.1:PORT/`: the driver's default database is then `test`. */
  url: string;
  port: number;
  /** Path of the binary that runs. */
  bin: string;
  /** What the server has written to stderr so far (its log, at --log-level and above). */
  log(): string;
  /** Stops the server process but keeps its data (the telemetry store is down). */
  suspend(): Promise<void>;
  /**
   * Kills the server process with SIGKILL, as a crash would, and keeps its data: what it
   * had committed survives, requests in flight get no answer. `resume()` starts it again.
   */
  crash(): Promise<void>;
  /** Starts it again on the same port over the same data. */
  resume(): Promise<void>;
  /** Stops the server (SIGTERM, then SIGKILL) and removes its folder. Safe to call twice. */
  stop(): Promise<void>;
}

type Found = { ok: true; path: string; version: string } | { ok: false; reason: string };
let found: Found | undefined;

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The version a FerretDB binary reports (`version: v1.24.2`), or why it could not tell. */
function probeVersion(path: string): { version: string } | { error: string } {
  try {
    const out = execFileSync(path, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 });
    const version = /^version:\s*(\S+)/m.exec(out)?.[1];
    return version ? { version } : { error: 'its --version printed no version' };
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    const first = (e.stderr || e.message).split('\n').find((l) => l.trim()) ?? 'failed';
    return { error: `its --version failed: ${first.trim()}` };
  }
}

/** Folders where scripts/install-ferretdb.sh may have put the binary. */
function installDirs(): string[] {
  if (process.env.GOBIN) return [process.env.GOBIN];
  const gopath = process.env.GOPATH?.split(delimiter)[0];
  if (gopath) return [join(gopath, 'bin')];
  try {
    // GOBIN/GOPATH may be set with `go env -w`; go prints both, one per line.
    const [gobin, gp] = execFileSync('go', ['env', 'GOBIN', 'GOPATH'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 }).split('\n');
    if (gobin?.trim()) return [gobin.trim()];
    const first = gp?.trim().split(delimiter)[0];
    if (first) return [join(first, 'bin')];
  } catch {
    // no Go: fall back to its default GOPATH
  }
  return [join(homedir(), 'go', 'bin')];
}

/** Finds a usable FerretDB binary (cached for the process). */
export function findFerretdb(): Found {
  if (found) return found;
  const fromEnv = process.env.EVORA_FERRETDB_BIN;
  if (fromEnv) {
    if (!isExecutable(fromEnv)) return (found = { ok: false, reason: `EVORA_FERRETDB_BIN=${fromEnv} is not an executable file` });
    const v = probeVersion(fromEnv);
    if ('error' in v) return (found = { ok: false, reason: `EVORA_FERRETDB_BIN=${fromEnv}: ${v.error}` });
    if (!v.version.startsWith('v1.')) {
      return (found = { ok: false, reason: `EVORA_FERRETDB_BIN=${fromEnv} is FerretDB ${v.version}; the tests need v1 (SQLite backend)` });
    }
    return (found = { ok: true, path: fromEnv, version: v.version });
  }
  const pathDirs = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  const candidates = [...installDirs(), ...pathDirs].map((d) => join(d, 'ferretdb'));
  const rejected: string[] = [];
  for (const path of [...new Set(candidates)]) {
    if (!existsSync(path) || !isExecutable(path)) continue;
    const v = probeVersion(path);
    if ('error' in v) rejected.push(`${path}: ${v.error}`);
    else if (v.version !== FERRETDB_VERSION) rejected.push(`${path} is ${v.version}`);
    else return (found = { ok: true, path, version: v.version });
  }
  const where = `no FerretDB ${FERRETDB_VERSION} in ${installDirs().join(', ')} or on PATH`;
  return (found = { ok: false, reason: `${where}${rejected.length ? ` (${rejected.join('; ')})` : ''}; ${INSTALL_HINT}` });
}

/** Why FerretDB cannot be started (one line), or null when it can. */
export function ferretdbMissingReason(): string | null {
  const f = findFerretdb();
  return f.ok ? null : f.reason;
}

/**
 * For `describe.skipIf(skipWithoutFerretdb())`: true when the binary is missing and the
 * tests are not required (the reason goes to stderr once); false when it is there, and
 * also when EVORA_TELEMETRY_REQUIRED=1, so that `ferretdbStart` fails the tests instead.
 */
let warned = false;
export function skipWithoutFerretdb(): boolean {
  const reason = ferretdbMissingReason();
  if (reason === null || TELEMETRY_REQUIRED) return false;
  if (!warned) console.warn(`ferretdb: skipping: ${reason}`);
  warned = true;
  return true;
}

export interface FerretdbStartOptions {
  /** How long to wait for the server to answer a ping (default 30 s). */
  readyTimeoutMs?: number;
  /** FerretDB's --log-level (default `error`: at `warn` it logs every error reply in full). */
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
}

/**
 * Starts a private FerretDB (SQLite backend, telemetry off, state and data in a fresh
 * temporary folder) and resolves once it answers a `ping` through the driver. Null when
 * the binary is missing (see `ferretdbMissingReason`), unless EVORA_TELEMETRY_REQUIRED=1,
 * when it throws.
 */
export async function ferretdbStart(opts: FerretdbStartOptions = {}): Promise<FerretdbHandle | null> {
  const f = findFerretdb();
  if (!f.ok) {
    if (TELEMETRY_REQUIRED) throw new Error(`EVORA_TELEMETRY_REQUIRED=1 but FerretDB is missing: ${f.reason}`);
    return null;
  }
  // freePort() closes its probe before FerretDB binds, so another process may take the port
  // in between: then FerretDB exits at once, and we try another.
  let lastErr: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOnce(f.path, await freePort(), opts);
    } catch (err) {
      lastErr = err;
      if (!(err instanceof PortTakenError)) throw err;
    }
  }
  throw lastErr;
}

class PortTakenError extends Error {}

async function startOnce(bin: string, port: number, opts: FerretdbStartOptions): Promise<FerretdbHandle> {
  const dir = await mkdtemp(join(tmpdir(), 'evora-ferretdb-'));
  const dataDir = join(dir, 'data');
  await mkdir(dataDir);
  const args = [
    '--handler=sqlite',
    `--sqlite-url=file:${dataDir}/`,
    `--listen-addr=127.0.0.1:${port}`,
    `--state-dir=${dir}`,
    '--telemetry=disable',
    // Its default 127.0.0.1:8088 would collide between parallel test files.
    '--debug-addr=-',
    `--log-level=${opts.logLevel ?? 'error'}`,
    '--log-format=text',
  ];
  // FERRETDB_* variables would override nothing given as a flag, but keep the child clean.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('FERRETDB_')));
  let stderr = '';
  const url = `mongodb://127.0.0.1:${port}/`;

  /** One run of the server process over the handle's folder. */
  const run = async () => {
    const child: ChildProcess = spawn(bin, args, { cwd: dir, env, stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      stderr = (stderr + d).slice(-64 * 1024);
    });
    const exited = new Promise<void>((res) => child.once('exit', () => res()));
    let spawnError: Error | null = null;
    child.once('error', (err) => (spawnError = err));
    // If the test process ends without stop(), do not leave the server running.
    const killOnExit = () => child.kill('SIGKILL');
    process.once('exit', killOnExit);
    const kill = async (signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM') => {
      process.removeListener('exit', killOnExit);
      if (child.exitCode === null && child.signalCode === null && !spawnError) {
        child.kill(signal);
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
    };
    try {
      await waitReady(url, child, () => spawnError, opts.readyTimeoutMs ?? 30_000);
    } catch (err) {
      await kill();
      throw err;
    }
    return kill;
  };

  let kill: ((signal?: 'SIGTERM' | 'SIGKILL') => Promise<void>) | null = null;
  try {
    kill = await run();
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    if (/address already in use/i.test(stderr)) throw new PortTakenError(`port ${port} was taken`);
    const tail = stderr.trim().split('\n').slice(-10).join('\n');
    throw new Error(`FerretDB (${bin}) did not start: ${(err as Error).message}${tail ? `\n${tail}` : ''}`);
  }

  let stopping: Promise<void> | null = null;
  return {
    url,
    port,
    bin,
    log: () => stderr,
    suspend: async () => {
      await kill?.();
      kill = null;
    },
    crash: async () => {
      await kill?.('SIGKILL');
      kill = null;
    },
    resume: async () => {
      if (!kill) kill = await run();
    },
    stop: () =>
      (stopping ??= (async () => {
        await kill?.();
        kill = null;
        await rm(dir, { recursive: true, force: true });
      })()),
  };
}

/** Pings through the driver until it answers, the process ends, or the time is up. */
async function waitReady(url: string, child: ChildProcess, spawnError: () => Error | null, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no attempt';
  while (Date.now() < deadline) {
    const e = spawnError();
    if (e) throw e;
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`it exited (${child.exitCode ?? child.signalCode})`);
    }
    const client = new MongoClient(url, { serverSelectionTimeoutMS: 500, connectTimeoutMS: 500, directConnection: true });
    try {
      await client.connect();
      await client.db('admin').command({ ping: 1 });
      return;
    } catch (err) {
      last = (err as Error).message;
    } finally {
      await client.close().catch(() => undefined);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no answer to ping within ${timeoutMs} ms (last: ${last})`);
}

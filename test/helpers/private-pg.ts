import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { embeddedPostgresStart, freePort, type EmbeddedPostgresHandle } from '../../src/server/embedded-postgres.js';
import { withDatabase } from './global-setup.js';
import { waitFor } from './wait.js';

/**
 * A PostgreSQL of one test file's own, for faults that would hurt every other file on the
 * shared cluster: a SIGKILLed backend makes the postmaster restart every backend (crash
 * recovery), and stopping the cluster is an outage for everyone on it. Throwaway settings
 * (fsync off). `stop()` and `start()` take it down and bring it back on the same port and
 * data, as an operator's restart would; `close()` stops it and removes its folder.
 */
export interface PrivatePostgres {
  /** The `postgres` database's URL (also before the first start: the port is chosen up front). */
  url: string;
  port: number;
  start(): Promise<void>;
  stop(): Promise<void>;
  close(): Promise<void>;
  /** A fresh database on this cluster (not migrated: the server under test migrates it). */
  databaseCreate(): Promise<string>;
  /** Runs one statement on a connection of its own (the `postgres` database unless `url`). */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, params?: unknown[], url?: string): Promise<R[]>;
  /** Waits until the cluster accepts connections again (after a crash and its recovery). */
  untilAccepting(): Promise<void>;
}

const PASSWORD = 'evora';

/**
 * Makes a private cluster; `started: false` leaves it down until `start()`. `postgresFlags`
 * are added to the throwaway settings (e.g. `['-c', 'max_connections=12']`); `parentDir` is
 * where its data folder is made (default: the system's temp folder); `onLog` hears
 * PostgreSQL's own log lines.
 */
export async function privatePostgres(
  opts: { started?: boolean; postgresFlags?: string[]; parentDir?: string; onLog?: (line: string) => void } = {},
): Promise<PrivatePostgres> {
  const dataDir = await mkdtemp(join(opts.parentDir ?? tmpdir(), 'evora-test-private-pg-'));
  await chmod(dataDir, 0o755); // as root, PostgreSQL runs as the postgres OS user, which must reach pgdata/
  const port = await freePort();
  const url = `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/postgres`;
  let handle: EmbeddedPostgresHandle | null = null;
  let n = 0;
  const query = async <R extends pg.QueryResultRow>(sql: string, params: unknown[] = [], on = url): Promise<R[]> => {
    const client = new pg.Client({ connectionString: on, application_name: 'evora-test' });
    client.on('error', () => undefined); // a crash of the cluster cuts this connection too
    await client.connect();
    try {
      return (await client.query<R>(sql, params)).rows;
    } finally {
      await client.end().catch(() => undefined);
    }
  };
  const self: PrivatePostgres = {
    url,
    port,
    async start() {
      if (handle) return;
      handle = await embeddedPostgresStart({
        dataDir: join(dataDir, 'pgdata'),
        port,
        postgresFlags: ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', ...(opts.postgresFlags ?? [])],
        onLog: opts.onLog,
      });
    },
    async stop() {
      const h = handle;
      handle = null;
      await h?.stop();
    },
    async close() {
      await self.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
    async databaseCreate() {
      const name = `evora_private_${process.pid}_${++n}`;
      await query(`CREATE DATABASE ${name}`);
      return withDatabase(url, name);
    },
    query,
    async untilAccepting() {
      await waitFor(() => query('SELECT 1').then(() => true), { timeoutMs: 30_000, what: 'PostgreSQL to accept connections' });
    },
  };
  if (opts.started !== false) await self.start();
  return self;
}

/** The backends of a database whose application_name is `app`, as pg_stat_activity shows them. */
export async function backendsOf(
  pgc: PrivatePostgres,
  app: string,
): Promise<{ pid: number; state: string; wait_event_type: string | null; wait_event: string | null; query: string }[]> {
  return pgc.query(
    `SELECT pid, state, wait_event_type, wait_event, query FROM pg_stat_activity WHERE application_name = $1 ORDER BY backend_start`,
    [app],
  );
}

/** Kills a backend: as an operator would (pg_terminate_backend), or as a crash (SIGKILL of its process). */
export async function backendKill(pgc: PrivatePostgres, pid: number, how: 'terminate' | 'sigkill'): Promise<void> {
  if (how === 'terminate') await pgc.query('SELECT pg_terminate_backend($1)', [pid]);
  else process.kill(pid, 'SIGKILL'); // the cluster runs as the postgres OS user; the tests run as root
}

/** An `evora serve` child process (the most honest check that no 'error' event goes unhandled). */
export interface ServeChild {
  child: ChildProcessWithoutNullStreams;
  /** Everything it wrote, stdout and stderr. */
  output(): string;
  /** Its stderr alone. */
  stderr(): string;
  exited: Promise<number | null>;
  /** SIGTERM, and its exit code. */
  stop(): Promise<number | null>;
}

/** Starts `evora serve` (from the sources, through tsx) with `args` and extra `env`. */
export function serveChild(args: string[], env: Record<string, string>): ServeChild {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', ...args], {
    env: { ...process.env, EVORA_LOG_PRETTY: '0', EVORA_HTTP_PORT: '0', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => {
    out += d.toString();
    err += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    output: () => out,
    stderr: () => err,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** The JSON log lines of a child's output (other lines are dropped). */
export function logLines(output: string): { level: number; msg: string; [k: string]: unknown }[] {
  return output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string });
}

export { freePort };

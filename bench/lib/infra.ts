/**
 * What the harness runs besides the systems: one PostgreSQL server (embedded in a temp
 * folder unless DATABASE_URL is set) with a fresh database per system and scenario, a
 * Redis server for BullMQ when `redis-server` is on PATH, and a cleanup registry that
 * stops every process and removes every database and temp folder, also on failure.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import pg from 'pg';
import { embeddedPostgresStart, freePort, type EmbeddedPostgresHandle } from '../../src/server/embedded-postgres.js';
import { postmasterPid } from './cpu.js';
import { log, sleep } from './util.js';

// ----- cleanup ------------------------------------------------------------------------------

type Cleanup = { name: string; fn: () => Promise<void> | void };
const cleanups: Cleanup[] = [];
const children = new Set<ChildProcess>();
const tempDirs = new Set<string>();

/** Registers a cleanup step; steps run last-registered first. Returns an unregister function. */
export function onCleanup(name: string, fn: () => Promise<void> | void): () => void {
  const entry = { name, fn };
  cleanups.push(entry);
  return () => {
    const i = cleanups.indexOf(entry);
    if (i >= 0) cleanups.splice(i, 1);
  };
}

/** Tracks a child process so that cleanup (and an abrupt exit) kills it. */
export function trackChild(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Stops a child: SIGTERM, then SIGKILL after `graceMs`. Resolves when it has exited. */
export async function stopChild(child: ChildProcess, graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join('/tmp', prefix));
  tempDirs.add(dir);
  return dir;
}

let cleaning: Promise<void> | null = null;
/** Runs every cleanup step, kills what is left, removes temp folders. Safe to call twice. */
export function cleanupAll(): Promise<void> {
  cleaning ??= (async () => {
    for (const c of cleanups.splice(0).reverse()) {
      try {
        await c.fn();
      } catch (err) {
        log(`cleanup "${c.name}" failed: ${(err as Error).message}`);
      }
    }
    await Promise.all([...children].map((c) => stopChild(c, 2000)));
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
    tempDirs.clear();
  })();
  return cleaning;
}

// If the harness dies without cleaning up, at least take its children along.
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

// ----- PostgreSQL ---------------------------------------------------------------------------

export interface Postgres {
  /** Connection string of the maintenance database (used to create and drop the others). */
  adminUrl: string;
  embedded: boolean;
  /** Creates a fresh database and returns its URL (dropped at cleanup, or earlier with drop()). */
  createDatabase(name: string): Promise<string>;
  dropDatabase(name: string): Promise<void>;
  /**
   * Writes a few hundred MB of WAL in a scratch database and checkpoints, so that the first
   * scenario does not pay for what a fresh cluster does only once (creating WAL segment
   * files instead of recycling them): measured, the first burn-down on a new cluster ran
   * 30-50% slower than the next ones.
   */
  warmUp(): Promise<void>;
  /** server_version and the settings that matter for durability and speed. */
  describe(): Promise<{ version: string; settings: Record<string, string> }>;
  /** Runs SQL on the maintenance database. */
  admin: pg.Pool;
  /** The postmaster's pid (embedded cluster only; null with DATABASE_URL, which may be remote). */
  pid(): number | null;
}

export const PG_SETTINGS = [
  'fsync',
  'synchronous_commit',
  'full_page_writes',
  'wal_level',
  'shared_buffers',
  'max_wal_size',
  'checkpoint_timeout',
  'max_connections',
  'work_mem',
  'autovacuum',
] as const;

export async function postgresStart(opts: { pgStatStatements: boolean }): Promise<Postgres> {
  let url = process.env.DATABASE_URL ?? null;
  let handle: EmbeddedPostgresHandle | null = null;
  let dataDir: string | null = null;
  if (!url) {
    // The data folder goes under /tmp (not /root): as root, PostgreSQL runs as the postgres user.
    dataDir = tempDir('evora-bench-pg-');
    const flags = opts.pgStatStatements ? ['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=all'] : [];
    log(`starting embedded PostgreSQL in ${dataDir} (durable defaults${opts.pgStatStatements ? ', pg_stat_statements' : ''})`);
    handle = await embeddedPostgresStart({ dataDir, port: await freePort(), postgresFlags: flags });
    onCleanup('embedded postgres', () => handle!.stop());
    url = handle.url;
  } else {
    log('using DATABASE_URL');
  }
  const admin = new pg.Pool({ connectionString: url, max: 2 });
  admin.on('error', () => undefined);
  onCleanup('admin pool', () => admin.end());
  if (opts.pgStatStatements) await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  const created = new Set<string>();
  const dbUrl = (name: string) => {
    const u = new URL(url!);
    u.pathname = `/${name}`;
    return u.toString();
  };
  const dropDatabase = async (name: string) => {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    created.delete(name);
  };
  // With an outside server the databases must go; an embedded cluster goes whole.
  if (!handle) onCleanup('bench databases', async () => {
    for (const name of [...created]) await dropDatabase(name);
  });
  return {
    adminUrl: url,
    embedded: handle !== null,
    admin,
    async createDatabase(name) {
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.query(`CREATE DATABASE "${name}"`);
      created.add(name);
      return dbUrl(name);
    },
    dropDatabase,
    async warmUp() {
      const name = 'bench_warmup';
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.query(`CREATE DATABASE "${name}"`);
      const c = new pg.Client({ connectionString: dbUrl(name) });
      await c.connect();
      try {
        await c.query('CREATE TABLE warm (a int, b text)');
        for (let i = 0; i < 3; i++) {
          await c.query(`INSERT INTO warm SELECT g, repeat('x', 100) FROM generate_series(1, 500000) g`);
          await c.query('CHECKPOINT');
        }
      } finally {
        await c.end();
      }
      await admin.query(`DROP DATABASE "${name}"`);
      await admin.query('CHECKPOINT');
    },
    pid: () => (dataDir ? postmasterPid(dataDir) : null),
    async describe() {
      const version = (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
      const settings: Record<string, string> = {};
      for (const s of PG_SETTINGS) settings[s] = (await admin.query<Record<string, string>>(`SHOW ${s}`)).rows[0]![s]!;
      return { version, settings };
    },
  };
}

// ----- Redis --------------------------------------------------------------------------------

export type RedisPersistence = 'none' | 'everysec' | 'always';

export interface Redis {
  host: string;
  port: number;
  version: string;
  persistence: RedisPersistence;
  /** The flags it was started with (for the results page). */
  flags: string[];
  /** The redis-server process. */
  pid: number;
}

/** Finds an executable on PATH. */
export function which(cmd: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, cmd);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return null;
}

/**
 * Starts a private redis-server on a free port with its data in a temp folder.
 * `everysec` (the default): AOF on, fsync once a second (Redis' recommended durable setting);
 * `always`: AOF fsync on every write (as durable as PostgreSQL's commit); `none`: no persistence.
 */
export async function redisStart(bin: string, persistence: RedisPersistence): Promise<Redis> {
  const dir = tempDir('evora-bench-redis-');
  const port = await freePort();
  const persist =
    persistence === 'none'
      ? ['--save', '', '--appendonly', 'no']
      : ['--save', '', '--appendonly', 'yes', '--appendfsync', persistence];
  const flags = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--daemonize', 'no', '--protected-mode', 'yes', ...persist];
  const child = trackChild(spawn(bin, flags, { stdio: ['ignore', 'pipe', 'pipe'] }));
  onCleanup('redis-server', () => stopChild(child));
  const out: string[] = [];
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out.push(chunk.toString());
      if (out.join('').includes('Ready to accept connections')) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`redis-server exited (code ${code}): ${out.join('').trim().split('\n').slice(-3).join(' | ')}`)));
    setTimeout(() => reject(new Error('redis-server did not start within 10 s')), 10_000).unref();
  });
  child.stdout!.resume();
  child.stderr!.resume();
  const version = /v=(\S+)/.exec(out.join(''))?.[1] ?? /Redis version=(\S+)/.exec(out.join(''))?.[1] ?? 'unknown';
  log(`redis-server ${version} on 127.0.0.1:${port} (persistence: ${persistence})`);
  await sleep(50);
  return { host: '127.0.0.1', port, version, persistence, flags: persist.map((f) => (f === '' ? "''" : f)), pid: child.pid! };
}

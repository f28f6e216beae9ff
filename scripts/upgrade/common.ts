import { spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { embeddedPostgresStart, freePort, type EmbeddedPostgresHandle } from '../../src/server/embedded-postgres.js';

/**
 * What both runs of scripts/upgrade-check.ts share: the run folder and its output, a private
 * PostgreSQL, a CLI run of a built checkout, and loops on a connection of their own (the lock
 * watcher, the probes).
 */

/** Where a run writes its logs, and how it prints a line. */
export interface RunContext {
  runDir: string;
  say: (line: string) => void;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** A private PostgreSQL in a temp folder (the server's durable settings; functions counted for the mixed run's last check). */
export async function postgresStart(ctx: RunContext): Promise<{ pg: EmbeddedPostgresHandle; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'evora-upgrade-pg-'));
  const handle = await embeddedPostgresStart({
    dataDir: dir,
    port: await freePort(),
    postgresFlags: ['-c', 'track_functions=all'],
    onLog: (l) => appendFileSync(join(ctx.runDir, 'postgres.log'), `${l}\n`),
  });
  return { pg: handle, dir };
}

/** What a CLI run printed and how it ended. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** `node <checkout>/dist/src/cli/main.js ...args` to its end (after `timeoutMs` SIGTERM); logged to cli.log. */
export function cli(ctx: RunContext, checkout: string, args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 120_000): Promise<CliRun> {
  const started = performance.now();
  return new Promise((resolveRun) => {
    const child = spawn(process.execPath, [join(checkout, 'dist/src/cli/main.js'), ...args], {
      env: { ...process.env, EVORA_LOG_PRETTY: '0', EVORA_HTTP_PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      appendFileSync(join(ctx.runDir, 'cli.log'), `\n$ ${checkout} ${args.join(' ')}\n${stdout}${stderr}(exit ${code})\n`);
      resolveRun({ code, stdout: stdout.trim(), stderr: stderr.trim(), ms: performance.now() - started });
    });
  });
}

/** The highest migration version of a built checkout (its dist/ copy of the migrations). */
export function newestVersion(checkout: string): number {
  return Math.max(...readdirSync(join(checkout, 'dist/src/store/migrations')).map((f) => Number(/^(\d+)_/.exec(f)?.[1] ?? 0)));
}

/**
 * Runs `step` over and over (5 ms apart) on a connection of its own named `app`, until the
 * returned stop() is called; stop() resolves once the connection is closed.
 */
export function connectionLoop(url: string, app: string, step: (client: pg.Client) => Promise<void>): { stop: () => Promise<void> } {
  let stopping = false;
  const client = new pg.Client({ connectionString: url, application_name: app });
  client.on('error', () => undefined);
  const loop = (async () => {
    await client.connect();
    while (!stopping) {
      await step(client);
      await sleep(5);
    }
  })();
  return {
    stop: async () => {
      stopping = true;
      await loop.catch(() => undefined);
      await client.end().catch(() => undefined);
    },
  };
}

/** Locks seen while the migrations ran: `relation mode` held by their backend, and the other connections' lock waits. */
export interface LockWatch {
  held: Set<string>;
  longestWaitMs: number;
  waiters: Set<string>;
  samples: number;
}

/**
 * Samples pg_locks and pg_stat_activity until stopped: the relation locks of schema evora
 * that the backend named `migrationApp` holds, and how long any other backend has been
 * waiting on a lock. A sample every few ms: a migration that takes less may go unseen.
 */
export function lockWatchStart(url: string, migrationApp: string): { stop: () => Promise<LockWatch> } {
  const watch: LockWatch = { held: new Set(), longestWaitMs: 0, waiters: new Set(), samples: 0 };
  const loop = connectionLoop(url, 'upgrade-watch', async (client) => {
    const held = await client.query<{ rel: string; mode: string }>(
      `SELECT l.relation::regclass::text AS rel, l.mode FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
       WHERE a.application_name = $1 AND l.granted AND l.locktype = 'relation'
         AND l.relation IN (SELECT oid FROM pg_class WHERE relnamespace = 'evora'::regnamespace)`,
      [migrationApp],
    );
    for (const r of held.rows) watch.held.add(`${r.rel} ${r.mode}`);
    const waits = await client.query<{ app: string; ms: number; query: string }>(
      `SELECT application_name AS app, extract(epoch FROM clock_timestamp() - query_start) * 1000 AS ms, left(query, 60) AS query
       FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name <> $1`,
      [migrationApp],
    );
    for (const w of waits.rows) {
      watch.longestWaitMs = Math.max(watch.longestWaitMs, w.ms);
      watch.waiters.add(`${w.app}: ${w.query.replace(/\s+/g, ' ')}`);
    }
    watch.samples++;
  });
  return { stop: async () => (await loop.stop(), watch) };
}

/** The watch as two lines. */
export function lockWatchSay(ctx: RunContext, seen: LockWatch): void {
  ctx.say(`  the migrating backend was seen holding (${seen.samples} samples): ${[...seen.held].sort().join('; ') || 'nothing caught'}`);
  ctx.say(`  longest lock wait of another connection meanwhile: ${Math.round(seen.longestWaitMs).toLocaleString('en')} ms` +
    `${seen.waiters.size ? ` (${[...seen.waiters].slice(0, 4).join(' | ')})` : ''}`);
}

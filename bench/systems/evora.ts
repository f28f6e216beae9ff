/**
 * Evora: the server runs as its own process (`node <build>/src/cli/main.js serve`, the
 * current source compiled as it ships, bench/lib/evora-build.ts), so its CPU and memory are
 * its own and not the harness's; workers are separate processes on the build's EvoraWorker;
 * producers use the build's EvoraClient over gRPC from the harness process. With `tls` the gRPC port speaks TLS (a throwaway CA made
 * with openssl); with `token` auth is on: the workers send a worker token and the producer
 * an admin one, both inserted into the server's token table once it has migrated.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, closeSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { tokenSecretGenerate, tokenSecretHash } from '../../src/domain/auth.js';
import { freePort } from '../../src/server/embedded-postgres.js';
import { evoraBuild, evoraSdk, type EvoraBuild } from '../lib/evora-build.js';
import { onCleanup, stopChild, trackChild } from '../lib/infra.js';
import { findPgbouncer, pgbouncerStart, type Pgbouncer } from '../../test/helpers/pgbouncer.js';
import { errorText, sleep } from '../lib/util.js';
import { configWith, type OpenContext, type SystemDriver, type SystemInstance } from './types.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export const EVORA_DEFAULTS = {
  /** Worker processes (EvoraWorker each). */
  processes: 1,
  /**
   * Slots per worker process: the fleet holds at most 2,000 jobs, the bound every system
   * gets (docs/benchmarks.md); one process of 2,000 beat two of 1,000 (~10,000 vs ~9,000 jobs/s).
   */
  slots: 2000,
  /** Server settings passed as `evora serve` flags; unset ones keep the server's defaults. */
  dbPoolSize: undefined as number | undefined,
  pollIntervalMs: undefined as number | undefined,
  /** The gRPC port over TLS (EVORA_TLS_CERT/KEY from a throwaway CA). */
  tls: false,
  /** Auth on: workers with a worker token, the producer with an admin token. */
  token: false,
  /**
   * The bench queue deletes jobs at completion (Queue.delete_on_complete), as graphile-worker
   * always does; `false` keeps them COMPLETED with their results for the retention (Evora's
   * default), which costs PostgreSQL a second UPDATE per job instead of a DELETE.
   */
  deleteOnComplete: true,
  /**
   * What runs: `build` (the source compiled by tsc, as it ships) or `source` (the source
   * through tsx, as before 2026-11-28; for comparing the two).
   */
  from: 'build',
  /**
   * How the producer's single submits travel: over one SubmitJobStream (the SDK's default)
   * or, with `false`, as unary SubmitJob calls (as before 2026-11-28; for comparing the two).
   */
  submitOverStream: true,
  /**
   * `pgbouncer`: the server reaches PostgreSQL through a pgbouncer in transaction mode
   * (Debian's, as test/server/pgbouncer.test.ts runs it: its statements unnamed, LISTEN and
   * the leader lock on the direct URL; docs/store.md "Behind pgbouncer"), whose CPU is
   * counted as `pooler`; `none`: straight to PostgreSQL.
   */
  pooler: 'none',
};

function evoraVersion(): string {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  let rev = '';
  try {
    rev = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'migrations'], { cwd: ROOT, encoding: 'utf8' }).trim();
    if (dirty) rev += '+uncommitted changes in src/migrations';
  } catch {
    // not a git checkout
  }
  return rev ? `${pkg.version} (${rev})` : pkg.version;
}

export function evoraDriver(overrides: Record<string, string>): SystemDriver {
  const config = configWith(EVORA_DEFAULTS, overrides);
  const processes = Number(config.processes);
  const serverFlags: string[] = [];
  if (config.dbPoolSize !== undefined) serverFlags.push('--db-pool-size', String(config.dbPoolSize));
  if (config.pollIntervalMs !== undefined) serverFlags.push('--poll-interval-ms', String(config.pollIntervalMs));
  const security = { tls: config.tls === true, token: config.token === true };
  if (config.from !== 'build' && config.from !== 'source') throw new Error(`evora.from: build or source, got "${String(config.from)}"`);
  const fromSource = config.from === 'source';
  if (config.pooler !== 'none' && config.pooler !== 'pgbouncer') throw new Error(`evora.pooler: none or pgbouncer, got "${String(config.pooler)}"`);
  const pooler = config.pooler === 'pgbouncer';
  let build: EvoraBuild | null = null;
  const built = (): EvoraBuild => {
    if (!build) {
      const b = evoraBuild();
      onCleanup('evora build', () => rmSync(b.dir, { recursive: true, force: true }));
      build = b;
    }
    return build;
  };
  return {
    name: 'evora',
    unavailable: null,
    version: evoraVersion(),
    processes,
    config,
    describe: () =>
      `${fromSource ? 'the source through tsx' : 'built with tsc'}; server: one \`evora serve\` process (defaults${serverFlags.length ? `, ${serverFlags.join(' ')}` : ''}` +
      `${security.tls ? ', TLS' : ''}${security.token ? ', auth on: worker and admin tokens' : ''}${pooler ? ', through pgbouncer in transaction mode' : ''}); ` +
      `${processes} worker process${processes > 1 ? 'es' : ''} × EvoraWorker slots ${config.slots}; ` +
      `${config.deleteOnComplete === true ? 'the queue deletes jobs at completion (delete_on_complete)' : 'completed jobs kept (the default)'}; ` +
      `enqueue with EvoraClient (submit ${config.submitOverStream !== false ? 'over a SubmitJobStream' : 'as unary SubmitJob calls'} / submitMany of 1000, idsOnly)`,
    open: (ctx) => openEvora(ctx, serverFlags, security, fromSource ? null : built(), { deleteOnComplete: config.deleteOnComplete === true, submitOverStream: config.submitOverStream !== false, pooler }),
  };
}

/**
 * A CA and a server certificate for 127.0.0.1 signed by it, made with the openssl CLI in
 * `dir` (as test/helpers/tls-certs.ts does); returns the files' paths.
 */
function tlsCertsMake(dir: string): { caPem: string; certFile: string; keyFile: string } {
  mkdirSync(dir, { recursive: true });
  const openssl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const key = (file: string) => openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file]);
  key('ca.key');
  openssl(['req', '-x509', '-new', '-key', 'ca.key', '-subj', '/CN=evora-bench CA', '-days', '2', '-out', 'ca.pem']);
  key('server.key');
  openssl(['req', '-new', '-key', 'server.key', '-subj', '/CN=localhost', '-out', 'server.csr']);
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'server.ext', '-out', 'server.pem']);
  return { caPem: readFileSync(join(dir, 'ca.pem'), 'utf8'), certFile: join(dir, 'server.pem'), keyFile: join(dir, 'server.key') };
}

/**
 * pgbouncer in transaction mode in front of the bench's PostgreSQL (the test suite's
 * helper), with more server connections than the Evora server's pool asks for, so no client
 * waits at the pooler.
 */
async function poolerStart(upstreamUrl: string): Promise<Pgbouncer> {
  const found = findPgbouncer();
  if (!found.ok) throw new Error(`evora.pooler=pgbouncer: ${found.reason}`);
  return pgbouncerStart({ path: found.path, upstreamUrl, defaultPoolSize: 20 });
}

/** Inserts an API token row (as `evora token create` with DATABASE_URL would) and tells the servers' caches. */
async function tokenInsert(databaseUrl: string, role: 'worker' | 'admin', secret: string): Promise<void> {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    await c.query(
      `INSERT INTO evora.api_tokens (id, name, role, queues, secret_sha256, created_at) VALUES (gen_random_uuid(), $1, $2, '{}', $3, now())`,
      [`bench-${role}`, role, tokenSecretHash(secret)],
    );
    await c.query(`SELECT pg_notify('evora_tokens_changed', 'bench')`);
  } finally {
    await c.end();
  }
}

/** Starts a server (from `build`, or the source through tsx when null) and its producer, and makes the bench queue. */
async function openEvora(
  ctx: OpenContext,
  serverFlags: string[],
  security: { tls: boolean; token: boolean },
  build: EvoraBuild | null,
  { deleteOnComplete, submitOverStream, pooler }: { deleteOnComplete: boolean; submitOverStream: boolean; pooler: boolean },
): Promise<SystemInstance> {
  const { EvoraApiError, EvoraClient } = await evoraSdk(build?.sdkUrl);
  const port = await freePort();
  const tls = security.tls ? tlsCertsMake(join(ctx.tmpDir, `evora-tls-${ctx.scenario}`)) : null;
  const tlsEnv = tls ? { EVORA_TLS_CERT: tls.certFile, EVORA_TLS_KEY: tls.keyFile } : {};
  const adminToken = security.token ? tokenSecretGenerate() : undefined;
  const workerToken = security.token ? tokenSecretGenerate() : undefined;
  const logFile = join(ctx.tmpDir, `evora-server-${ctx.scenario}.log`);
  const fd = openSync(logFile, 'a');
  // One folder per server: with the source, tsx's loader thread writes a profile of its own
  // (thread id 1); the main thread's is the one with thread id 0 (CPU.<date>.<time>.<pid>.0.<seq>.cpuprofile).
  const nodeFlags = ctx.cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${join(ctx.cpuProfileDir, `evora-server-${ctx.scenario}`)}`] : [];
  const entry = build ? [build.serverMain] : ['--import', 'tsx', join(ROOT, 'src/cli/main.ts')];
  const bouncer = pooler ? await poolerStart(ctx.databaseUrl) : null;
  const databaseFlags = bouncer
    ? ['--database-url', bouncer.through(ctx.databaseUrl), '--direct-database-url', ctx.databaseUrl]
    : ['--database-url', ctx.databaseUrl];
  const child = trackChild(
    spawn(
      process.execPath,
      [...nodeFlags, ...entry, 'serve', ...databaseFlags, '--port', String(port), '--log-level', 'warn', ...serverFlags],
      { cwd: ROOT, stdio: ['ignore', fd, fd], env: { ...process.env, EVORA_LOG_PRETTY: '0', EVORA_HTTP_PORT: '0', EVORA_METRICS_PORT: '0', MONGODB_URL: '', ...tlsEnv } },
    ),
  );
  closeSync(fd);
  const address = `127.0.0.1:${port}`;
  // The admin token is sent from the start; a server with no token yet ignores it.
  const client = new EvoraClient({ address, deadlineMs: 120_000, tlsCa: tls?.caPem, token: adminToken, submitOverStream });
  const stop = async () => {
    client.close();
    await stopChild(child, 15_000);
    await bouncer?.stop();
  };
  const unregister = onCleanup('evora server', stop);
  const tail = () => readFileSync(logFile, 'utf8').trim().split('\n').slice(-5).join(' | ');
  // Ready when it answers a call (it migrates first).
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`evora server exited (code ${child.exitCode}): ${tail()}`);
    try {
      await client.listQueues({ deadlineMs: 1000 });
      break;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`evora server not ready within 60 s: ${errorText(err)}; log: ${tail()}`);
      await sleep(100);
    }
  }
  if (adminToken && workerToken) {
    // The token table exists once the server has migrated (it answered above).
    await tokenInsert(ctx.databaseUrl, 'admin', adminToken);
    await tokenInsert(ctx.databaseUrl, 'worker', workerToken);
    // Auth must be on before anything is measured: a call without a token is refused.
    const anonymous = new EvoraClient({ address, deadlineMs: 5_000, tlsCa: tls?.caPem });
    try {
      for (let refused = false; !refused; ) {
        refused = await anonymous.listQueues().then(
          () => false,
          (err: unknown) => err instanceof EvoraApiError && err.isUnauthenticated,
        );
        if (!refused && Date.now() > deadline) throw new Error('auth did not turn on within 60 s of inserting the tokens');
        if (!refused) await sleep(50);
      }
    } finally {
      anonymous.close();
    }
  }
  const queue = 'bench';
  await client.upsertQueue(queue, { deleteOnComplete });
  const db = new pg.Pool({ connectionString: ctx.databaseUrl, max: 2 });
  db.on('error', () => undefined);
  return {
    queue,
    target: { address, tlsCa: tls?.caPem, token: workerToken, evoraSdkUrl: build?.sdkUrl },
    serverPid: child.pid!,
    poolerPid: bouncer?.pid ?? null,
    submitOne: async (payload) => {
      await client.submit({ queue, type: 'noop', payload });
    },
    submitBatch: async (payloads) => {
      await client.submitMany(payloads.map((payload) => ({ queue, type: 'noop', payload })), { idsOnly: true });
    },
    seedFinished: async (n) => {
      const c = await db.connect();
      try {
        // As the server leaves them: COMPLETED, one attempt, a spent lease token, a result.
        // Replica mode skips the state-transition trigger (PENDING -> COMPLETED is not legal).
        await c.query('SET session_replication_role = replica');
        await c.query(
          `INSERT INTO evora.jobs (queue, type, state, max_attempts, attempt, lease_token, worker_id, created_at, started_at, finished_at, result)
           SELECT $1, 'noop', 'COMPLETED', 5, 1, gen_random_uuid(), 'seed', now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour', '{}'
           FROM generate_series(1, $2)`,
          [queue, n],
        );
        await c.query('RESET session_replication_role');
      } finally {
        c.release();
      }
      await db.query('VACUUM ANALYZE evora.jobs');
      return `${n.toLocaleString('en-US')} COMPLETED rows in evora.jobs (same queue)`;
    },
    analyze: async () => {
      await db.query('ANALYZE evora.jobs');
    },
    remaining: async () =>
      Number(
        (await db.query<{ n: string }>(`SELECT count(*) AS n FROM evora.jobs WHERE queue = $1 AND state IN ('PENDING', 'RUNNING')`, [queue]))
          .rows[0]!.n,
      ),
    close: async () => {
      await db.end();
      unregister();
      await stop();
    },
  };
}

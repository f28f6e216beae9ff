import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/server/embedded-postgres.js';
import { JobState } from '../../src/gen/evora/v1/job.js';
import { BackoffKind } from '../../src/gen/evora/v1/queue.js';
import { testDatabaseCreate, type TestDatabase } from '../helpers/db.js';
import { queueName } from '../helpers/factories.js';
import { call, clientsFor, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';
import { REPO_ROOT, assertTools, skipUnless, titled, type Proc } from './toolchain.js';
import { exampleWorkerKinds } from './example-workers.js';

/**
 * The Go and Python example workers against a server process that fails under them: killed
 * with SIGKILL and started again on the same port. The worker keeps trying to reconnect with
 * its own capped backoff (gRPC's channel backoff, which grows to two minutes, must not stretch
 * it), names the leases it holds in hello.held once the server is back, and finishes the job
 * it was running with that lease: one attempt, COMPLETED. A result over the server's message
 * limit fails its job instead of ending the stream. Sessions that end at once (a proxy cutting
 * every connection) are reopened with that backoff, not in a tight loop. And each notices a server frozen
 * with SIGSTOP (no reset, no answer: the Go worker by its keepalive pings, the Python one by
 * its unanswered heartbeats), so it moves on to the server that replaces it.
 */

const exec = promisify(execFile);

let db: TestDatabase;
let scratch: string;
let port: number;
let clients: Clients | undefined;
let server: { child: ChildProcess; out: () => string; exited: Promise<void> } | null = null;

/** Starts `evora serve` on `port` (the same each time; `env` added) and waits until it listens. */
async function serve(env: Record<string, string> = {}): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', String(port)], {
    cwd: REPO_ROOT,
    env: { ...process.env, DATABASE_URL: db.url, EVORA_LOG_PRETTY: '0', EVORA_HTTP_PORT: '0', EVORA_ELECTION_INTERVAL_MS: '200', EVORA_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  server = { child, out: () => out, exited };
  await waitFor(() => out.includes(`Evora listening on 127.0.0.1:${port}`), { timeoutMs: 30_000, what: 'the server to listen' });
}

/** SIGKILLs the server and waits for its end. */
async function killServer(): Promise<void> {
  const s = server!;
  server = null;
  s.child.kill('SIGKILL');
  await s.exited;
}

beforeAll(async () => {
  db = await testDatabaseCreate();
  port = await freePort();
  scratch = await mkdtemp(join(tmpdir(), 'evora-interop-faults-'));
  await serve();
  clients = clientsFor(`127.0.0.1:${port}`);
}, 60_000);
afterAll(async () => {
  clients?.close();
  if (server) {
    server.child.kill('SIGTERM');
    await server.exited;
  }
  if (scratch) await rm(scratch, { recursive: true, force: true });
  await db?.drop();
});

const kinds = exampleWorkerKinds();

for (const kind of kinds) {
  describe.skipIf(skipUnless(kind.name, ...kind.tools))(titled(kind.name, ...kind.tools), () => {
    /** Starts the worker on this file's server, for up to two minutes. */
    let launch: (queue: string, workerId: string, slots: number) => Proc;
    /** The same, against `address` instead. */
    let launchAt: (address: string, queue: string, workerId: string, slots: number) => Proc;
    beforeAll(async () => {
      assertTools(...kind.tools);
      const prepared = await kind.prepare(scratch);
      launchAt = (address, queue, workerId, slots) => prepared({ address, queue, workerId, slots, timeoutMs: 120_000 });
      launch = (queue, workerId, slots) => launchAt(`127.0.0.1:${port}`, queue, workerId, slots);
    }, 300_000);

    it('reconnects within its own backoff after the server was down for a while, and finishes its job under the lease it held', async () => {
      const queue = queueName('down');
      await call(clients!.queues, 'upsertQueue', {
        name: queue, maxAttempts: 3, leaseSeconds: 60,
        backoff: { kind: BackoffKind.BACKOFF_KIND_FIXED, base: { seconds: 0, nanos: 0 }, jitter: 0 },
      });
      const { job } = await call(clients!.jobs, 'submitJob', {
        queue, type: 'resize', payload: { image: 'slow.png', width: 10, height: 10, sleep_ms: 3000 },
        priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0),
      });
      const proc = launch(queue, `faults-${queue}`, 1);
      try {
        await proc.waitStderr(/job received/);
        clients!.close();
        clients = undefined;
        await killServer();
        // Down for 20 s: the worker keeps failing to connect meanwhile.
        const downSince = Date.now();
        await waitFor(() => Date.now() - downSince > 20_000, { timeoutMs: 30_000, what: 'twenty seconds of outage' });
        const before = (proc.stderr().match(/session opened/g) ?? []).length;
        await serve();
        const back = Date.now();
        clients = clientsFor(`127.0.0.1:${port}`);
        await waitFor(() => (proc.stderr().match(/session opened/g) ?? []).length > before, { timeoutMs: 40_000, what: 'the worker to reconnect' });
        const took = Date.now() - back;
        // Their backoff is capped at 2 s (plus jitter's 50 ms), their channel's too.
        expect(took, proc.stderr()).toBeLessThan(10_000);
        await waitFor(async () => (await call(clients!.jobs, 'getJob', { id: job!.id })).job!.state === JobState.JOB_STATE_COMPLETED, { timeoutMs: 20_000, what: 'the job to complete' });
        expect((await call(clients!.jobs, 'getJob', { id: job!.id })).job!.attempt).toBe(1);
      } finally {
        proc.child.kill('SIGTERM');
        await proc.exited;
      }
    }, 120_000);

    it('notices a server that stopped answering (SIGSTOP: no reset, no data), and finishes its job on the server that replaces it', async () => {
      const queue = queueName('stopped');
      // Heartbeats every 10 s. The lease expires during the outage, but the replacing server's
      // sweeper waits one lease length before it requeues: the worker's hello.held keeps it.
      await call(clients!.queues, 'upsertQueue', { name: queue, maxAttempts: 3, leaseSeconds: 30 });
      const { job } = await call(clients!.jobs, 'submitJob', {
        queue, type: 'resize', payload: { image: 'stopped.png', width: 10, height: 10, sleep_ms: 1000 },
        priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0),
      });
      const proc = launch(queue, `faults-${queue}`, 1);
      try {
        await proc.waitStderr(/job received/);
        // Frozen, the server keeps the connection open (the kernel still acknowledges) and
        // answers nothing: neither the report the worker sends in a second nor a heartbeat.
        server!.child.kill('SIGSTOP');
        await proc.waitStderr(/job done/);
        // The Go worker's keepalive pings (after 15 s, 10 s to answer) end the silent stream;
        // the Python worker gives up on a server silent for 30 s (its heartbeats unanswered).
        await proc.waitStderr(/stream (broke|ended)|no word from the server/, 45_000);
        // The host is replaced: a new server on the same port and database.
        clients!.close();
        clients = undefined;
        await killServer();
        await serve();
        clients = clientsFor(`127.0.0.1:${port}`);
        await waitFor(async () => (await call(clients!.jobs, 'getJob', { id: job!.id })).job!.state === JobState.JOB_STATE_COMPLETED, {
          timeoutMs: 30_000,
          what: 'the job to complete',
        });
        expect((await call(clients!.jobs, 'getJob', { id: job!.id })).job!.attempt).toBe(1);
      } finally {
        server?.child.kill('SIGCONT');
        proc.child.kill('SIGKILL');
        await proc.exited;
      }
    }, 120_000);

    it('through a graceful restart (SIGTERM: drain SERVER_SHUTDOWN), reports its job and comes back to the restarted server for new work', async () => {
      const queue = queueName('restart');
      await call(clients!.queues, 'upsertQueue', { name: queue, maxAttempts: 3, leaseSeconds: 30 });
      const submitJob = (image: string, sleepMs: number) => call(clients!.jobs, 'submitJob', {
        queue, type: 'resize', payload: { image, width: 10, height: 10, sleep_ms: sleepMs },
        priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0),
      });
      const { job: first } = await submitJob('first.png', 3000);
      const proc = launch(queue, `faults-${queue}`, 1);
      try {
        await proc.waitStderr(/job received/);
        clients!.close();
        clients = undefined;
        const s = server!;
        server = null;
        s.child.kill('SIGTERM');
        await proc.waitStderr(/server asked to drain/);
        await s.exited;
        await serve();
        clients = clientsFor(`127.0.0.1:${port}`);
        const { job: second } = await submitJob('second.png', 0);
        for (const id of [first!.id, second!.id]) {
          await waitFor(async () => (await call(clients!.jobs, 'getJob', { id })).job!.state === JobState.JOB_STATE_COMPLETED, {
            timeoutMs: 30_000,
            what: `job ${id} to complete`,
          });
          expect((await call(clients!.jobs, 'getJob', { id })).job!.attempt, proc.stderr()).toBe(1);
        }
      } finally {
        proc.child.kill('SIGKILL');
        await proc.exited;
      }
    }, 90_000);

    it('stops an attempt the server timed out (cancel CANCEL_REASON_TIMEOUT) and takes the ack LEASE_LOST of its report in stride', async () => {
      const queue = queueName('timeout');
      await call(clients!.queues, 'upsertQueue', { name: queue, maxAttempts: 1, leaseSeconds: 30 });
      const { job } = await call(clients!.jobs, 'submitJob', {
        queue, type: 'resize', payload: { image: 'endless.png', width: 10, height: 10, sleep_ms: 60_000 },
        priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0),
        timeout: { seconds: 1, nanos: 0 },
      });
      const proc = launch(queue, `faults-${queue}`, 1);
      try {
        await proc.waitStderr(/CANCEL_REASON_TIMEOUT/);
        await proc.waitStderr(/lease was lost/);
        const j = (await call(clients!.jobs, 'getJob', { id: job!.id })).job!;
        expect(j, proc.stderr()).toMatchObject({ state: JobState.JOB_STATE_DLQ, attempt: 1 });
        expect(j.lastError).toMatch(/timed out/);
        proc.child.kill('SIGTERM');
        const exit = await proc.exited;
        expect(exit.code, proc.stderr()).toBe(0);
      } finally {
        proc.child.kill('SIGKILL');
        await proc.exited;
      }
    }, 60_000);

    it('exits at once on SIGTERM while a frozen server leaves its hello unanswered (nothing held)', async () => {
      const queue = queueName('frozen');
      clients!.close();
      clients = undefined;
      server!.child.kill('SIGSTOP');
      let proc: Proc | undefined;
      try {
        proc = launch(queue, `faults-${queue}`, 1);
        // The kernel accepts the connection for the frozen process; nothing answers on it.
        const pid = `pid=${proc.child.pid},`;
        await waitFor(async () => (await exec('ss', ['-Htnp', 'state', 'established', `( dport = :${port} )`])).stdout.includes(pid), {
          what: "the worker's connection to the frozen server",
        });
        proc.child.kill('SIGTERM');
        const p = proc;
        await waitFor(() => p.child.exitCode !== null || p.child.signalCode !== null, { timeoutMs: 5_000, what: 'the worker to exit' });
        expect(p.child.exitCode, p.stderr()).toBe(0);
      } finally {
        server!.child.kill('SIGCONT');
        proc?.child.kill('SIGKILL');
        await proc?.exited;
        clients = clientsFor(`127.0.0.1:${port}`);
      }
    }, 60_000);

    it('a result over the server\'s message limit: fails its job (non-retryable, the reason in the error) instead of writing it, on one session', async () => {
      await killServer();
      await serve({ EVORA_MAX_MESSAGE_BYTES: '3000' });
      clients?.close();
      clients = clientsFor(`127.0.0.1:${port}`);
      const queue = queueName('big');
      await call(clients.queues, 'upsertQueue', { name: queue, maxAttempts: 3, leaseSeconds: 30 });
      // The push fits in 3,000 bytes; the result repeats the name (image and thumbnail), so the
      // complete would not: written, it would end the stream RESOURCE_EXHAUSTED, and again on
      // each session's resend of it (docs/api.md, "Size limits on the Work stream").
      const { job } = await call(clients.jobs, 'submitJob', {
        queue, type: 'resize', payload: { image: `${'x'.repeat(1800)}.png`, width: 10, height: 10 },
        priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0),
      });
      const proc = launch(queue, `faults-${queue}`, 1);
      try {
        await waitFor(async () => (await call(clients!.jobs, 'getJob', { id: job!.id })).job!.state === JobState.JOB_STATE_DLQ, { what: 'the job in the DLQ' });
        const j = (await call(clients.jobs, 'getJob', { id: job!.id })).job!;
        expect(j.attempt, proc.stderr()).toBe(1);
        expect(j.lastError).toMatch(/^complete refused: the report is \d+ bytes; the server takes messages of at most 3000$/);
        expect((proc.stderr().match(/session opened/g) ?? []).length, proc.stderr()).toBe(1);
      } finally {
        proc.child.kill('SIGKILL');
        await proc.exited;
        await killServer();
        await serve();
      }
    }, 60_000);

    it('backs off between sessions that end at once (a proxy that cuts every connection), instead of reconnecting in a loop', async () => {
      // A TCP proxy in front of the server that closes each connection 300 ms after it opens:
      // long enough for a session to open, short enough that without the worker's backoff
      // between sessions it would open ~30 in 10 s.
      const sockets = new Set<Socket>();
      const proxy = createServer((downstream) => {
        const upstream = connect(port, '127.0.0.1');
        sockets.add(downstream).add(upstream);
        downstream.pipe(upstream).pipe(downstream);
        const cut = () => {
          downstream.destroy();
          upstream.destroy();
        };
        downstream.on('error', cut).on('close', cut);
        upstream.on('error', cut).on('close', cut);
        setTimeout(cut, 300).unref();
      });
      await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
      const proxyPort = (proxy.address() as AddressInfo).port;
      const proc = launchAt(`127.0.0.1:${proxyPort}`, queueName('cut'), 'faults-cut', 1);
      try {
        const sessions = () => (proc.stderr().match(/session opened/g) ?? []).length;
        await waitFor(() => sessions() >= 2, { what: 'a session cut and another opened', timeoutMs: 20_000 });
        const from = sessions();
        const since = Date.now();
        await waitFor(() => Date.now() - since >= 10_000, { what: 'ten seconds', timeoutMs: 15_000 });
        expect(sessions() - from, proc.stderr().slice(-3000)).toBeLessThanOrEqual(15);
      } finally {
        proc.child.kill('SIGKILL');
        await proc.exited;
        for (const s of sockets) s.destroy();
        await new Promise((resolve) => proxy.close(resolve));
      }
    }, 60_000);
  });
}

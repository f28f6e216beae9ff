import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttemptOutcome, JobState, type Job } from '../../src/gen/evora/v1/job.js';
import { BackoffKind } from '../../src/gen/evora/v1/queue.js';
import { queueName } from '../helpers/factories.js';
import * as grpc from '@grpc/grpc-js';
import { call, clientsFor, serverSetup, type Clients } from '../helpers/server-setup.js';
import { tlsCertsGenerate } from '../helpers/tls-certs.js';
import { bearer, tokenInsert, type TestToken } from '../helpers/tokens.js';
import { waitFor } from '../helpers/wait.js';
import { JOB_TYPE, QUEUE, ResizeError, demoPayloads, resize } from '../../examples/ts/images.js';
import { REPO_ROOT, REQUIRED, assertTools, findGo, findPython, goBin, skipUnless, titled, type Proc, type Tool } from './toolchain.js';
import { exampleWorkerKinds, type LaunchOptions } from './example-workers.js';

/**
 * The Go and Python example workers against a live server: every job ends COMPLETED with
 * the result the worker computed, the ones that fail once are retried (attempt 2), a job
 * longer than its lease survives on heartbeats, and SIGTERM drains. And each acts on the
 * server's codes: a cancel (CANCEL_REASON_OPERATOR) stops the job and fails it, a
 * lease_lost (LEASE_LOST_REASON_EXPIRED) stops it without a report (and only the lease it
 * names: a job pushed again under a new lease runs on), a report acked ACK_RESULT_INVALID is
 * not resent but replaced once by a non-retryable fail; their own unit tests cover the ack decisions a live
 * server does not easily produce (ACK_RESULT_RETRY_LATER, an old server's acks). And both
 * run the TypeScript producer's jobs (examples/ts/images.ts) from their default queue with
 * the very results the TypeScript worker computes: the examples feed one another.
 */

const exec = promisify(execFile);
const GO_DIR = join(REPO_ROOT, 'examples', 'go-worker');
const PY_DIR = join(REPO_ROOT, 'examples', 'python-worker');

let clients: Clients;
let address: string;
let scratch: string;

/** Results over this size are refused (ACK_RESULT_INVALID); the test payloads are far below it. */
const MAX_PAYLOAD_BYTES = 4096;

/** A second server that requires client certificates (mTLS); its raw clients trust its CA. */
const certs = tlsCertsGenerate('evora-interop');
let mtls: { address: string; clients: Clients };
/**
 * A third server, over TLS (no client certificate), with tokens in its table: auth is on.
 * Its raw clients trust the CA; `admin` submits and reads, `worker` is the workers' token.
 */
let authed: { address: string; clients: Clients; admin: TestToken; worker: TestToken };

beforeAll(async () => {
  ({ clients, address } = await serverSetup({ maxPayloadBytes: String(MAX_PAYLOAD_BYTES) }));
  const m = await serverSetup({ tlsCert: certs.serverCert, tlsKey: certs.serverKey, tlsClientCa: certs.caCert });
  m.clients.close();
  mtls = { address: m.address, clients: clientsFor(m.address, grpc.credentials.createSsl(certs.read(certs.caCert), certs.read(certs.clientKey), certs.read(certs.clientCert))) };
  const a = await serverSetup({ tlsCert: certs.serverCert, tlsKey: certs.serverKey });
  a.clients.close();
  authed = {
    address: a.address,
    clients: clientsFor(a.address, grpc.credentials.createSsl(certs.read(certs.caCert))),
    admin: await tokenInsert(a.databaseUrl, { role: 'admin' }),
    worker: await tokenInsert(a.databaseUrl, { role: 'worker' }),
  };
  scratch = await mkdtemp(join(tmpdir(), 'evora-interop-'));
});
afterAll(async () => {
  mtls?.clients.close();
  authed?.clients.close();
  certs.remove();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/** What the `resize` handler of both examples returns (see examples/go-worker/resize.go). */
function expectedResult(p: { image: string; width: number; height: number; max_side?: number }, attempt: number, worker: string) {
  const maxSide = p.max_side ?? 256;
  const long = Math.max(p.width, p.height);
  const [w, h] =
    long > maxSide
      ? [Math.floor((2 * p.width * maxSide + long) / (2 * long)), Math.floor((2 * p.height * maxSide + long) / (2 * long))]
      : [p.width, p.height];
  const dot = p.image.lastIndexOf('.');
  const [stem, ext] = dot > 0 ? [p.image.slice(0, dot), p.image.slice(dot)] : [p.image, ''];
  return { image: p.image, thumbnail: `${stem}_${w}x${h}${ext}`, width: w, height: h, attempt, worker };
}

const PAYLOADS = [
  { image: 'cat.png', width: 4000, height: 3000 },
  { image: 'dog.jpeg', width: 1080, height: 1920, max_side: 640 },
  { image: 'icon', width: 64, height: 32 },
  { image: 'wide.webp', width: 1001, height: 3, max_side: 1000 },
  { image: 'flaky.png', width: 800, height: 600, fail_until_attempt: 2 },
  { image: 'flaky2.gif', width: 300, height: 900, max_side: 100, fail_until_attempt: 2 },
  // Longer than the queue's 5 s lease: completes on attempt 1 only if the worker heartbeats.
  { image: 'slow.png', width: 500, height: 500, sleep_ms: 6500 },
];
const RETRIED = PAYLOADS.filter((p) => 'fail_until_attempt' in p).length;

async function setupQueue(prefix: string, queue = queueName(prefix)): Promise<string> {
  // Immediate retries; a 5 s lease (the examples heartbeat every heartbeat_interval_seconds,
  // here 1 s). With a 3 s lease the first test below once timed out under the whole suite's
  // load on 2 cores (cause not captured: the test's timeout came before the worker's own, so
  // its log was lost); heartbeats held up for 2 s would have cost the slow job its lease, and
  // the Go worker abandons a lost job without a report. 5 s leaves 4 s of margin.
  await call(clients.queues, 'upsertQueue', {
    name: queue,
    maxAttempts: 3,
    leaseSeconds: 5,
    backoff: { kind: BackoffKind.BACKOFF_KIND_FIXED, base: { seconds: 0, nanos: 0 }, jitter: 0 },
  });
  return queue;
}

async function submit(queue: string, payload: Record<string, unknown>): Promise<Job> {
  const { job } = await call(clients.jobs, 'submitJob', { queue, type: 'resize', payload, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
  return job!;
}

async function getJob(id: string): Promise<Job> {
  return (await call(clients.jobs, 'getJob', { id })).job!;
}

/** A unary call on the token server with `md` (its bearer token). */
function authedCall<Res>(md: grpc.Metadata, invoke: (md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res?: Res) => void) => unknown): Promise<Res> {
  return new Promise((resolve, reject) => invoke(md, (err, res) => (err ? reject(err) : resolve(res as Res))));
}

function describeExit(p: Proc, e: { code: number | null; signal: string | null }): string {
  return `worker exited with code ${e.code} signal ${e.signal}\n--- stderr ---\n${p.stderr()}`;
}

const go = findGo();
const python = findPython();
const kinds = exampleWorkerKinds();

for (const kind of kinds) {
  describe.skipIf(skipUnless(kind.name, ...kind.tools))(titled(kind.name, ...kind.tools), () => {
    /** Starts the worker; on the file's server unless `address` names another. */
    let launch: (o: Omit<LaunchOptions, 'address'> & { address?: string }) => Proc;
    beforeAll(async () => {
      assertTools(...kind.tools);
      const prepared = await kind.prepare(scratch);
      launch = (o) => prepared({ ...o, address: o.address ?? address });
    }, 300_000);

    it('runs every job to COMPLETED with its result, retrying the ones that fail once', async () => {
      const queue = await setupQueue('interop');
      const jobs = await Promise.all(PAYLOADS.map((p) => submit(queue, p)));
      const workerId = `interop-${queue}`;
      // One report per attempt: each job once, plus one failed attempt per flaky job.
      const proc = launch({ queue, workerId, slots: 3, maxJobs: PAYLOADS.length + RETRIED });
      const exit = await proc.exited;
      expect(exit.code, describeExit(proc, exit)).toBe(0);

      for (const [i, submitted] of jobs.entries()) {
        const p = PAYLOADS[i]!;
        const job = await getJob(submitted.id);
        const attempt = 'fail_until_attempt' in p ? 2 : 1;
        expect(job, `${p.image}\n${proc.stderr()}`).toMatchObject({
          state: JobState.JOB_STATE_COMPLETED,
          attempt,
          workerId,
          result: expectedResult(p, attempt, workerId),
        });
        // A completed job shows no error; the failed attempt's is in its history.
        expect(job.lastError).toBe('');
        const attempts = (await call(clients.jobs, 'listJobAttempts', { id: submitted.id })).attempts;
        expect(attempts.map((a) => [a.outcome, a.error])).toEqual(
          attempt === 2
            ? [[AttemptOutcome.ATTEMPT_OUTCOME_FAILED, 'simulated failure on attempt 1 (fail_until_attempt=2)'], [AttemptOutcome.ATTEMPT_OUTCOME_COMPLETED, '']]
            : [[AttemptOutcome.ATTEMPT_OUTCOME_COMPLETED, '']],
        );
      }
      // Longer than the worker's own 60 s limit, so a stuck worker fails with its log.
    }, 90_000);

    it("runs the TypeScript producer's jobs (examples/ts/images.ts) from its default queue, with the TypeScript worker's results", async () => {
      // The examples' shared queue, which the worker serves without a --queue flag.
      await setupQueue('', QUEUE);
      const payloads = demoPayloads(4);
      const { results } = await call(clients.jobs, 'submitJobs', { idsOnly: false,
        jobs: payloads.map((payload) => ({ queue: QUEUE, type: JOB_TYPE, payload, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) })),
      });
      const workerId = `interop-ts-producer-${kind.name.split(' ')[0]!.toLowerCase()}`;
      // One report per attempt: the flaky job fails once, the broken one goes to the DLQ at once.
      const attempts = payloads.map((p) => (typeof p.fail_until_attempt === 'number' ? p.fail_until_attempt : 1));
      const proc = launch({ workerId, slots: 2, maxJobs: attempts.reduce((a, b) => a + b, 0) });
      const exit = await proc.exited;
      expect(exit.code, describeExit(proc, exit)).toBe(0);
      const outcomes: string[] = [];
      for (const [i, r] of results.entries()) {
        const job = await getJob(r.job!.id);
        const attempt = attempts[i]!;
        let expected: ReturnType<typeof resize> | ResizeError;
        try {
          expected = resize(payloads[i]!, attempt, workerId);
        } catch (err) {
          expected = err as ResizeError;
        }
        if (expected instanceof ResizeError) {
          expect(job, proc.stderr()).toMatchObject({ state: JobState.JOB_STATE_DLQ, attempt, lastError: expected.message });
          outcomes.push('dlq');
        } else {
          expect(job, proc.stderr()).toMatchObject({ state: JobState.JOB_STATE_COMPLETED, attempt, workerId, result: expected });
          outcomes.push(`completed on attempt ${attempt}`);
        }
      }
      // The demo batch covers each path: plain completions, a retry, a dead letter.
      expect(new Set(outcomes)).toEqual(new Set(['completed on attempt 1', 'completed on attempt 2', 'dlq']));
    }, 90_000);

    it('drains on SIGTERM: finishes the running job, takes no new one, exits 0', async () => {
      const queue = await setupQueue('drain');
      const running = await submit(queue, { image: 'long.png', width: 10, height: 10, sleep_ms: 1500 });
      const workerId = `interop-${queue}`;
      const proc = launch({ queue, workerId, slots: 1 });
      await waitFor(async () => (await getJob(running.id)).state === JobState.JOB_STATE_RUNNING, { what: 'the job to be leased' });
      // The only slot is busy, so this one waits; after the drain it must not be leased.
      const waiting = await submit(queue, { image: 'later.png', width: 10, height: 10 });
      proc.child.kill('SIGTERM');
      const exit = await proc.exited;
      expect(exit.code, describeExit(proc, exit)).toBe(0);
      expect(await getJob(running.id)).toMatchObject({ state: JobState.JOB_STATE_COMPLETED, attempt: 1, workerId });
      expect(await getJob(waiting.id)).toMatchObject({ state: JobState.JOB_STATE_PENDING, attempt: 0 });
    });

    it('stops a job on cancel (CANCEL_REASON_OPERATOR) and fails it: the job ends CANCELLED', async () => {
      const queue = await setupQueue('cancel');
      const job = await submit(queue, { image: 'endless.png', width: 10, height: 10, sleep_ms: 60_000 });
      const workerId = `interop-${queue}`;
      const proc = launch({ queue, workerId, slots: 1, maxJobs: 1 });
      await waitFor(async () => (await getJob(job.id)).state === JobState.JOB_STATE_RUNNING, { what: 'the job to be leased' });
      await call(clients.jobs, 'cancelJob', { id: job.id });
      // The fail report is the one report; its ack ends the worker (-max-jobs 1).
      const exit = await proc.exited;
      expect(exit.code, describeExit(proc, exit)).toBe(0);
      expect(proc.stderr()).toMatch(/job cancelled; stopping it.*CANCEL_REASON_OPERATOR/);
      expect(await getJob(job.id), proc.stderr()).toMatchObject({ state: JobState.JOB_STATE_CANCELLED, attempt: 1, workerId });
    });

    it('stops a job whose lease was lost (LEASE_LOST_REASON_EXPIRED) and reports nothing for it', async () => {
      const queue = await setupQueue('lost');
      const job = await submit(queue, { image: 'endless.png', width: 10, height: 10, sleep_ms: 60_000 });
      const workerId = `interop-${queue}`;
      // A worker that kept the job would still be running it at the drain below, and exit 1.
      const proc = launch({ queue, workerId, slots: 1, drainTimeout: '20s' });
      await waitFor(async () => (await getJob(job.id)).state === JobState.JOB_STATE_RUNNING, { what: 'the job to be leased' });
      // Frozen, the worker sends no heartbeat: its lease expires and the sweeper requeues the
      // job. Cancelled while PENDING, it is not handed out again.
      proc.child.kill('SIGSTOP');
      try {
        await waitFor(async () => (await getJob(job.id)).state === JobState.JOB_STATE_PENDING, {
          what: 'the sweeper to requeue the job',
          timeoutMs: 30_000,
        });
        await call(clients.jobs, 'cancelJob', { id: job.id });
      } finally {
        proc.child.kill('SIGCONT');
      }
      // Its next heartbeat is answered lease_lost.
      await proc.waitStderr(/lease lost; stopping the job without a report.*LEASE_LOST_REASON_EXPIRED/);
      proc.child.kill('SIGTERM');
      const exit = await proc.exited;
      expect(exit.code, describeExit(proc, exit)).toBe(0);
      expect(proc.stderr()).not.toMatch(/job (done|failed)/);
      // The last error is the sweeper's, not a report's.
      expect(await getJob(job.id), proc.stderr()).toMatchObject({ state: JobState.JOB_STATE_CANCELLED, attempt: 1 });
      expect((await getJob(job.id)).lastError).toMatch(/^lease expired/);
    }, 60_000);

    it('keeps a job pushed to it again under a new lease: only the old lease is lost', async () => {
      const queue = await setupQueue('again');
      const payload = { image: 'again.png', width: 10, height: 10, sleep_ms: 3000 };
      const job = await submit(queue, payload);
      const workerId = `interop-${queue}`;
      // Two slots: the frozen worker's session has one free for the job once it is requeued.
      const proc = launch({ queue, workerId, slots: 2, maxJobs: 1 });
      await waitFor(async () => (await getJob(job.id)).state === JobState.JOB_STATE_RUNNING, { what: 'the job to be leased' });
      // Frozen, the worker sends no heartbeat: the sweeper requeues the job and the server
      // pushes it to the same worker under a new lease. Woken, the worker holds both leases
      // of the job; a lease_lost naming the old one must not stop the run under the new one.
      proc.child.kill('SIGSTOP');
      try {
        await waitFor(
          async () => {
            const j = await getJob(job.id);
            return j.state === JobState.JOB_STATE_RUNNING && j.attempt === 2;
          },
          { what: 'the job requeued and leased to the frozen worker again', timeoutMs: 30_000 },
        );
      } finally {
        proc.child.kill('SIGCONT');
      }
      const exit = await proc.exited;
      expect(exit.code, describeExit(proc, exit)).toBe(0);
      const after = await getJob(job.id);
      expect(after, proc.stderr()).toMatchObject({
        state: JobState.JOB_STATE_COMPLETED,
        attempt: 2,
        workerId,
        result: expectedResult(payload, 2, workerId),
      });
      expect(after.lastError).toBe('');
      const attempts = (await call(clients.jobs, 'listJobAttempts', { id: job.id })).attempts;
      expect(attempts.map((a) => [a.outcome, a.error])).toEqual([
        [AttemptOutcome.ATTEMPT_OUTCOME_LEASE_EXPIRED, expect.stringMatching(/^lease expired/)],
        [AttemptOutcome.ATTEMPT_OUTCOME_COMPLETED, ''],
      ]);
    }, 60_000);

    it('fails the job instead of a report answered ACK_RESULT_INVALID (a result over the size limit)', async () => {
      const queue = await setupQueue('invalid');
      // The payload fits; the result holds the image name twice (image and thumbnail), and does not.
      const image = `${'x'.repeat(Math.ceil(MAX_PAYLOAD_BYTES * 0.6))}.png`;
      const job = await submit(queue, { image, width: 10, height: 10 });
      const workerId = `interop-${queue}`;
      const proc = launch({ queue, workerId, slots: 1, maxJobs: 1 });
      const exit = await proc.exited;
      expect(exit.code, describeExit(proc, exit)).toBe(0);
      expect(proc.stderr()).toMatch(/report refused as invalid; failing the job instead/);
      expect(proc.stderr()).not.toMatch(/could not apply the report now/);
      expect(proc.stderr().match(/job done/g), proc.stderr()).toHaveLength(1);
      // The complete changed nothing; the non-retryable fail sent instead under the same lease
      // ended the job at once, naming what was refused.
      const after = await getJob(job.id);
      expect(after, proc.stderr()).toMatchObject({ attempt: 1, workerId, state: JobState.JOB_STATE_DLQ });
      expect(after.lastError).toMatch(/^complete refused: .*result/);
      expect(after.result).toBeUndefined();
    });

    it('runs a job over mTLS (--tls-ca, --tls-cert, --tls-key)', async () => {
      const queue = queueName('tls');
      const payload = { image: 'tls.png', width: 600, height: 300 };
      const { job } = await call(mtls.clients.jobs, 'submitJob', { queue, type: 'resize', payload, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
      const workerId = `interop-${queue}`;
      const proc = launch({
        queue,
        workerId,
        slots: 1,
        maxJobs: 1,
        address: mtls.address,
        extra: ['--tls-ca', certs.caCert, '--tls-cert', certs.clientCert, '--tls-key', certs.clientKey],
      });
      const exit = await proc.exited;
      expect(exit.code, describeExit(proc, exit)).toBe(0);
      const done = (await call(mtls.clients.jobs, 'getJob', { id: job!.id })).job!;
      expect(done, proc.stderr()).toMatchObject({ state: JobState.JOB_STATE_COMPLETED, workerId, result: expectedResult(payload, 1, workerId) });
    }, 90_000);

    // Needs the server side of auth (a server enforcing tokens once its table has one).
    it('runs a job over TLS with a worker token (--tls-ca, --token; EVORA_TOKEN; EVORA_TOKEN_FILE)', async () => {
      const tokenFile = join(scratch, 'worker-token');
      await writeFile(tokenFile, `${authed.worker.secret}\n`, { mode: 0o600 });
      for (const how of ['flag', 'env', 'file'] as const) {
        const queue = queueName(`tok-${how}`);
        const payload = { image: `${how}.png`, width: 600, height: 300 };
        const req = { queue, type: 'resize', payload, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) };
        const { job } = await authedCall<{ job?: Job }>(bearer(authed.admin), (md, cb) => authed.clients.jobs.submitJob(req, md, cb));
        const workerId = `interop-${queue}`;
        const secret = authed.worker.secret;
        const proc = launch({
          queue,
          workerId,
          slots: 1,
          maxJobs: 1,
          address: authed.address,
          extra: ['--tls-ca', certs.caCert, ...(how === 'flag' ? ['--token', secret] : [])],
          env: how === 'env' ? { EVORA_TOKEN: secret } : how === 'file' ? { EVORA_TOKEN_FILE: tokenFile } : {},
        });
        const exit = await proc.exited;
        expect(exit.code, describeExit(proc, exit)).toBe(0);
        expect(proc.stderr()).not.toContain(secret);
        const done = await authedCall<{ job?: Job }>(bearer(authed.admin), (md, cb) => authed.clients.jobs.getJob({ id: job!.id }, md, cb));
        expect(done.job, proc.stderr()).toMatchObject({ state: JobState.JOB_STATE_COMPLETED, workerId, result: expectedResult(payload, 1, workerId) });
      }
    }, 120_000);

    // Needs the server side of auth.
    it('without a token, or with an unknown one, exits 3 reporting UNAUTHENTICATED instead of reconnecting', async () => {
      const queue = queueName('notok');
      for (const extra of [[], ['--token', 'evora_not-a-real-token-0123456789abcdef']]) {
        const proc = launch({ queue, workerId: `interop-${queue}`, slots: 1, address: authed.address, extra: ['--tls-ca', certs.caCert, ...extra] });
        const exit = await proc.exited;
        expect(exit.code, describeExit(proc, exit)).toBe(3);
        expect(proc.stderr()).toMatch(/UNAUTHENTICATED/i);
        expect(proc.stderr()).not.toContain('evora_not-a-real-token');
      }
    }, 90_000);

    it('passes its own unit tests (the ack decisions)', async () => {
      await kind.unitTests();
    }, 300_000);
  });
}

/** Files under `dir`, relative to it, with their contents. */
async function tree(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const full = join(entry.parentPath, entry.name);
    out.set(relative(dir, full), await readFile(full, 'utf8'));
  }
  return out;
}

/** Skips (or, with EVORA_INTEROP_REQUIRED=1, fails) the test when a tool is missing. */
function need(ctx: { skip: (note?: string) => never }, ...tools: Tool[]): void {
  const missing = tools.flatMap((t) => (t.ok ? [] : [t.reason]));
  if (missing.length === 0) return;
  if (REQUIRED) assertTools(...tools);
  console.warn(`interop: skipping a test: ${missing.join('; ')}`);
  ctx.skip(missing.join('; '));
}

describe('the committed stubs match proto/', () => {
  it('examples/python-worker/gen is what gen.sh generates', async (ctx) => {
    need(ctx, python);
    if (!python.ok) return;
    const out = join(scratch, 'py-gen');
    await exec('bash', [join(PY_DIR, 'gen.sh')], { env: { ...process.env, PYTHON: python.path, OUT: out } });
    expect(await tree(out), 'examples/python-worker/gen is stale: run examples/python-worker/gen.sh').toEqual(await tree(join(PY_DIR, 'gen')));
  });

  // Needs the two Go plugins at the versions in examples/go-worker/Makefile, which the
  // interop install does not add (the Go stubs are committed): this runs where
  // `make -C examples/go-worker tools` was done and skips elsewhere, even in CI.
  it('examples/go-worker/gen is what `make gen` generates', async (ctx) => {
    need(ctx, go);
    const makefile = await readFile(join(GO_DIR, 'Makefile'), 'utf8');
    const problems: string[] = [];
    for (const [plugin, module, variable] of [
      ['protoc-gen-go', 'google.golang.org/protobuf', 'PROTOC_GEN_GO_VERSION'],
      ['protoc-gen-go-grpc', 'google.golang.org/grpc/cmd/protoc-gen-go-grpc', 'PROTOC_GEN_GO_GRPC_VERSION'],
    ] as const) {
      const want = new RegExp(`^${variable} := (\\S+)`, 'm').exec(makefile)?.[1];
      const path = join(goBin() ?? '/nonexistent', plugin);
      const have = await exec(go.ok ? go.path : 'go', ['version', '-m', path]).then(
        (r) => r.stdout.split('\n').map((l) => l.trim().split(/\s+/)).find((f) => f[0] === 'mod' && f[1] === module)?.[2],
        () => undefined,
      );
      if (have !== want) problems.push(`${plugin} ${have ?? 'not installed'} (want ${want})`);
    }
    if (problems.length > 0) {
      console.warn(`interop: skipping the Go stubs check: ${problems.join(', ')} (make -C examples/go-worker tools)`);
      ctx.skip(`${problems.join(', ')}: make -C examples/go-worker tools`);
    }
    const out = join(scratch, 'go-gen');
    const buf = join(REPO_ROOT, 'node_modules', '.bin', 'buf');
    await exec(buf, ['generate', '-o', out], { cwd: GO_DIR, env: { ...process.env, PATH: `${goBin()}:${process.env.PATH ?? ''}` } });
    expect(await tree(join(out, 'gen')), 'examples/go-worker/gen is stale: run make -C examples/go-worker gen').toEqual(await tree(join(GO_DIR, 'gen')));
  });
});

import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { WorkerServiceClient } from '../../src/gen/evora/v1/worker.js';
import { EvoraWorker, type Job, type JobContext } from '../../src/sdk/index.js';
import { CHAOS_QUEUES } from './jobs.js';

/**
 * One SDK worker process of the chaos suite (started by test/chaos/procs.ts with an IPC
 * channel). Its handlers do what the job's kind says (test/chaos/jobs.ts) and return
 * `{ jobId, attempt, token, workerId, pid, nonce }`, so the stored result tells which
 * execution's completion the database accepted.
 *
 * A handler that notices it was frozen (SIGSTOP) for longer than the lease is a zombie: its
 * lease has expired and the job was probably handed to someone else. It then really
 * attempts its stale completion with a unary CompleteJob carrying its old lease token (the
 * SDK alone would drop the report once told the lease was lost), and tells the orchestrator
 * what the server answered. The server must refuse it whenever the lease moved on; the
 * verdict comes from the database, not from here (test/chaos/checks.ts).
 *
 * Settings come from the environment: CHAOS_ADDRESS, CHAOS_SLOTS, CHAOS_INDEX,
 * CHAOS_LEASE_MS. SIGTERM stops the worker gracefully and exits 0; anything else that ends
 * this process is a crash the orchestrator counts.
 */

const address = required('CHAOS_ADDRESS');
const slots = Number(required('CHAOS_SLOTS'));
const leaseMs = Number(required('CHAOS_LEASE_MS'));
const workerId = `chaos-w${required('CHAOS_INDEX')}-${process.pid}`;

function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`worker: ${name} is not set`);
  return v;
}

function log(level: string, msg: string, fields: object = {}): void {
  process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), level, workerId, msg, ...fields })}\n`);
}

/** Messages to the orchestrator (ignored when there is no IPC channel). */
type ToParent =
  | { t: 'ready' }
  | { t: 'zombie'; jobId: string; outcome: 'refused' | 'accepted' | 'error'; code: string }
  | { t: 'stats'; stats: object };

function tell(msg: ToParent): void {
  if (process.send && process.connected) process.send(msg);
}

const raw = new WorkerServiceClient(address, grpc.credentials.createInsecure());

/**
 * Sleeps `ms` of wall-clock time in short steps; returns the longest gap between two steps
 * (large when the process was frozen meanwhile).
 */
async function sleepWatching(ms: number): Promise<number> {
  const start = Date.now();
  let last = start;
  let maxGap = 0;
  for (;;) {
    const left = start + ms - Date.now();
    if (left <= 0) break;
    const step = Math.min(left, 100);
    await new Promise((r) => setTimeout(r, step));
    const now = Date.now();
    maxGap = Math.max(maxGap, now - last - step);
    last = now;
  }
  return maxGap;
}

/** The zombie's stale completion, really sent: a unary CompleteJob under its old token. */
function zombieComplete(jobId: string, leaseToken: string, result: Record<string, unknown>): Promise<void> {
  return new Promise((resolveCall) => {
    raw.completeJob({ jobId, leaseToken, result: { ...result, zombie: true } }, new grpc.Metadata(), { deadline: Date.now() + 10_000 },
      (err) => {
        const code = err ? (grpc.status[err.code] ?? String(err.code)) : 'OK';
        const outcome = !err ? 'accepted' : err.code === grpc.status.FAILED_PRECONDITION ? 'refused' : 'error';
        log(outcome === 'refused' ? 'info' : 'warn', 'zombie completion answered', { jobId, code, outcome });
        tell({ t: 'zombie', jobId, outcome, code });
        resolveCall();
      });
  });
}

async function handle(job: Job, ctx: JobContext): Promise<Record<string, unknown>> {
  const payload = job.payload as { i: number; ms: number };
  const maxGap = await sleepWatching(payload.ms);
  if (job.type === 'doomed') throw new Error(`doomed job ${payload.i}: always fails`);
  if (job.type === 'flaky' && job.attempt === 1) throw new Error(`flaky job ${payload.i}: the first attempt fails`);
  const result = { jobId: job.id, attempt: job.attempt, token: ctx.leaseToken, workerId, pid: process.pid, nonce: randomUUID() };
  if (maxGap > leaseMs) {
    log('info', 'frozen past the lease: attempting the stale completion', { jobId: job.id, gapMs: maxGap });
    await zombieComplete(job.id, ctx.leaseToken, result);
  }
  return result;
}

const worker = new EvoraWorker({
  address,
  queues: [...CHAOS_QUEUES],
  slots,
  workerId,
  reconnect: { initialDelayMs: 100, maxDelayMs: 1000, jitter: 0.3 },
  logger: {
    warn: (obj, msg) => log('warn', msg, { detail: String((obj as { err?: unknown }).err ?? JSON.stringify(obj)) }),
    error: (obj, msg) => log('error', msg, { detail: String((obj as { err?: unknown }).err ?? JSON.stringify(obj)) }),
  },
});
for (const kind of ['fast', 'slow', 'flaky', 'doomed']) worker.handle(kind, handle);
worker.on('ready', (info) => {
  log('info', 'ready', { reconnect: info.reconnect, held: info.held });
  tell({ t: 'ready' });
});
worker.on('disconnected', ({ error }) => log('info', 'disconnected', { error: error.message }));
worker.on('error', (err) => log('error', 'worker error', { error: err.message }));

// The SDK's view of its slots, for the orchestrator's diagnostics of a run that does not settle.
setInterval(() => tell({ t: 'stats', stats: worker.stats() }), 2000).unref();

// The orchestrator is gone (killed itself): do not outlive it.
process.once('disconnect', () => process.exit(1));

process.once('SIGTERM', () => {
  void worker.stop({ timeoutMs: 3000, graceMs: 2000 }).then(
    (r) => {
      log('info', 'stopped', { unfinished: r.unfinished.length });
      raw.close();
      process.exit(0);
    },
    (err: unknown) => {
      log('error', 'stop failed', { error: String(err) });
      process.exit(1);
    },
  );
});

await worker.start();

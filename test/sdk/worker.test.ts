import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { EvoraServer } from '../../src/server/server.js';
import {
  EvoraClient,
  EvoraWorker,
  JobAbortedError,
  NonRetryableError,
  RetryAtError,
  SnoozeError,
  type EvoraWorkerOptions,
  type Job,
  type JobContext,
  type JobStateName,
} from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';
import { jobInState, waitFor } from '../helpers/wait.js';

let client: EvoraClient;
let server: EvoraServer;
let address: string;
let databaseUrl: string;
const workers: EvoraWorker[] = [];

beforeAll(async () => {
  ({ server, address, databaseUrl } = await serverSetup());
  client = new EvoraClient({ address });
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0, graceMs: 1_000 })));
});
afterAll(() => client.close());

function worker(opts: Partial<EvoraWorkerOptions> & { queues: string[] }): EvoraWorker {
  const w = new EvoraWorker({ address, workerId: `w-${queueName('')}`, ...opts });
  workers.push(w);
  return w;
}

/** A latch the test opens; handlers wait on it. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { open, opened };
}

function jobIn(id: string, state: JobStateName): Promise<Job> {
  return jobInState<Job>(client, id, state);
}

describe('EvoraWorker', () => {
  it('runs handlers concurrently up to its slots and completes each job with the handler result', async () => {
    const queue = queueName();
    const jobs = await client.submitMany(Array.from({ length: 9 }, (_, i) => ({ queue, type: 'square', payload: { n: i } })));
    const release = gate();
    let running = 0;
    let maxRunning = 0;
    const w = worker({ queues: [queue], slots: 3 });
    w.handle<{ n: number }>('square', async (job) => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      await release.opened;
      running--;
      return { square: job.payload.n * job.payload.n };
    });
    await w.start();
    await waitFor(() => running === 3, { what: 'three handlers running' });
    // The server agrees: three held, no free slot, nothing more pushed.
    expect(server.dispatcher.sessionStats()).toMatchObject({ sessions: 1, held: 3, free: 0 });
    expect(w.stats()).toMatchObject({ connected: true, running: 3, held: 3 });
    release.open();
    for (const { job } of jobs) {
      const done = await jobIn(job.id, 'COMPLETED');
      expect(done).toMatchObject({ attempt: 1, workerId: w.workerId, result: { square: (job.payload.n as number) ** 2 } });
    }
    expect(maxRunning).toBe(3);
  });

  it('thrown errors retry; NonRetryableError goes to the DLQ; retryAt, snooze, a type without handler left alone, and plain results', async () => {
    const queue = queueName();
    await client.upsertQueue(queue, { maxAttempts: 3, backoff: { kind: 'fixed', baseSeconds: 0, jitter: 0 } });
    const later = new Date(Date.now() + 3_600_000);
    const snoozeTo = new Date(Date.now() + 7_200_000);
    const attempts: Record<string, number[]> = {};
    const w = worker({ queues: [queue], slots: 4 });
    w.handle('flaky', (job) => {
      (attempts[job.id] ??= []).push(job.attempt);
      if (job.attempt === 1) throw new Error('smtp down');
      return { sent: true };
    })
      .handle('fatal', () => {
        throw new NonRetryableError('bad address');
      })
      .handle('later', (_job, ctx) => ctx.retryAt(later, 'rate limited'))
      .handle('sleepy', (_job, ctx) => ctx.snooze(snoozeTo))
      .handle('answer', () => 42)
      .handle('nothing', () => null)
      .handle('void', () => undefined);
    const submit = (type: string) => client.submit({ queue, type }).then((r) => r.job.id);
    const [flaky, fatal, retryLater, sleepy, unknown, answer, nothing, none] = await Promise.all(
      ['flaky', 'fatal', 'later', 'sleepy', 'unknown', 'answer', 'nothing', 'void'].map(submit),
    );
    await w.start();

    expect(await jobIn(flaky!, 'COMPLETED')).toMatchObject({ attempt: 2, lastError: null, result: { sent: true } });
    // The failed attempt's error is in the history, no longer on the completed job.
    expect((await client.attempts(flaky!)).map((a) => [a.outcome, a.error])).toEqual([['FAILED', 'smtp down'], ['COMPLETED', null]]);
    expect(attempts[flaky!]).toEqual([1, 2]);
    expect(await jobIn(fatal!, 'DLQ')).toMatchObject({ attempt: 1, lastError: 'bad address' });
    expect(await jobIn(answer!, 'COMPLETED')).toMatchObject({ result: { value: 42 } });
    // Every value but undefined is stored, null too.
    expect(await jobIn(nothing!, 'COMPLETED')).toMatchObject({ result: { value: null } });
    expect(await jobIn(none!, 'COMPLETED')).toMatchObject({ result: null });
    // Job-type routing: the worker declares its handlers' types, so a job of another type is
    // never given to it (the "no handler" DLQ path is only for a server without routing).
    expect(await client.get(unknown!)).toMatchObject({ state: 'PENDING', attempt: 0 });

    const retried = (await waitFor(async () => {
      const j = await client.get(retryLater!);
      return j.state === 'PENDING' && j.lastError ? j : null;
    }))!;
    expect(retried).toMatchObject({ attempt: 1, lastError: 'rate limited' });
    expect(retried.runAt?.getTime()).toBe(later.getTime());

    const snoozed = await waitFor(async () => {
      const j = await client.get(sleepy!);
      return j.state === 'PENDING' && j.runAt?.getTime() === snoozeTo.getTime() ? j : null;
    });
    expect(snoozed).toMatchObject({ attempt: 0, lastError: null });
  });

  it('ctx.snooze / ctx.retryAt / SnoozeError / RetryAtError with no valid time: the attempt fails with a TypeError naming the call', async () => {
    const queue = queueName();
    await client.upsertQueue(queue, { maxAttempts: 1 });
    const w = worker({ queues: [queue], slots: 4 });
    // Before, each failed with toISOString's bare "Invalid time value".
    w.handle('snoozeNaN', (_job, ctx) => ctx.snooze(NaN))
      .handle('retryAtInvalid', (_job, ctx) => ctx.retryAt(new Date('x')))
      .handle('snoozeError', () => {
        throw new SnoozeError(new Date(NaN));
      })
      .handle('retryAtError', () => {
        throw new RetryAtError(new Date(NaN), 'later');
      });
    const ids = await Promise.all(['snoozeNaN', 'retryAtInvalid', 'snoozeError', 'retryAtError'].map((type) => client.submit({ queue, type }).then((r) => r.job.id)));
    await w.start();
    const errors = await Promise.all(ids.map(async (id) => (await jobIn(id, 'DLQ')).lastError));
    expect(errors).toEqual([
      'ctx.snooze(ms) must be a finite number, got NaN',
      "ctx.retryAt's time must be a valid Date, got Invalid Date",
      'SnoozeError: runAt must be a valid Date, got Invalid Date',
      'RetryAtError: retryAt must be a valid Date, got Invalid Date',
    ]);
  });

  it('start() after stop() rejects, also for a worker that had started (it resolved as if the worker ran)', async () => {
    const queue = queueName();
    const w = worker({ queues: [queue] }).handle('t', () => null);
    await w.start();
    await w.stop();
    await expect(w.start()).rejects.toThrow(/^EvoraWorker: start\(\) after stop\(\)/);
    expect(w.stats()).toMatchObject({ connected: false });
  });

  it('an operator cancel reaches ctx.signal; the aborted handler ends the job CANCELLED', async () => {
    const queue = queueName();
    const { job } = await client.submit({ queue, type: 'long' });
    const started = gate();
    const w = worker({ queues: [queue], slots: 1 });
    w.handle('long', async (_job, ctx) => {
      started.open();
      await new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
    });
    const aborted: string[] = [];
    w.on('jobAborted', (e) => aborted.push(`${e.job.id}:${e.kind}`));
    await w.start();
    await started.opened;
    expect(await client.cancel(job.id)).toMatchObject({ state: 'RUNNING', cancelRequested: true });
    const done = await jobIn(job.id, 'CANCELLED');
    expect(done.lastError).toBe('an operator cancelled the job');
    expect(aborted).toEqual([`${job.id}:cancelled`]);
  });

  it('a handler that ignores a cancel does not hold its job RUNNING: within a lease length it is CANCELLED and its slot is free', async () => {
    // A hung handler (it never returns, never reads ctx.signal) while the worker keeps
    // heartbeating: the cancel used to leave the job "RUNNING (cancel requested)" for ever.
    const queue = queueName();
    await client.upsertQueue(queue, { leaseSeconds: 2 });
    const { job } = await client.submit({ queue, type: 'hang' });
    const started = gate();
    const w = worker({ queues: [queue], slots: 1 });
    w.handle('hang', async () => {
      started.open();
      await new Promise(() => {});
    });
    w.handle('next', async () => ({ ran: true }));
    const aborted: string[] = [];
    w.on('jobAborted', (e) => aborted.push(e.kind));
    await w.start();
    await started.opened;
    expect(await client.cancel(job.id)).toMatchObject({ state: 'RUNNING', cancelRequested: true });
    const done = await jobIn(job.id, 'CANCELLED');
    expect(done).toMatchObject({ attempt: 1, lastError: expect.stringMatching(/^lease expired/) });
    expect(aborted[0]).toBe('cancelled');
    // The worker's only slot is free again for the next job.
    const { job: next } = await client.submit({ queue, type: 'next' });
    expect(await jobIn(next.id, 'COMPLETED')).toMatchObject({ result: { ran: true } });
  });

  it('stop() drains: no new jobs, running handlers finish and are acknowledged, then the stream closes', async () => {
    const queue = queueName();
    const jobs = await client.submitMany(Array.from({ length: 5 }, (_, i) => ({ queue, type: 'work', payload: { i } })));
    const release = gate();
    const ran: string[] = [];
    const w = worker({ queues: [queue], slots: 2 });
    w.handle('work', async (job) => {
      ran.push(job.id);
      await release.opened;
      return { ok: true };
    });
    await w.start();
    await waitFor(() => ran.length === 2, { what: 'two handlers running' });
    const stopping = w.stop({ timeoutMs: 20_000 });
    expect(w.stats().draining).toBe(true);
    release.open();
    expect(await stopping).toEqual({ unfinished: [] });
    expect(ran).toHaveLength(2);
    // The two that ran are COMPLETED (acked before stop resolved); the rest were never taken.
    for (const { job } of jobs) {
      const now = await client.get(job.id);
      if (ran.includes(job.id)) expect(now).toMatchObject({ state: 'COMPLETED', attempt: 1 });
      else expect(now).toMatchObject({ state: 'PENDING', attempt: 0, workerId: null });
    }
    expect(w.stats()).toMatchObject({ connected: false, running: 0, awaitingAck: 0 });
    await waitFor(() => server.dispatcher.sessionStats().sessions === 0, { what: 'the session to close' });
  });

  it('stop() past its timeout aborts the handlers (kind shutdown) and gives their jobs back untouched', async () => {
    const queue = queueName();
    const { job } = await client.submit({ queue, type: 'stubborn' });
    const started = gate();
    let kind: string | null = null;
    const w = worker({ queues: [queue], slots: 1 });
    w.handle('stubborn', async (_job, ctx) => {
      started.open();
      await new Promise((_resolve, reject) =>
        ctx.signal.addEventListener('abort', () => {
          kind = (ctx.signal.reason as JobAbortedError).kind;
          reject(ctx.signal.reason);
        }),
      );
    });
    await w.start();
    await started.opened;
    expect(await w.stop({ timeoutMs: 50 })).toEqual({ unfinished: [] });
    expect(kind).toBe('shutdown');
    // Snoozed back: PENDING, the attempt given back, no error recorded.
    expect(await client.get(job.id)).toMatchObject({ state: 'PENDING', attempt: 0, lastError: null });
  });

  it('heartbeats keep a slow handler lease alive across several lease periods while another handler hangs', async () => {
    const queue = queueName();
    const LEASE_MS = 1_000;
    await client.upsertQueue(queue, { leaseSeconds: LEASE_MS / 1000, backoff: { kind: 'fixed', baseSeconds: 0, jitter: 0 } });
    const { job: slow } = await client.submit({ queue, type: 'slow' });
    const { job: hang } = await client.submit({ queue, type: 'hang' });
    const calls: string[] = [];
    /** Each job's lease ends as its handler saw them, by the server's clock. */
    const leaseSeen = new Map<string, number[]>();
    const watch = (job: Job, ctx: JobContext) => {
      const seen: number[] = [];
      leaseSeen.set(job.id, seen);
      return setInterval(() => {
        const t = ctx.leaseExpiresAt?.getTime();
        if (t !== undefined && t !== seen.at(-1)) seen.push(t);
      }, 20);
    };
    /** The lease was renewed to end four lease periods after the job started: it ran through three. */
    const renewedLong = (job: Job) => (leaseSeen.get(job.id)?.at(-1) ?? 0) - job.startedAt!.getTime() >= 4 * LEASE_MS;
    const w = worker({ queues: [queue], slots: 2 });
    w.handle('slow', async (job, ctx) => {
      calls.push(job.id);
      const timer = watch(job, ctx);
      // The work lasts until heartbeats have carried the lease over several periods.
      await waitFor(() => renewedLong(job), { what: 'the slow job renewed across several lease periods', timeoutMs: 30_000 });
      clearInterval(timer);
      return { done: true };
    });
    w.handle('hang', async (job, ctx) => {
      calls.push(job.id);
      const timer = watch(job, ctx);
      // Never finishes on its own; only a cancel ends it.
      await new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
      clearInterval(timer);
    });
    const ready = new Promise<{ leaseSeconds: number; heartbeatIntervalSeconds: number }>((r) => w.once('ready', r));
    await w.start();
    expect(await ready).toMatchObject({ leaseSeconds: 1 });

    // Had a lease lapsed, the server would have handed the job out again (attempt 2).
    const done = await jobIn(slow.id, 'COMPLETED');
    expect(done).toMatchObject({ attempt: 1, workerId: w.workerId, result: { done: true }, lastError: null });
    expect(leaseSeen.get(slow.id)!.length).toBeGreaterThan(3);
    // The hanging job kept its lease the whole time: same attempt, same worker, lease renewed.
    const hangStarted = (await client.get(hang.id)).startedAt!;
    await waitFor(() => renewedLong({ ...hang, startedAt: hangStarted }), { what: 'the hanging job renewed across several lease periods' });
    const hung = await client.get(hang.id);
    expect(hung).toMatchObject({ state: 'RUNNING', attempt: 1, workerId: w.workerId, lastError: null });
    expect(leaseSeen.get(hang.id)!.length).toBeGreaterThan(3);
    expect(calls.sort()).toEqual([slow.id, hang.id].sort());

    await client.cancel(hang.id);
    expect(await jobIn(hang.id, 'CANCELLED')).toMatchObject({ attempt: 1 });
    expect(calls).toHaveLength(2);
  });

  it('a lost lease aborts the handler (kind lease_lost) and its outcome is not reported', async () => {
    const queue = queueName();
    await client.upsertQueue(queue, { leaseSeconds: 1 });
    const { job } = await client.submit({ queue, type: 'victim' });
    const started = gate();
    let kind: string | null = null;
    const w = worker({ queues: [queue], slots: 1 });
    w.handle('victim', async (_job, ctx) => {
      started.open();
      await new Promise<void>((resolve) =>
        ctx.signal.addEventListener('abort', () => {
          kind = (ctx.signal.reason as JobAbortedError).kind;
          resolve(); // even a handler that returns normally after losing its lease reports nothing
        }),
      );
      return { stale: true };
    });
    const finished: string[] = [];
    w.on('jobFinished', (o) => finished.push(o.outcome));
    await w.start();
    await started.opened;
    // Another party now holds the lease (as if it had expired and been handed out again).
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      await db.query('UPDATE evora.jobs SET lease_token = gen_random_uuid() WHERE id = $1', [job.id]);
    } finally {
      await db.end();
    }
    await waitFor(() => finished.length === 1, { what: 'the handler to end' });
    expect(kind).toBe('lease_lost');
    expect(finished).toEqual(['lost']);
    expect(w.stats()).toMatchObject({ running: 0, held: 0, awaitingAck: 0 });
    const now = await client.get(job.id);
    expect(now).toMatchObject({ state: 'RUNNING', result: null });
  });

  it('start() rejects when the server refuses the hello', async () => {
    const w = worker({ queues: ['not a queue!'] });
    w.handle('x', () => undefined);
    await expect(w.start()).rejects.toMatchObject({ codeName: 'INVALID_ARGUMENT' });
  });
});

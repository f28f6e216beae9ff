import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EvoraClient, EvoraWorker, JobAbortedError, type Job, type JobStateName } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';
import { jobInState, waitFor } from '../helpers/wait.js';

/** Per-job backoff and timeout end to end: SDK submit options, the server's timeout sweep, the worker's abort. */

let client: EvoraClient;
let address: string;
const workers: EvoraWorker[] = [];

beforeAll(async () => {
  ({ address } = await serverSetup());
  client = new EvoraClient({ address });
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0, graceMs: 1_000 })));
});
afterAll(() => client.close());

function worker(queue: string): EvoraWorker {
  const w = new EvoraWorker({ address, workerId: `w-${queueName('')}`, queues: [queue], slots: 1 });
  workers.push(w);
  return w;
}

function jobIn(id: string, state: JobStateName): Promise<Job> {
  return jobInState<Job>(client, id, state);
}

describe('per-job policy', () => {
  it('a job whose handler never ends is failed by the server at its timeout, the handler sees the abort, it is retried, then dead-lettered', async () => {
    const queue = queueName();
    await client.upsertQueue(queue, { backoff: { kind: 'fixed', baseSeconds: 0, jitter: 0 } });
    const { job } = await client.submit({ queue, type: 'hang', timeoutSeconds: 1, maxAttempts: 2 });
    const seen: { attempt: number; kind: string }[] = [];
    const w = worker(queue);
    w.handle('hang', async (_job, ctx) => {
      // Never ends on its own, and heartbeats keep its lease: only the timeout stops it.
      await new Promise((_resolve, reject) =>
        ctx.signal.addEventListener('abort', () => {
          const reason: unknown = ctx.signal.reason;
          seen.push({ attempt: ctx.job.attempt, kind: reason instanceof JobAbortedError ? reason.kind : String(reason) });
          reject(reason);
        }),
      );
    });
    await w.start();
    const dead = await jobIn(job.id, 'DLQ');
    expect(dead).toMatchObject({ attempt: 2, lastError: 'attempt timed out after 1s' });
    await waitFor(() => seen.length === 2, { what: 'both attempts aborted' });
    expect(seen).toEqual([
      { attempt: 1, kind: 'timed_out' },
      { attempt: 2, kind: 'timed_out' },
    ]);
  });

  it("a job's own backoff (fixed 1 s) retries it while the queue's would wait ten minutes", async () => {
    const queue = queueName();
    await client.upsertQueue(queue, { backoff: { kind: 'fixed', baseSeconds: 600, jitter: 0 } });
    const { job } = await client.submit({ queue, type: 'flaky', backoff: { kind: 'fixed', baseSeconds: 1 } });
    const w = worker(queue);
    w.handle('flaky', async (_job, ctx) => {
      if (ctx.job.attempt === 1) throw new Error('first attempt fails');
      return { attempt: ctx.job.attempt };
    });
    await w.start();
    const done = await jobIn(job.id, 'COMPLETED');
    expect(done).toMatchObject({ attempt: 2, result: { attempt: 2 } });
  });
});

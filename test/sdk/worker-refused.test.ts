import { beforeAll, describe, expect, it } from 'vitest';
import { EvoraClient, EvoraWorker, type JobOutcome } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';
import { jobInState, waitFor } from '../helpers/wait.js';

/**
 * A report the server refuses as invalid (ACK_RESULT_INVALID: a result with a NUL, which
 * PostgreSQL's jsonb cannot store; a snooze past 9999-12-31) ends the job at once: the
 * worker fails it instead under the same lease, non-retryable, with the refused report and
 * the server's reason in the error. Without that
 * the lease ran out, the handler ran again, and the job ended in the DLQ as "lease expired".
 * Against a real server.
 */

let address: string;
beforeAll(async () => {
  ({ address } = await serverSetup());
});

/**
 * Runs one job of a fresh queue (5 attempts) through a worker whose handler is `handler`,
 * and returns how the worker reported it, the job's id, how many times the handler ran,
 * and the client (closed after `check`).
 */
async function refusedOnce(
  handler: Parameters<EvoraWorker['handle']>[1],
  check: (r: { outcome: JobOutcome; jobId: string; runs: number; client: EvoraClient; worker: EvoraWorker }) => Promise<void>,
): Promise<void> {
  const queue = queueName('refused');
  const client = new EvoraClient({ address });
  const worker = new EvoraWorker({ address, queues: [queue], slots: 1 });
  let runs = 0;
  worker.handle('t', (job, ctx) => {
    runs++;
    return handler(job, ctx);
  });
  const finished: JobOutcome[] = [];
  worker.on('jobFinished', (o) => finished.push(o));
  try {
    await client.upsertQueue(queue, { maxAttempts: 5 });
    await worker.start();
    const { job } = await client.submit({ queue, type: 't' });
    await waitFor(() => finished.length === 1, { what: 'the job to finish' });
    await check({ outcome: finished[0]!, jobId: job.id, runs, client, worker });
  } finally {
    await worker.stop({ timeoutMs: 1_000, graceMs: 1_000 });
    client.close();
  }
}

describe('EvoraWorker and a result the server refuses', () => {
  it('a refused complete: the job goes to the DLQ at once with "complete refused: <reason>", its handler run once', async () => {
    await refusedOnce(
      () => ({ text: 'a\u0000b' }),
      async ({ outcome: o, jobId, runs, client }) => {
        expect(o).toMatchObject({ outcome: 'failed', accepted: true, ackResult: 'accepted', refused: { outcome: 'completed' } });
        expect(o.refused!.reason).not.toBe('');
        expect(o.error).toBe(`complete refused: ${o.refused!.reason}`);
        expect(await jobInState(client, jobId, 'DLQ')).toMatchObject({ attempt: 1, lastError: o.error });
        expect(runs).toBe(1);
      },
    );
  });

  it('a result with a lone surrogate (valid JSON, refused by jsonb) is refused too, not answered RETRY_LATER until the lease ends', async () => {
    await refusedOnce(
      () => ({ text: 'a\ud800b' }),
      async ({ outcome: o, jobId, runs, client }) => {
        expect(o).toMatchObject({ outcome: 'failed', accepted: true, ackResult: 'accepted', refused: { outcome: 'completed' } });
        expect(o.refused!.reason).toMatch(/^result_json contains a lone UTF-16 surrogate \(\\ud800\)/);
        expect(await jobInState(client, jobId, 'DLQ')).toMatchObject({ attempt: 1, lastError: o.error });
        expect(runs).toBe(1);
        // The same text as a payload: the one readable line instead of PostgreSQL's.
        await expect(client.submit({ queue: 'q', type: 't', payload: { text: '\udc00' } })).rejects.toMatchObject({
          codeName: 'INVALID_ARGUMENT', message: expect.stringMatching(/^payload_json contains a lone UTF-16 surrogate \(\\udc00\)/),
        });
      },
    );
  });

  it('a refused snooze: the job goes to the DLQ at once with "snooze refused: <reason>", its handler run once', async () => {
    await refusedOnce(
      // Past the last time the server takes (9999-12-31): a run_at it refuses as invalid.
      (_job, ctx) => ctx.snooze(new Date(Date.UTC(10_000, 0, 2))),
      async ({ outcome: o, jobId, runs, client }) => {
        expect(o).toMatchObject({ outcome: 'failed', accepted: true, ackResult: 'accepted', refused: { outcome: 'snoozed' } });
        expect(o.refused!.reason).toContain('run_at');
        expect(o.error).toBe(`snooze refused: ${o.refused!.reason}`);
        expect(await jobInState(client, jobId, 'DLQ')).toMatchObject({ attempt: 1, lastError: o.error });
        expect(runs).toBe(1);
      },
    );
  });

  it('a result over the server\'s message limit: refused by the worker itself, the job to the DLQ, the stream kept', async () => {
    // 5 MiB of JSON: more than the server takes in one gRPC message (4 MiB by default), so
    // written, it would end the stream (RESOURCE_EXHAUSTED) and be written again on the next.
    await refusedOnce(
      () => ({ text: 'x'.repeat(5 * 1024 * 1024) }),
      async ({ outcome: o, jobId, runs, client, worker }) => {
        expect(o).toMatchObject({ outcome: 'failed', accepted: true, ackResult: 'accepted', refused: { outcome: 'completed' } });
        expect(o.refused!.reason).toMatch(/^result is \d+ bytes of JSON; the server takes at most \d+$/);
        expect(o.error).toBe(`complete refused: ${o.refused!.reason}`);
        expect(await jobInState(client, jobId, 'DLQ')).toMatchObject({ attempt: 1, lastError: o.error });
        expect(runs).toBe(1);
        expect(worker.stats().reconnects).toBe(0);
      },
    );
  });
});

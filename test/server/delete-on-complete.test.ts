import { beforeAll, describe, expect, it } from 'vitest';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Queue.delete_on_complete end to end in a real server: set over HTTP, jobs completed by an
 * SDK worker over the Work stream are acknowledged and gone (GetJob NOT_FOUND, ListJobs
 * empty) while the queue's stats count them, an idempotency key is free again, and turning
 * the setting off keeps the next completions with their results.
 */

let client: EvoraClient;
let address: string;
let httpUrl: string;
beforeAll(async () => {
  ({ address, httpUrl } = await serverSetup({ http: true }));
  client = new EvoraClient({ address });
  return () => client.close();
});

/** Runs `count` jobs' completions through an SDK worker; resolves with the accepted acks' job ids. */
async function runAll(queue: string, count: number): Promise<string[]> {
  const done: string[] = [];
  const worker = new EvoraWorker({ address, workerId: `w-${queue}`, queues: [queue], slots: 5 });
  worker.handle('t', (job) => ({ n: job.payload.n }));
  worker.on('jobFinished', (o) => {
    if (o.accepted && o.outcome === 'completed') done.push(o.job.id);
  });
  await worker.start({ timeoutMs: 10_000 });
  try {
    await waitFor(() => done.length >= count, { what: `${count} acknowledged completions` });
  } finally {
    await worker.stop({ timeoutMs: 2_000 });
  }
  return done;
}

describe('delete_on_complete in a running server', () => {
  it('deletes jobs the Work stream completes, counts them in stats, and keeps them again once turned off', async () => {
    const queue = queueName('doc');
    const put = await fetch(`${httpUrl}/v1/queues/${queue}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ deleteOnComplete: true }),
    });
    expect(put.status).toBe(201);
    expect(((await put.json()) as { queue: { deleteOnComplete?: boolean } }).queue.deleteOnComplete).toBe(true);
    expect((await client.getQueue(queue)).deleteOnComplete).toBe(true);

    const jobs = Array.from({ length: 20 }, (_, n) => ({ queue, type: 't', payload: { n }, ...(n === 0 ? { idempotencyKey: 'once' } : {}) }));
    const submitted = (await client.submitMany(jobs)).map((r) => r.job.id);
    const completed = await runAll(queue, 20);
    expect([...completed].sort()).toEqual([...submitted].sort());

    await expect(client.get(submitted[0]!)).rejects.toMatchObject({ code: 5 }); // NOT_FOUND
    expect((await client.list({ queue })).jobs).toEqual([]);
    const stats = await waitFor(
      async () => {
        const s = await client.queueStats(queue);
        return s.counts.COMPLETED === 20 ? s : null;
      },
      { what: 'the stats to count the 20 completions' },
    );
    expect(stats!.counts).toMatchObject({ PENDING: 0, RUNNING: 0, COMPLETED: 20 });

    // The idempotency key went with its job: the same submit makes a new one.
    const again = await client.submit({ queue, type: 't', payload: { n: 0 }, idempotencyKey: 'once' });
    expect(again.created).toBe(true);
    expect(again.job.id).not.toBe(submitted[0]);

    // Turned off: the next completion keeps its job and result.
    expect((await client.upsertQueue(queue, { deleteOnComplete: false })).queue.deleteOnComplete).toBe(false);
    const [kept] = await runAll(queue, 1);
    expect(kept).toBe(again.job.id);
    expect(await client.get(kept!)).toMatchObject({ state: 'COMPLETED', result: { n: 0 } });
  });

  it('a unary or HTTP completion of a deleted job answers OK without a job, and its resend LEASE_LOST', async () => {
    const queue = queueName('docu');
    await client.upsertQueue(queue, { deleteOnComplete: true });
    const { job } = await client.submit({ queue, type: 't' });
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${httpUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const claimed = await post('/v1/jobs/claim', { workerId: 'w-unary', queues: [queue] });
    const leased = (claimed.body.jobs as { job: { id: string }; leaseToken: string }[])[0]!;
    expect(leased.job.id).toBe(job.id);
    const done = await post(`/v1/jobs/${job.id}/complete`, { leaseToken: leased.leaseToken, result: { ok: true } });
    expect(done).toEqual({ status: 200, body: {} });
    await expect(client.get(job.id)).rejects.toMatchObject({ code: 5 }); // deleted: NOT_FOUND
    const again = await post(`/v1/jobs/${job.id}/complete`, { leaseToken: leased.leaseToken });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('FAILED_PRECONDITION');
  });
});

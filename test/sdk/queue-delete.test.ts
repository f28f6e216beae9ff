import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';
import { jobInState, waitFor } from '../helpers/wait.js';

/**
 * client.deleteQueue against a real server, and what a worker subscribed to the queue meets:
 * its stream stays open while the queue is gone, and it takes the queue's jobs again once a
 * submit creates the queue again (with the defaults).
 */

let client: EvoraClient;
let address: string;
const workers: EvoraWorker[] = [];
beforeAll(async () => {
  ({ address } = await serverSetup());
  client = new EvoraClient({ address });
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop({ timeoutMs: 0, graceMs: 1_000 })));
  client.close();
});

describe('client.deleteQueue', () => {
  it('deletes an empty paused queue; FAILED_PRECONDITION with a job in it; NOT_FOUND after', async () => {
    const queue = queueName('sdel');
    await client.upsertQueue(queue, { maxAttempts: 2 });
    await client.pauseQueue(queue);
    const { job } = await client.submit({ queue, type: 't' });
    await expect(client.deleteQueue(queue)).rejects.toMatchObject({ codeName: 'FAILED_PRECONDITION' });
    await client.cancel(job.id);
    await waitFor(
      async () => {
        await client.purgeJobs({ queue });
        return client.deleteQueue(queue).then(() => true, (err: { codeName?: string }) => (err.codeName === 'FAILED_PRECONDITION' ? false : Promise.reject(err)));
      },
      { what: 'the queue deleted once its job is purged' },
    );
    await expect(client.getQueue(queue)).rejects.toMatchObject({ codeName: 'NOT_FOUND' });
    await expect(client.deleteQueue(queue)).rejects.toMatchObject({ codeName: 'NOT_FOUND' });
    expect((await client.listQueues()).map((q) => q.name)).not.toContain(queue);
  });

  it('a worker on a deleted queue keeps its stream and runs the jobs of the queue created again by a submit', async () => {
    const queue = queueName('swrk');
    await client.upsertQueue(queue, { maxAttempts: 7 });
    const w = new EvoraWorker({ address, workerId: `w-${queue}`, queues: [queue], slots: 2 });
    workers.push(w);
    w.handle('t', async () => ({ ok: true }));
    await w.start();
    await client.deleteQueue(queue);
    const { job } = await client.submit({ queue, type: 't' });
    expect(job.maxAttempts).toBe(5);
    expect(await jobInState(client, job.id, 'COMPLETED')).toMatchObject({ workerId: `w-${queue}` });
    expect(w.stats()).toMatchObject({ connected: true });
    expect((await client.getQueue(queue)).paused).toBe(false);
  });
});

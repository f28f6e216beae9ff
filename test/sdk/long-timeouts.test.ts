import { beforeAll, describe, expect, it } from 'vitest';
import { EvoraClient, EvoraWorker, type WorkerEvents } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';
import { jobInState, waitFor } from '../helpers/wait.js';

/**
 * Timeouts and deadlines of Infinity, or longer than setTimeout's limit (2^31-1 ms, about
 * 24.8 days), mean what they say: none, or that long. Node fires such a setTimeout after
 * 1 ms, and grpc-js expires such a deadline at once on the server. Against a real server.
 */

const DAYS_30 = 30 * 24 * 3600 * 1000;

let address: string;
beforeAll(async () => {
  ({ address } = await serverSetup());
});

describe('EvoraWorker: start and stop with Infinity and 30 days', () => {
  for (const timeoutMs of [Infinity, DAYS_30]) {
    it(`start({ timeoutMs: ${timeoutMs} }) resolves on the welcome; stop({ timeoutMs: ${timeoutMs} }) waits for the handler without aborting it`, async () => {
      const queue = queueName('long');
      const client = new EvoraClient({ address });
      const worker = new EvoraWorker({ address, queues: [queue], slots: 1 });
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let running = false;
      worker.handle('t', async () => {
        running = true;
        await released;
        return { done: true };
      });
      const aborted: WorkerEvents['jobAborted'][0][] = [];
      worker.on('jobAborted', (e) => aborted.push(e));
      try {
        await worker.start({ timeoutMs });
        const { job } = await client.submit({ queue, type: 't' });
        await waitFor(() => running, { what: 'the handler to run' });
        const stopped = worker.stop({ timeoutMs, graceMs: timeoutMs });
        // A round trip to the server, long after a timer misread as 1 ms would have fired.
        await jobInState(client, job.id, 'RUNNING');
        expect(aborted).toEqual([]);
        release();
        expect(await stopped).toEqual({ unfinished: [] });
        expect(aborted).toEqual([]);
        expect(await client.get(job.id)).toMatchObject({ state: 'COMPLETED', result: { done: true } });
      } finally {
        release();
        await worker.stop();
        client.close();
      }
    });
  }
});

describe('EvoraClient: a deadline of 30 days', () => {
  for (const submitOverStream of [true, false]) {
    it(`is kept, not expired at once (submitOverStream: ${submitOverStream})`, async () => {
      const client = new EvoraClient({ address, deadlineMs: DAYS_30, submitOverStream });
      try {
        const queue = queueName('long');
        const { job, created } = await client.submit({ queue, type: 't' });
        expect(created).toBe(true);
        expect(await client.get(job.id, { deadlineMs: DAYS_30 })).toMatchObject({ id: job.id });
        expect(await client.get(job.id, { deadlineMs: Infinity })).toMatchObject({ id: job.id });
      } finally {
        client.close();
      }
    });
  }
});

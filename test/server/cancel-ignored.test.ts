import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';
import { jobInState, waitFor } from '../helpers/wait.js';

/**
 * A cancelled job whose handler ignores the cancel (hung) while its worker heartbeats ends
 * CANCELLED one lease length after the cancel (job-heartbeat-many.sql), and the server says
 * so at warn, naming the worker: on-call learns that a handler there still runs, which no
 * other signal shows (the worker's slot is free again, its process busy all the same).
 */

type LogLine = { level: number; msg: string; [k: string]: unknown };
const lines: LogLine[] = [];
let client: EvoraClient;
let address: string;

beforeAll(async () => {
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as LogLine) });
  ({ address } = await serverSetup({ logger }));
  client = new EvoraClient({ address });
});
afterAll(() => client.close());

describe('a cancel the handler ignores', () => {
  it('is logged at warn with the worker that did not stop it', async () => {
    const queue = queueName('ignored');
    await client.upsertQueue(queue, { leaseSeconds: 2 });
    const w = new EvoraWorker({ address, queues: [queue], slots: 1, workerId: `hung-${queue}` });
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    w.handle('hang', async () => {
      started();
      await new Promise(() => {});
    });
    await w.start();
    try {
      const { job } = await client.submit({ queue, type: 'hang' });
      await running;
      await client.cancel(job.id);
      await jobInState(client, job.id, 'CANCELLED');
      const warned = await waitFor(() => lines.find((l) => l.level === 40 && l.job_id === job.id), { what: 'the warn line' });
      expect(warned).toMatchObject({
        msg: "cancelled job's lease ran out before its worker gave it up: the worker is gone, or its handler ignores cancels and may still be running there",
        queue,
        type: 'hang',
        worker_id: w.workerId,
        attempt: 1,
      });
    } finally {
      await w.stop({ timeoutMs: 0, graceMs: 1_000 });
    }
  });
});

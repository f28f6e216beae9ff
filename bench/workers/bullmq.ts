/**
 * BullMQ worker process: a Worker with a no-op processor. A completion counts on the
 * `completed` event, which fires after the job was moved to completed in Redis.
 */
import { Worker } from 'bullmq';
import type { SystemWorker, WorkerHooks, WorkerInit } from '../lib/protocol.js';

export function bullmqWorker(init: WorkerInit, hooks: WorkerHooks): SystemWorker {
  const c = init.config;
  const keep = c.removeOnComplete === true ? { removeOnComplete: { count: 0 } } : {};
  const worker = new Worker(
    init.queue,
    async (job) => {
      hooks.started(job.data);
    },
    {
      connection: { host: init.target.redis!.host, port: init.target.redis!.port, maxRetriesPerRequest: null },
      concurrency: Number(c.concurrency ?? 100),
      autorun: false,
      ...keep,
    },
  );
  worker.on('completed', () => hooks.done(1));
  worker.on('error', (err) => process.stderr.write(`bullmq worker error: ${String(err)}\n`));
  return {
    prepare: () => worker.waitUntilReady().then(() => undefined),
    go: async () => {
      void worker.run();
      await new Promise((r) => setTimeout(r, 10));
    },
    stop: () => worker.close(),
  };
}

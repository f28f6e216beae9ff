/**
 * Evora worker process: the build's EvoraWorker (bench/lib/evora-build.ts) with a no-op
 * handler. A completion counts when the server acknowledged it (`jobFinished` with
 * accepted = true): the ack is sent only after the completion has committed.
 */
import { evoraSdk } from '../lib/evora-build.js';
import type { SystemWorker, WorkerHooks, WorkerInit } from '../lib/protocol.js';

export async function evoraWorker(init: WorkerInit, hooks: WorkerHooks): Promise<SystemWorker> {
  const { EvoraWorker } = await evoraSdk(init.target.evoraSdkUrl);
  const slots = Number(init.config.slots ?? 200);
  const worker = new EvoraWorker({
    address: init.target.address!,
    tlsCa: init.target.tlsCa,
    token: init.target.token,
    queues: [init.queue],
    slots,
    workerId: `bench-${init.index}-${process.pid}`,
  });
  worker.handle('noop', (job) => {
    hooks.started(job.payload);
    return undefined;
  });
  worker.on('jobFinished', (o) => {
    if (o.accepted && o.outcome === 'completed') hooks.done(1);
  });
  return {
    prepare: async () => undefined,
    go: () => worker.start({ timeoutMs: 30_000 }),
    stop: async () => {
      await worker.stop({ timeoutMs: 5_000, graceMs: 2_000 });
    },
  };
}

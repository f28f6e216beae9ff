/**
 * An Evora worker: takes `resize` jobs from the `images` queue (the job every example
 * speaks, examples/ts/images.ts) and "resizes" the images, as the Go and Python workers do.
 *
 *   npm start                           # the server, in another terminal
 *   npx tsx examples/ts/worker.ts       # this worker (Ctrl-C drains and stops it)
 *
 * In your own project, import from the package instead: `from 'evora/client'`.
 */
import { EvoraWorker, NonRetryableError, type JsonObject, type WorkerLogger } from '../../src/sdk/index.js';
import { JOB_TYPE, QUEUE, ResizeError, resize } from './images.js';

/** The SDK logs nothing unless given a logger (pino works as is); this one prints to the console. */
const logger: WorkerLogger = {
  info: (fields, msg) => console.log(`[worker] ${msg}`, fields),
  warn: (fields, msg) => console.warn(`[worker] ${msg}`, fields),
  error: (fields, msg) => console.error(`[worker] ${msg}`, fields),
};

const worker = new EvoraWorker({
  // address: '127.0.0.1:50051',   // default: $EVORA_ADDRESS, else 127.0.0.1:50051
  queues: [QUEUE],
  slots: 4, // up to 4 jobs at once
  logger,
});

worker.handle<JsonObject>(JOB_TYPE, async (job, ctx) => {
  // The "work": sleep_ms of it, stopped early if the job is cancelled (ctx.signal).
  const ms = job.payload.sleep_ms;
  if (typeof ms === 'number' && ms > 0) await delay(ms, ctx.signal);
  try {
    const result = resize(job.payload, job.attempt, ctx.workerId);
    console.log(`resized ${result.image} to ${result.thumbnail} (job ${job.id}, attempt ${job.attempt})`);
    return result;
  } catch (err) {
    // A bad payload can never succeed: straight to the DLQ. Other failures are retried
    // with the queue's backoff (a plain Error).
    if (err instanceof ResizeError && !err.retryable) throw new NonRetryableError(err.message);
    throw err;
  }
});

worker.on('jobFinished', (o) => {
  if (o.outcome === 'failed') console.log(`job ${o.job.id} failed: ${o.error}`);
});

await worker.start();
console.log(`worker ${worker.workerId} is taking ${JOB_TYPE} jobs from ${worker.queues.join(', ')}; Ctrl-C to stop`);

process.once('SIGINT', () => {
  console.log('draining: finishing the jobs in hand, taking no new ones...');
  void worker.stop({ timeoutMs: 10_000 }).then(({ unfinished }) => {
    console.log(unfinished.length === 0 ? 'stopped cleanly' : `stopped; ${unfinished.length} job(s) left to their leases`);
  });
});

/** Waits ms, or rejects at once when the signal fires. */
function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });
}

/**
 * An Evora worker: takes `send_email` jobs from the `emails` queue and "sends" them.
 *
 *   npm start                           # the server, in another terminal
 *   npx tsx examples/ts/worker.ts       # this worker (Ctrl-C drains and stops it)
 *
 * In your own project, import from the package instead: `from 'evora/client'`.
 */
import { EvoraWorker, NonRetryableError, type WorkerLogger } from '../../src/sdk/index.js';

/** The SDK logs nothing unless given a logger (pino works as is); this one prints to the console. */
const logger: WorkerLogger = {
  info: (fields, msg) => console.log(`[worker] ${msg}`, fields),
  warn: (fields, msg) => console.warn(`[worker] ${msg}`, fields),
  error: (fields, msg) => console.error(`[worker] ${msg}`, fields),
};

const worker = new EvoraWorker({
  // address: '127.0.0.1:50051',   // default: $EVORA_ADDRESS, else 127.0.0.1:50051
  queues: ['emails'],
  slots: 4, // up to 4 jobs at once
  logger,
});

interface Email {
  to: string;
  subject: string;
}

worker.handle<Email>('send_email', async (job, ctx) => {
  const { to, subject } = job.payload;
  // A job that can never succeed goes straight to the DLQ.
  if (typeof to !== 'string' || !to.includes('@')) throw new NonRetryableError(`not an email address: ${JSON.stringify(to)}`);
  // The "work": 300-800 ms, stopped early if the job is cancelled (ctx.signal).
  await delay(300 + Math.random() * 500, ctx.signal);
  // Transient failures are retried with the queue's backoff.
  if (Math.random() < 0.25) throw new Error('SMTP server busy, try again');
  console.log(`sent "${subject}" to ${to} (job ${job.id}, attempt ${job.attempt})`);
  return { messageId: `<${job.id}@example.com>`, sentAt: new Date().toISOString() };
});

worker.on('jobFinished', (o) => {
  if (o.outcome === 'failed') console.log(`job ${o.job.id} failed: ${o.error}`);
});

await worker.start();
console.log(`worker ${worker.workerId} is taking jobs from ${worker.queues.join(', ')}; Ctrl-C to stop`);

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

/**
 * An Evora producer: configures the `images` queue, submits a batch of `resize` jobs (one
 * that fails once and is retried, one with a bad payload), and follows them until each one
 * is finished. The job is the one every example speaks (examples/ts/images.ts), so any of
 * the workers runs it: TypeScript, Go or Python.
 *
 *   npm start                                # the server, in another terminal
 *   npx tsx examples/ts/worker.ts            # a worker, in another terminal; or
 *                                            # examples/go-worker, examples/python-worker
 *   npx tsx examples/ts/producer.ts [count]  # this producer (default 5 jobs)
 *
 * In your own project, import from the package instead: `from 'evora/client'`.
 */
import { EvoraApiError, EvoraClient, type Job } from '../../src/sdk/index.js';
import { JOB_TYPE, QUEUE, demoPayloads } from './images.js';

const count = Number(process.argv[2] ?? 5);
const client = new EvoraClient(); // default: $EVORA_ADDRESS, else 127.0.0.1:50051

try {
  // Retries after 1 s, 2 s, 4 s ... (capped at 30 s), at most 5 attempts.
  await client.upsertQueue(QUEUE, { maxAttempts: 5, backoff: { kind: 'exponential', baseSeconds: 1, capSeconds: 30 } });

  // `count` images, one that fails its first attempt, one with no width (goes to the DLQ).
  const batch = demoPayloads(count).map((payload) => ({ queue: QUEUE, type: JOB_TYPE, payload }));
  // All or nothing: one transaction on the server.
  const submitted = await client.submitMany(batch);
  console.log(`submitted ${submitted.length} jobs`);

  // Submitting again with the same idempotency key returns the first job.
  const once = { queue: QUEUE, type: JOB_TYPE, payload: { image: 'daily-banner.png', width: 1200, height: 400 }, idempotencyKey: `banner-${new Date().toISOString().slice(0, 10)}` };
  const first = await client.submit(once);
  const replay = await client.submit(once);
  console.log(`daily banner: job ${first.job.id} (created: ${first.created}); replay gives ${replay.job.id} (created: ${replay.created})`);

  // Follow the jobs until they are finished (a worker must be running).
  const ids = [...submitted.map((r) => r.job.id), first.job.id];
  const deadline = Date.now() + 60_000;
  let jobs: Job[] = [];
  for (;;) {
    jobs = await Promise.all(ids.map((id) => client.get(id)));
    const open = jobs.filter((j) => j.state === 'PENDING' || j.state === 'RUNNING').length;
    if (open === 0 || Date.now() > deadline) break;
    console.log(`${open} job(s) still pending or running...`);
    await new Promise((r) => setTimeout(r, 1000));
  }
  for (const j of jobs) {
    const detail = j.state === 'COMPLETED' ? JSON.stringify(j.result) : (j.lastError ?? '');
    console.log(`${j.id}  ${j.state.padEnd(9)}  attempt ${j.attempt}/${j.maxAttempts}  ${detail}`);
  }

  // Errors carry the gRPC status.
  try {
    await client.get('00000000-0000-4000-8000-000000000000');
  } catch (err) {
    if (err instanceof EvoraApiError) console.log(`as expected: ${err.codeName} (${err.code}): ${err.message}`);
    else throw err;
  }
} finally {
  client.close();
}

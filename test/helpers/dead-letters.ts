import { NonRetryableError, type EvoraClient, type EvoraWorker } from '../../src/sdk/index.js';
import { waitFor } from './wait.js';

/**
 * Makes real dead letters: sets `queue` to one attempt, registers a handler of `type` on
 * `worker` that fails each job non-retryably with the error its payload carries, submits one
 * job per error, starts the worker and waits until all are DLQ. An empty error is thrown as
 * the empty string instead (a NonRetryableError('') reports its name); with one attempt it
 * dead-letters as well, with no error. While `failing.on` is false the handler succeeds, so a
 * group retried then leaves the DLQ. Returns the jobs' ids, in the errors' order.
 */
export async function deadLettersMake(
  client: EvoraClient,
  worker: EvoraWorker,
  job: { queue: string; type: string; errors: string[]; failing?: { on: boolean } },
): Promise<string[]> {
  const { queue, type, errors } = job;
  const failing = job.failing ?? { on: true };
  await client.upsertQueue(queue, { maxAttempts: 1 });
  worker.handle<{ error: string }>(type, async (j) => {
    if (!failing.on) return {};
    if (j.payload.error === '') throw '';
    throw new NonRetryableError(j.payload.error);
  });
  const res = await client.submitMany(errors.map((error) => ({ queue, type, payload: { error } })));
  await worker.start();
  await waitFor(async () => (await client.list({ queue, type, states: 'DLQ', pageSize: 1000 })).jobs.length === errors.length, {
    what: `${errors.length} DLQ jobs`,
    timeoutMs: 20_000,
  });
  return res.map((r) => r.job.id);
}

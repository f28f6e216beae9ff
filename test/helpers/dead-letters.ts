import { NonRetryableError, type EvoraClient, type EvoraWorker } from '../../src/sdk/index.js';
import type pg from 'pg';
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

/**
 * Inserts one DLQ job of `queue` (type `t`, error "boom") per entry of `finishedAt` (a
 * timestamptz as PostgreSQL reads it, to the microsecond), in two statements whatever the
 * number: created RUNNING on their first attempt, then dead-lettered, the only way into the
 * DLQ the table allows. For tests that need many dead letters, or their exact finished_at,
 * without a worker; no event reaches the outbox. Their ids, in the order of `finishedAt`.
 */
export async function deadLettersInsert(db: Pick<pg.Pool, 'query'>, queue: string, finishedAt: readonly string[]): Promise<string[]> {
  const { rows } = await db.query<{ id: string; n: number }>(
    `INSERT INTO evora.jobs (queue, type, state, attempt, max_attempts, worker_id, started_at, lease_token, locked_until, payload)
     SELECT $1, 't', 'RUNNING', 1, 1, 'sql', now(), gen_random_uuid(), now() + interval '1 hour', jsonb_build_object('n', v.n)
     FROM unnest($2::timestamptz[]) WITH ORDINALITY AS v(at, n)
     RETURNING id, (payload->>'n')::int AS n`,
    [queue, finishedAt],
  );
  const ids = rows.sort((a, b) => a.n - b.n).map((r) => r.id);
  await db.query(
    `UPDATE evora.jobs j SET state = 'DLQ', finished_at = v.at, lease_token = NULL, locked_until = NULL, last_error = 'boom'
     FROM unnest($1::uuid[], $2::timestamptz[]) AS v(id, at) WHERE j.id = v.id`,
    [ids, finishedAt],
  );
  return ids;
}

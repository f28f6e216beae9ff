import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status, type ServiceError } from '@grpc/grpc-js';
import pg from 'pg';
import { AttemptOutcome, JobState, type JobAttempt, type SubmitJobRequest } from '../../src/gen/evora/v1/job.js';
import type { LeasedJob } from '../../src/gen/evora/v1/worker.js';
import { queueName } from '../helpers/factories.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Attempt history (docs/api.md "Attempt history"): every attempt's number, worker, start,
 * end, outcome and error through GetJob and ListJobAttempts; a completed job shows no stale
 * last_error; the happy path writes no history row; the rows go with their job.
 */

let clients: Clients;
let sql: pg.Client;
beforeAll(async () => {
  let databaseUrl: string;
  ({ clients, databaseUrl } = await serverSetup({ pruneIntervalMs: '200' }));
  sql = new pg.Client({ connectionString: databaseUrl });
  await sql.connect();
});
afterAll(async () => {
  await sql?.end();
});

/** A queue that retries at once (fixed backoff of 0). */
async function queueRetryingAtOnce(extra: { leaseSeconds?: number } = {}): Promise<string> {
  const queue = queueName();
  await call(clients.queues, 'upsertQueue', { name: queue, ...extra, backoff: { kind: 3, base: { seconds: 0, nanos: 0 }, jitter: 0 } });
  return queue;
}
const submit = async (queue: string, fields: Partial<Omit<SubmitJobRequest, 'dependsOn' | 'dependsOnRefs'>> = {}) =>
  (await call(clients.jobs, 'submitJob', { queue, type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 5, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0), ...fields })).job!;
const claimOne = async (queue: string, workerId: string) =>
  waitFor<LeasedJob | undefined>(async () => (await call(clients.workers, 'claimJobs', { workerId, queues: [queue], max: 1, jobTypes: [] })).jobs[0], {
    what: `a job of ${queue} for ${workerId}`,
  }) as Promise<LeasedJob>;
const attemptsOf = async (id: string) => (await call(clients.jobs, 'listJobAttempts', { id })).attempts;
const historyRows = async (id: string) =>
  Number((await sql.query<{ n: string }>('SELECT count(*) AS n FROM evora.job_attempts WHERE job_id = $1', [id])).rows[0]!.n);
const shape = (a: JobAttempt) => ({ attempt: a.attempt, workerId: a.workerId, outcome: a.outcome, error: a.error, ended: a.finishedAt !== undefined });

describe('attempt history', () => {
  it('two failures and a success: outcomes, workers and errors; the completed job has no last_error', async () => {
    const queue = await queueRetryingAtOnce();
    const { id } = await submit(queue);
    for (const [workerId, error] of [['w-1', 'disk full'], ['w-2', 'timeout talking to S3']] as const) {
      const leased = await claimOne(queue, workerId);
      await call(clients.workers, 'failJob', { jobId: id, leaseToken: leased.leaseToken, error, nonRetryable: false });
    }
    const last = await claimOne(queue, 'w-3');
    // While it runs, the third attempt is listed as RUNNING, with no end.
    expect((await attemptsOf(id)).map(shape)[2]).toEqual({ attempt: 3, workerId: 'w-3', outcome: AttemptOutcome.ATTEMPT_OUTCOME_RUNNING, error: '', ended: false });
    await call(clients.workers, 'completeJob', { jobId: id, leaseToken: last.leaseToken });

    const res = await call(clients.jobs, 'getJob', { id });
    expect(res.job!.state).toBe(JobState.JOB_STATE_COMPLETED);
    expect(res.job!.lastError).toBe('');
    expect(res.attempts.map(shape)).toEqual([
      { attempt: 1, workerId: 'w-1', outcome: AttemptOutcome.ATTEMPT_OUTCOME_FAILED, error: 'disk full', ended: true },
      { attempt: 2, workerId: 'w-2', outcome: AttemptOutcome.ATTEMPT_OUTCOME_FAILED, error: 'timeout talking to S3', ended: true },
      { attempt: 3, workerId: 'w-3', outcome: AttemptOutcome.ATTEMPT_OUTCOME_COMPLETED, error: '', ended: true },
    ]);
    for (const a of res.attempts) expect(a.finishedAt!.getTime()).toBeGreaterThanOrEqual(a.startedAt!.getTime());
    expect(res.attempts[2]!.finishedAt).toEqual(res.job!.finishedAt);
    expect(await attemptsOf(id)).toEqual(res.attempts);
  });

  it('a job that succeeds on its first attempt writes no history row', async () => {
    const queue = await queueRetryingAtOnce();
    const { id } = await submit(queue);
    const leased = await claimOne(queue, 'w-happy');
    await call(clients.workers, 'completeJob', { jobId: id, leaseToken: leased.leaseToken });
    expect(await historyRows(id)).toBe(0);
    expect((await attemptsOf(id)).map(shape)).toEqual([
      { attempt: 1, workerId: 'w-happy', outcome: AttemptOutcome.ATTEMPT_OUTCOME_COMPLETED, error: '', ended: true },
    ]);
  });

  it('a lease that expires is LEASE_EXPIRED', async () => {
    const queue = await queueRetryingAtOnce({ leaseSeconds: 1 });
    const { id } = await submit(queue);
    await claimOne(queue, 'w-gone'); // never heartbeats
    const attempts = (await waitFor(async () => {
      const a = await attemptsOf(id);
      return a.length === 1 && a[0]!.outcome !== AttemptOutcome.ATTEMPT_OUTCOME_RUNNING ? a : null;
    }, { what: 'the lease to expire' }))!;
    expect(attempts.map(shape)).toEqual([
      { attempt: 1, workerId: 'w-gone', outcome: AttemptOutcome.ATTEMPT_OUTCOME_LEASE_EXPIRED, error: 'lease expired (worker w-gone)', ended: true },
    ]);
  });

  it('an attempt past its timeout is TIMED_OUT', async () => {
    const queue = await queueRetryingAtOnce();
    const { id } = await submit(queue, { timeout: { seconds: 0, nanos: 300_000_000 } });
    await claimOne(queue, 'w-slow');
    const attempts = (await waitFor(async () => {
      const a = await attemptsOf(id);
      return a.length >= 1 && a[0]!.outcome !== AttemptOutcome.ATTEMPT_OUTCOME_RUNNING ? a : null;
    }, { what: 'the attempt to time out' }))!;
    expect(shape(attempts[0]!)).toEqual({ attempt: 1, workerId: 'w-slow', outcome: AttemptOutcome.ATTEMPT_OUTCOME_TIMED_OUT, error: 'attempt timed out after 0.3s', ended: true });
  });

  it('a snooze is SNOOZED and its number is used again; a cancel that ends an attempt is CANCELLED', async () => {
    const queue = await queueRetryingAtOnce();
    const { id } = await submit(queue);
    const first = await claimOne(queue, 'w-a');
    await call(clients.workers, 'snoozeJob', { jobId: id, leaseToken: first.leaseToken });
    const second = await claimOne(queue, 'w-b');
    expect(second.job!.attempt).toBe(1);
    await call(clients.jobs, 'cancelJob', { id });
    await call(clients.workers, 'failJob', { jobId: id, leaseToken: second.leaseToken, error: 'stopped', nonRetryable: false });
    const res = await call(clients.jobs, 'getJob', { id });
    expect(res.job!.state).toBe(JobState.JOB_STATE_CANCELLED);
    expect(res.attempts.map(shape)).toEqual([
      { attempt: 1, workerId: 'w-a', outcome: AttemptOutcome.ATTEMPT_OUTCOME_SNOOZED, error: '', ended: true },
      { attempt: 1, workerId: 'w-b', outcome: AttemptOutcome.ATTEMPT_OUTCOME_CANCELLED, error: 'stopped', ended: true },
    ]);
  });

  it("retention deletes a job's history rows with the job", async () => {
    const queue = await queueRetryingAtOnce();
    const { id } = await submit(queue, { maxAttempts: 1 });
    const leased = await claimOne(queue, 'w-dlq');
    await call(clients.workers, 'failJob', { jobId: id, leaseToken: leased.leaseToken, error: 'bad', nonRetryable: true });
    expect(await historyRows(id)).toBe(1);
    // A DLQ retention of 1 ms: the leader's pruner deletes the job soon after.
    await call(clients.queues, 'upsertQueue', { name: queue, dlqRetention: { seconds: 0, nanos: 1_000_000 } });
    await waitFor(async () => (await sql.query('SELECT 1 FROM evora.jobs WHERE id = $1', [id])).rowCount === 0, { what: 'the pruner' });
    expect(await historyRows(id)).toBe(0);
  });

  it("PurgeJobs deletes a job's history rows with the job", async () => {
    const queue = await queueRetryingAtOnce();
    const { id } = await submit(queue, { maxAttempts: 1 });
    const leased = await claimOne(queue, 'w-purge');
    await call(clients.workers, 'failJob', { jobId: id, leaseToken: leased.leaseToken, error: 'bad', nonRetryable: true });
    expect(await historyRows(id)).toBe(1);
    // Purged once telemetry has recorded its events (PurgeJobs leaves it until then).
    await waitFor(
      async () => (await call(clients.jobs, 'purgeJobs', { filter: { queue, states: [], type: '', ids: [id] }, dryRun: false })).count === 1,
      { what: 'the purge' },
    );
    expect((await sql.query('SELECT 1 FROM evora.jobs WHERE id = $1', [id])).rowCount).toBe(0);
    expect(await historyRows(id)).toBe(0);
  });

  it('ListJobAttempts: NOT_FOUND for an unknown job, INVALID_ARGUMENT for an id that is not a UUID', async () => {
    const missing = (await call(clients.jobs, 'listJobAttempts', { id: '00000000-0000-4000-8000-000000000000' }).catch((e: unknown) => e)) as ServiceError;
    expect(missing.code).toBe(status.NOT_FOUND);
    const bad = (await call(clients.jobs, 'listJobAttempts', { id: 'x' }).catch((e: unknown) => e)) as ServiceError;
    expect(bad.code).toBe(status.INVALID_ARGUMENT);
    expect(bad.details).toBe('id "x" is not a UUID');
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { queueName } from '../helpers/factories.js';
import { httpSetup } from './http-setup.js';

/**
 * The worker twins of the Work stream over HTTP: claim (with a long-poll that a submit
 * ends), extend, progress, snooze, fail (into the DLQ), complete; a stale lease token is
 * 409 FAILED_PRECONDITION with the job unchanged.
 */

let api: Awaited<ReturnType<typeof httpSetup>>['api'];
beforeAll(async () => {
  ({ api } = await httpSetup());
});

/** Claims one job of `queue` (waiting up to 5 s). */
async function claimOne(queue: string): Promise<{ id: string; leaseToken: string }> {
  const res = await api('POST', '/v1/jobs/claim', { body: { workerId: 'http-worker', queues: [queue], max: 1, wait: '5s' } });
  expect(res.status).toBe(200);
  expect(res.body.jobs).toHaveLength(1);
  const leased = res.body.jobs[0];
  return { id: leased.job.id, leaseToken: leased.leaseToken };
}

describe('worker twins', () => {
  it('claim (long-poll), extend, progress, complete', async () => {
    const queue = queueName('w');
    // The claim waits; the submit after it ends the wait.
    const claiming = claimOne(queue);
    const submitted = await api('POST', '/v1/jobs', { body: { queue, type: 't', payload: { n: 1 } } });
    expect(submitted.status).toBe(201);
    const { id, leaseToken } = await claiming;
    expect(id).toBe(submitted.body.job.id);

    const extended = await api('POST', `/v1/jobs/${id}/extend`, { body: { leaseToken } });
    expect(extended.status).toBe(200);
    expect(typeof extended.body.leaseExpiresAt).toBe('string');
    const progress = await api('POST', `/v1/jobs/${id}/progress`, { body: { leaseToken, percent: 50, message: 'half' } });
    expect(progress.status).toBe(200);
    const done = await api('POST', `/v1/jobs/${id}/complete`, { body: { lease_token: leaseToken, result: { ok: true } } });
    expect(done.status).toBe(200);
    expect(done.body.job).toMatchObject({ id, state: 'JOB_STATE_COMPLETED', result: { ok: true } });

    const stale = await api('POST', `/v1/jobs/${id}/complete`, { body: { leaseToken } });
    expect(stale.status).toBe(409);
    expect(stale.body.code).toBe('FAILED_PRECONDITION');
  });

  it('an empty claim after its wait, snooze, fail into the DLQ, listed with states=DLQ', async () => {
    const queue = queueName('w');
    const empty = await api('POST', '/v1/jobs/claim', { body: { workerId: 'w', queues: [queue], max: 1, wait: '0.1s' } });
    expect(empty.status).toBe(200);
    expect(empty.body.jobs ?? []).toEqual([]);

    await api('POST', '/v1/jobs', { body: { queue, type: 't', maxAttempts: 1 } });
    const first = await claimOne(queue);
    const snoozed = await api('POST', `/v1/jobs/${first.id}/snooze`, { body: { leaseToken: first.leaseToken, runAt: new Date(Date.now() - 1000).toISOString() } });
    expect(snoozed.status).toBe(200);
    expect(snoozed.body.job.state).toBe('JOB_STATE_PENDING');

    const second = await claimOne(queue);
    const failed = await api('POST', `/v1/jobs/${second.id}/fail`, { body: { leaseToken: second.leaseToken, error: 'boom\nstack', nonRetryable: true } });
    expect(failed.status).toBe(200);
    expect(failed.body.job.state).toBe('JOB_STATE_DLQ');
    const dlq = await api('GET', '/v1/jobs', { query: { queue, states: 'DLQ' } });
    expect(dlq.body.jobs.map((j: { id: string }) => j.id)).toEqual([second.id]);
  });
});

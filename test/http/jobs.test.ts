import { beforeAll, describe, expect, it } from 'vitest';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';
import { httpSetup } from './http-setup.js';

/**
 * The jobs routes over real HTTP (fetch) against a real server: submit with the
 * Idempotency-Key header (201, then 200 on the replay), a batch, get, list with query
 * filters (enum short forms, paging, error group), attempts, cancel, retry one, bulk retry,
 * purge and bulk cancel.
 * Bodies are the proto3 JSON mapping (lowerCamelCase, enums by name, int64 as strings).
 */

let api: Awaited<ReturnType<typeof httpSetup>>['api'];
beforeAll(async () => {
  ({ api } = await httpSetup());
});

describe('POST /v1/jobs', () => {
  it('the Idempotency-Key header: 201 created, then 200 with the same job', async () => {
    const queue = queueName('h');
    const body = { queue, type: 'email', payload: { to: 'a@example.com' } };
    const first = await api('POST', '/v1/jobs', { body, headers: { 'Idempotency-Key': 'k-1' } });
    expect(first.status).toBe(201);
    expect(first.body.created).toBe(true);
    expect(first.body.job).toMatchObject({ queue, type: 'email', state: 'JOB_STATE_PENDING', idempotencyKey: 'k-1', payload: { to: 'a@example.com' } });
    const again = await api('POST', '/v1/jobs', { body, headers: { 'Idempotency-Key': 'k-1' } });
    expect(again.status).toBe(200);
    expect(again.body.created).toBeUndefined(); // false: proto3 JSON leaves it out
    expect(again.body.job.id).toBe(first.body.job.id);
  });

  it('a body key that differs from the header: 400, nothing submitted', async () => {
    const queue = queueName('h');
    const res = await api('POST', '/v1/jobs', { body: { queue, type: 't', idempotency_key: 'a' }, headers: { 'Idempotency-Key': 'b' } });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('INVALID_ARGUMENT');
    expect((await api('GET', '/v1/jobs', { query: { queue } })).body.jobs).toBeUndefined();
  });

  it('the header on a route that does not take it (a batch, a trigger), or empty: 400, nothing submitted, not ignored', async () => {
    const queue = queueName('h');
    const batch = await api('POST', '/v1/jobs/batch', { body: { jobs: [{ queue, type: 't' }] }, headers: { 'Idempotency-Key': 'b-1' } });
    expect(batch.status).toBe(400);
    expect(batch.body).toEqual({
      code: 'INVALID_ARGUMENT',
      message: 'POST /v1/jobs/batch takes no idempotency-key header (it would be ignored): only POST /v1/jobs takes it; a batch takes idempotencyKey on each job, a trigger triggerId',
    });
    expect((await api('PUT', '/v1/schedules/h-nightly', { body: { queue, type: 't', cron: '0 3 * * *' } })).status).toBe(201);
    expect((await api('POST', '/v1/schedules/h-nightly/trigger', { headers: { 'Idempotency-Key': 'tr-1' } })).status).toBe(400);
    // An empty key (an unset variable) would set none: each retry would submit again.
    const empty = await api('POST', '/v1/jobs', { body: { queue, type: 't' }, headers: { 'Idempotency-Key': '' } });
    expect(empty.body).toEqual({ code: 'INVALID_ARGUMENT', message: 'the idempotency-key header is empty: send a value, or leave the header out' });
    expect((await api('GET', '/v1/jobs', { query: { queue } })).body.jobs).toBeUndefined();
  });

  it('accepts proto (snake_case) names and a replay with the same body key', async () => {
    const queue = queueName('h');
    const res = await api('POST', '/v1/jobs', { body: { queue, type: 't', max_attempts: 3, idempotency_key: 'x' }, headers: { 'Idempotency-Key': 'x' } });
    expect(res.status).toBe(201);
    expect(res.body.job.maxAttempts).toBe(3);
  });
});

describe('the other jobs routes', () => {
  it('batch, get, attempts, list (filters, short enum forms, pages), cancel, retry, bulk retry, purge, bulk cancel', async () => {
    const queue = queueName('h');
    const batch = await api('POST', '/v1/jobs/batch', { body: { jobs: [1, 2, 3].map((n) => ({ queue, type: `t${n}`, priority: n })) } });
    expect(batch.status).toBe(200);
    expect(batch.body.results).toHaveLength(3);
    const ids: string[] = batch.body.results.map((r: { job: { id: string } }) => r.job.id);

    const got = await api('GET', `/v1/jobs/${ids[0]}`);
    expect(got.status).toBe(200);
    expect(got.body.job).toMatchObject({ id: ids[0], queue, type: 't1' });
    expect(typeof got.body.job.createdAt).toBe('string');
    const attempts = await api('GET', `/v1/jobs/${ids[0]}/attempts`);
    expect(attempts.status).toBe(200);
    expect(attempts.body.attempts ?? []).toEqual([]);

    const page1 = await api('GET', '/v1/jobs', { query: { queue, states: ['PENDING'], page_size: '2' } });
    expect(page1.status).toBe(200);
    expect(page1.body.jobs).toHaveLength(2);
    expect(page1.body.nextPageToken).toBeTruthy();
    const page2 = await api('GET', '/v1/jobs', { query: { queue, states: 'JOB_STATE_PENDING', pageSize: '2', page_token: page1.body.nextPageToken } });
    expect(page2.body.jobs).toHaveLength(1);
    // An enum's number, as the proto3 JSON mapping allows (1 = JOB_STATE_PENDING), lists
    // what its name lists; a number that is no state is 400, not a silent empty list.
    const byNumber = await api('GET', '/v1/jobs', { query: { queue, states: '1' } });
    expect(byNumber.status, byNumber.text).toBe(200);
    expect(byNumber.body.jobs).toHaveLength(3);
    const noState = await api('GET', '/v1/jobs', { query: { queue, states: '99' } });
    expect(noState.status, noState.text).toBe(400);
    expect(noState.body.code).toBe('INVALID_ARGUMENT');
    const byType = await api('GET', '/v1/jobs', { query: { queue, type: 't2' } });
    expect(byType.body.jobs.map((j: { id: string }) => j.id)).toEqual([ids[1]]);

    const cancelled = await api('POST', `/v1/jobs/${ids[0]}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.job.state).toBe('JOB_STATE_CANCELLED');
    const retried = await api('POST', `/v1/jobs/${ids[0]}/retry`, { body: {} });
    expect(retried.status).toBe(200);
    expect(retried.body.job.state).toBe('JOB_STATE_PENDING');

    await api('POST', `/v1/jobs/${ids[1]}/cancel`);
    const dry = await api('POST', '/v1/jobs/retry', { body: { filter: { queue, states: ['JOB_STATE_CANCELLED'] }, dryRun: true } });
    expect(dry.status).toBe(200);
    expect(dry.body.count).toBe('1'); // int64: a string
    // The bound that keeps the retry to the job counted: RFC 3339, to the millisecond, sent back as it came.
    expect(dry.body.finishedBefore).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const bulk = await api('POST', '/v1/jobs/retry', { body: { filter: { queue, states: ['JOB_STATE_CANCELLED'], finishedBefore: dry.body.finishedBefore } } });
    expect(bulk.body.count).toBe('1');

    await api('POST', `/v1/jobs/${ids[2]}/cancel`);
    // Purge leaves a job whose events telemetry has not recorded yet: called until it is taken.
    await waitFor(async () => {
      const purged = await api('POST', '/v1/jobs/purge', { body: { filter: { queue, states: ['JOB_STATE_CANCELLED'] } } });
      expect(purged.status).toBe(200);
      return purged.body.count === '1';
    }, { what: 'the cancelled job to be purged' });
    expect((await api('GET', `/v1/jobs/${ids[2]}`)).status).toBe(404);

    // The two left (ids[0] and ids[1], PENDING again): a bulk cancel, its dry run first.
    const toCancel = await api('POST', '/v1/jobs/cancel', { body: { filter: { queue }, dryRun: true } });
    expect(toCancel.status, toCancel.text).toBe(200);
    expect(toCancel.body.count).toBe('2');
    expect((await api('POST', '/v1/jobs/cancel', { body: { filter: { queue } } })).body.count).toBe('2');
    expect((await api('GET', '/v1/jobs', { query: { queue, states: 'CANCELLED' } })).body.jobs).toHaveLength(2);
    const finished = await api('POST', '/v1/jobs/cancel', { body: { filter: { queue, finishedBefore: '2030-01-01T00:00:00Z' } } });
    expect(finished.status).toBe(400);
    expect(finished.body.message).toMatch(/^filter\.finished_before cannot select jobs to cancel/);
  });
});

describe('GET /v1/jobs?error_group=', () => {
  it('lists one error group ("" = the jobs without an error); a group of more than one line is 400', async () => {
    const queue = queueName('h');
    await api('POST', '/v1/jobs/batch', { body: { jobs: [1, 2].map(() => ({ queue, type: 't', maxAttempts: 1 })) } });
    const claimed = await api('POST', '/v1/jobs/claim', { body: { workerId: 'http-worker', queues: [queue], max: 1, wait: '5s' } });
    const leased = claimed.body.jobs[0];
    await api('POST', `/v1/jobs/${leased.job.id}/fail`, { body: { leaseToken: leased.leaseToken, error: 'boom\nstack', nonRetryable: true } });
    const pendingId = (await api('GET', '/v1/jobs', { query: { queue, states: 'PENDING' } })).body.jobs[0].id;

    const ids = async (query: Record<string, string>) => ((await api('GET', '/v1/jobs', { query: { queue, ...query } })).body.jobs ?? []).map((j: { id: string }) => j.id);
    expect(await ids({ error_group: 'boom' })).toEqual([leased.job.id]);
    expect(await ids({ errorGroup: 'boom', states: 'DLQ' })).toEqual([leased.job.id]);
    expect(await ids({ error_group: '' })).toEqual([pendingId]);
    const bad = await api('GET', '/v1/jobs', { query: { queue, error_group: 'boom\nstack' } });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^error_group is more than one line/) });
  });
});

import * as grpc from '@grpc/grpc-js';
import { beforeAll, describe, expect, it } from 'vitest';
import { JobServiceClient, JobServiceService, type SubmitJobRequest } from '../../src/gen/evora/v1/job.js';
import { EvoraApiError, EvoraClient, EvoraWorker, type SubmitJobInput } from '../../src/sdk/index.js';
import { SubmitStreamClient } from '../../src/sdk/submit-stream.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';

/**
 * Numbers and dates the wire cannot carry (1.5 in an int32, NaN in a Duration, an invalid
 * Date): the submit that carries one throws a TypeError before any call, and it alone
 * fails; the SubmitJobStream and the other submits on it go on. Against a real server.
 * Also what the SDK fills in for a value left out (a rate limit's burst).
 */

let address: string;
beforeAll(async () => {
  ({ address } = await serverSetup());
});

const bad: [string, Partial<SubmitJobInput>][] = [
  ['priority 1.5', { priority: 1.5 }],
  ['maxAttempts 2.5', { maxAttempts: 2.5 }],
  ['priority 2^31', { priority: 2 ** 31 }],
  ['timeoutSeconds NaN', { timeoutSeconds: NaN }],
  ['timeoutSeconds Infinity', { timeoutSeconds: Infinity }],
  ['backoff.baseSeconds NaN', { backoff: { baseSeconds: NaN } }],
  ['backoff.jitter NaN', { backoff: { jitter: NaN } }],
  ['runAt Invalid Date', { runAt: new Date(NaN) }],
];

describe('a submit with a number or date the wire cannot carry', () => {
  it.each(bad)('%s: rejects alone with a TypeError; the submits beside it on the stream succeed', async (_name, fields) => {
    const client = new EvoraClient({ address });
    try {
      const queue = queueName('checks');
      const all = await Promise.allSettled(
        Array.from({ length: 50 }, (_, i) => client.submit({ queue, type: 't', payload: { i }, ...(i === 25 ? fields : {}) })),
      );
      expect(all[25]).toMatchObject({ status: 'rejected', reason: expect.any(TypeError) });
      expect(all.filter((r) => r.status === 'fulfilled')).toHaveLength(49);
      // Nothing was created for it: only the 49.
      expect((await client.list({ queue, pageSize: 100 })).jobs).toHaveLength(49);
    } finally {
      client.close();
    }
  });

  it('submitMany: a TypeError naming the job, before any call', async () => {
    const client = new EvoraClient({ address });
    try {
      const queue = queueName('checks');
      const err = await client.submitMany([{ queue, type: 't' }, { queue, type: 't', maxAttempts: 2.5 }]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TypeError);
      expect((err as TypeError).message).toContain('jobs[1].maxAttempts');
      expect((await client.list({ queue })).jobs).toHaveLength(0);
    } finally {
      client.close();
    }
  });

  it('a queue or type that is not a string (a JavaScript undefined), a job that is not an object: TypeError, nothing in a queue "undefined"', async () => {
    const client = new EvoraClient({ address });
    try {
      const queue = queueName('checks');
      // Before, undefined went on the wire as the text "undefined": a job in the queue "undefined".
      await expect(client.submit({ type: 't' } as unknown as SubmitJobInput)).rejects.toThrow(new TypeError('job.queue must be a string, got undefined'));
      await expect(client.submit({ queue } as unknown as SubmitJobInput)).rejects.toThrow(new TypeError('job.type must be a string, got undefined'));
      await expect(client.submitMany([{ queue, type: 't' }, { type: 't' } as unknown as SubmitJobInput])).rejects.toThrow(/^jobs\[1\]\.queue must be a string/);
      await expect(client.submitMany([null as unknown as SubmitJobInput])).rejects.toThrow(new TypeError('jobs[0] must be an object, got null'));
      await expect(client.submitMany({ queue, type: 't' } as unknown as SubmitJobInput[])).rejects.toThrow(new TypeError('submitMany takes an array of jobs, got object'));
      await expect(client.upsertQueue(undefined as unknown as string)).rejects.toThrow(new TypeError('queue name must be a string, got undefined'));
      expect(() => new EvoraWorker({ address, queues: 'emails' as unknown as string[] })).toThrow(/queues must be an array/);
      expect(() => new EvoraWorker({ address, queues: [queue, undefined as unknown as string] })).toThrow(/queues\[1\] must be a string, got undefined/);
      await expect(client.getQueue('undefined')).rejects.toMatchObject({ codeName: 'NOT_FOUND' });
      expect((await client.list({ queue })).jobs).toHaveLength(0);
    } finally {
      client.close();
    }
  });

  it('SubmitStreamClient: a request that does not encode rejects alone; the stream and the other submits go on', async () => {
    // The second guard, below EvoraClient's checks: a raw request with an int32 of 1.5.
    const jobs = new JobServiceClient(address, grpc.credentials.createInsecure());
    const m = JobServiceService.submitJobStream;
    const opened: number[] = [];
    const stream = new SubmitStreamClient(
      () => {
        opened.push(1);
        return jobs.makeBidiStreamRequest(m.path, (b: Buffer) => b, m.responseDeserialize);
      },
      () => Promise.reject(new Error('no unary fallback here')),
    );
    try {
      const queue = queueName('checks');
      const req = (i: number, priority = 0): SubmitJobRequest => ({
        queue, type: 't', payloadJson: Buffer.from(`{"i":${i}}`), priority, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [],
      });
      const all = await Promise.allSettled(Array.from({ length: 301 }, (_, i) => stream.submit(req(i, i === 300 ? 1.5 : 0), 10_000, undefined)));
      expect(all[300]).toMatchObject({ status: 'rejected', reason: expect.any(TypeError) });
      expect(all.filter((r) => r.status === 'fulfilled')).toHaveLength(300);
      expect(opened).toHaveLength(1);
    } finally {
      stream.close();
      jobs.close();
    }
  });
  it('the other calls (queues, schedules, lists, bulk filters): a TypeError naming the field, before any call', async () => {
    const client = new EvoraClient({ address });
    try {
      const queue = queueName('checks');
      const calls: [string, () => Promise<unknown>][] = [
        ['queue.maxAttempts', () => client.upsertQueue(queue, { maxAttempts: 2.5 })],
        ['queue.leaseSeconds', () => client.upsertQueue(queue, { leaseSeconds: NaN })],
        ['queue.rateLimit.perSecond', () => client.upsertQueue(queue, { rateLimit: { perSecond: NaN } })],
        ['queue.dlqRetentionSeconds', () => client.upsertQueue(queue, { dlqRetentionSeconds: Infinity })],
        ['queue.backoff.baseSeconds', () => client.upsertQueue(queue, { backoff: { baseSeconds: NaN, jitter: 0 } })],
        ['schedule.priority', () => client.upsertSchedule({ name: queue, cron: '* * * * *', queue, type: 't', priority: 1.5 })],
        ['pageSize', () => client.list({ queue, pageSize: 1.5 })],
        ['pageSize', () => client.listAuditEvents({ pageSize: 2 ** 31 })],
        ['filter.finishedBefore', () => client.purgeJobs({ queue, finishedBefore: new Date(NaN) }, { dryRun: true })],
      ];
      for (const [field, call] of calls) {
        const err = await call().catch((e: unknown) => e);
        expect(err, field).toBeInstanceOf(TypeError);
        expect((err as TypeError).message).toContain(field);
      }
      // Nothing was written: the queue and the schedule do not exist.
      expect(await client.getQueue(queue).catch((e: unknown) => (e as EvoraApiError).codeName)).toBe('NOT_FOUND');
      expect(await client.getSchedule(queue).catch((e: unknown) => (e as EvoraApiError).codeName)).toBe('NOT_FOUND');
    } finally {
      client.close();
    }
  });
});

describe('upsertQueue rateLimit without burst', () => {
  it('takes one second of the rate, at least 1 (as the CLI), instead of sending 0 and being refused for a burst it was not given', async () => {
    const client = new EvoraClient({ address });
    try {
      const queue = queueName('burst');
      expect((await client.upsertQueue(queue, { rateLimit: { perSecond: 5 } })).queue.rateLimit).toEqual({ perSecond: 5, burst: 5 });
      expect((await client.upsertQueue(queue, { rateLimit: { perSecond: 0.5 } })).queue.rateLimit).toEqual({ perSecond: 0.5, burst: 1 });
      expect((await client.upsertQueue(queue, { rateLimit: { perSecond: 2.5, burst: 1 } })).queue.rateLimit).toEqual({ perSecond: 2.5, burst: 1 });
      expect((await client.upsertQueue(queue, { rateLimit: { perSecond: 0 } })).queue.rateLimit).toBeNull();
    } finally {
      client.close();
    }
  });
});

import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/server/embedded-postgres.js';
import { EvoraClient, StatusCode } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { apiError } from '../helpers/grpc-status.js';
import { serverSetup } from '../helpers/server-setup.js';

let client: EvoraClient;
beforeAll(async () => {
  const { address } = await serverSetup();
  client = new EvoraClient({ address });
});
afterAll(() => client.close());

describe('jobs', () => {
  it('submit, get, list and listAll return domain objects: string states, Dates, nulls', async () => {
    const queue = queueName();
    const runAt = new Date(Date.now() + 3_600_000);
    const { job, created } = await client.submit({
      queue,
      type: 'send_email',
      payload: { to: 'a@example.com', at: new Date(0) as unknown as string },
      priority: -5,
      runAt,
      idempotencyKey: 'k1',
      maxAttempts: 7,
    });
    expect(created).toBe(true);
    expect(job).toMatchObject({
      queue,
      type: 'send_email',
      state: 'PENDING',
      priority: -5,
      attempt: 0,
      maxAttempts: 7,
      idempotencyKey: 'k1',
      workerId: null,
      result: null,
      lastError: null,
      cancelRequested: false,
      finishedAt: null,
      // Dates in payloads travel as ISO strings.
      payload: { to: 'a@example.com', at: '1970-01-01T00:00:00.000Z' },
    });
    expect(job.runAt?.getTime()).toBe(runAt.getTime());
    expect(job.createdAt).toBeInstanceOf(Date);

    const replay = await client.submit({ queue, type: 'send_email', payload: { to: 'a@example.com', at: '1970-01-01T00:00:00.000Z' }, priority: -5, runAt, idempotencyKey: 'k1', maxAttempts: 7 });
    expect(replay).toMatchObject({ created: false, job: { id: job.id } });

    expect(await client.get(job.id)).toEqual(job);

    const more = await client.submitMany(Array.from({ length: 4 }, (_, i) => ({ queue, type: 'other', payload: { i } })));
    expect(more.map((r) => r.created)).toEqual([true, true, true, true]);

    const page = await client.list({ queue, type: 'other', pageSize: 3 });
    expect(page.jobs).toHaveLength(3);
    expect(page.nextPageToken).toEqual(expect.any(String));
    const rest = await client.list({ queue, type: 'other', pageSize: 3, pageToken: page.nextPageToken });
    expect(rest).toMatchObject({ jobs: [expect.anything()], nextPageToken: null });

    const all: string[] = [];
    for await (const j of client.listAll({ queue, pageSize: 2 })) all.push(j.id);
    expect(all).toHaveLength(5);
    expect(new Set(all)).toEqual(new Set([job.id, ...more.map((r) => r.job.id)]));
    const limited: string[] = [];
    for await (const j of client.listAll({ queue, limit: 3, pageSize: 2 })) limited.push(j.id);
    expect(limited).toEqual(all.slice(0, 3));

    const pendingOnly = await client.list({ queue, states: ['pending'] });
    expect(pendingOnly.jobs).toHaveLength(5);
    expect((await client.list({ queue, states: 'DLQ' })).jobs).toEqual([]);
  });

  it('cancel a PENDING job, then retry it', async () => {
    const queue = queueName();
    const { job } = await client.submit({ queue, type: 't' });
    const cancelled = await client.cancel(job.id);
    expect(cancelled).toMatchObject({ id: job.id, state: 'CANCELLED' });
    expect(cancelled.finishedAt).toBeInstanceOf(Date);
    const retried = await client.retry(job.id);
    expect(retried).toMatchObject({ id: job.id, state: 'PENDING', attempt: 0, finishedAt: null });
  });

  it('submitMany is all or nothing', async () => {
    const queue = queueName();
    const err = await apiError(client.submitMany([{ queue, type: 'ok' }, { queue, type: 'bad type!' }]));
    expect(err.codeName).toBe('INVALID_ARGUMENT');
    expect(err.message).toMatch(/jobs\[1\]/);
    expect((await client.list({ queue })).jobs).toEqual([]);
  });
});

describe('typed errors carry the gRPC status and the server message', () => {
  it('NOT_FOUND, INVALID_ARGUMENT, ALREADY_EXISTS, FAILED_PRECONDITION', async () => {
    const missing = '00000000-0000-4000-8000-000000000000';
    const nf = await apiError(client.get(missing));
    expect(nf).toMatchObject({ code: StatusCode.NOT_FOUND, codeName: 'NOT_FOUND', method: 'GetJob', message: `job ${missing} not found` });
    expect((await apiError(client.getQueue('no_such_queue'))).codeName).toBe('NOT_FOUND');
    expect((await apiError(client.pauseQueue('no_such_queue'))).codeName).toBe('NOT_FOUND');

    const bad = await apiError(client.submit({ queue: 'has space', type: 't' }));
    expect(bad).toMatchObject({ code: StatusCode.INVALID_ARGUMENT, codeName: 'INVALID_ARGUMENT' });
    expect(bad.message).toMatch(/queue "has space"/);
    expect((await apiError(client.get('not-a-uuid'))).codeName).toBe('INVALID_ARGUMENT');

    const queue = queueName();
    const { job } = await client.submit({ queue, type: 't', payload: { a: 1 }, idempotencyKey: 'same' });
    const conflict = await apiError(client.submit({ queue, type: 't', payload: { a: 2 }, idempotencyKey: 'same' }));
    expect(conflict.codeName).toBe('ALREADY_EXISTS');

    const pre = await apiError(client.retry(job.id));
    expect(pre).toMatchObject({ code: StatusCode.FAILED_PRECONDITION, codeName: 'FAILED_PRECONDITION' });
    expect(pre.message).toMatch(/only DLQ or CANCELLED/);
  });

  it('bad input is refused before any call', async () => {
    await expect(client.list({ states: 'DONE' })).rejects.toThrow(TypeError);
    await expect(client.submit({ queue: 'q', type: 't', payload: [1, 2] as never })).rejects.toThrow(/payload must be a JSON object/);
  });

  it('UNAVAILABLE when nothing listens; DEADLINE_EXCEEDED when the server does not answer; CANCELLED by a signal', async () => {
    const nobody = new EvoraClient({ address: `127.0.0.1:${await freePort()}` });
    try {
      expect((await apiError(nobody.listQueues())).codeName).toBe('UNAVAILABLE');
    } finally {
      nobody.close();
    }

    // A TCP server that accepts connections and never speaks: calls hang until their deadline.
    const sockets = new Set<Socket>();
    const silent: Server = createServer((s) => sockets.add(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const port = (silent.address() as { port: number }).port;
    const hanging = new EvoraClient({ address: `127.0.0.1:${port}`, deadlineMs: 300 });
    try {
      expect((await apiError(hanging.get('00000000-0000-4000-8000-000000000000'))).codeName).toBe('DEADLINE_EXCEEDED');
      expect((await apiError(hanging.listQueues({ deadlineMs: 100 }))).codeName).toBe('DEADLINE_EXCEEDED');
      const ac = new AbortController();
      const pending = hanging.listQueues({ deadlineMs: Infinity, signal: ac.signal });
      ac.abort();
      expect((await apiError(pending)).codeName).toBe('CANCELLED');
    } finally {
      hanging.close();
      for (const s of sockets) s.destroy();
      await new Promise((r) => silent.close(r));
    }
  });
});

describe('queues', () => {
  it('upsert creates then updates; unset settings (and jitter) keep their values; pause, resume, list', async () => {
    const name = queueName();
    const first = await client.upsertQueue(name, { maxAttempts: 4, leaseSeconds: 20 });
    expect(first.created).toBe(true);
    expect(first.queue).toMatchObject({ name, maxAttempts: 4, leaseSeconds: 20, paused: false, maxConcurrency: 0 });
    expect(first.queue.backoff).toEqual({ kind: 'exponential', baseSeconds: 5, capSeconds: 3600, jitter: 0.2 });
    expect(first.queue.createdAt).toBeInstanceOf(Date);

    const second = await client.upsertQueue(name, { backoff: { kind: 'fixed', baseSeconds: 2 }, maxConcurrency: 3 });
    expect(second.created).toBe(false);
    expect(second.queue).toMatchObject({ maxAttempts: 4, leaseSeconds: 20, maxConcurrency: 3 });
    expect(second.queue.backoff).toEqual({ kind: 'fixed', baseSeconds: 2, capSeconds: 3600, jitter: 0.2 });
    const third = await client.upsertQueue(name, { backoff: { jitter: 0 } });
    expect(third.queue.backoff).toEqual({ kind: 'fixed', baseSeconds: 2, capSeconds: 3600, jitter: 0 });

    // Retention: the defaults, then set (0 = forever); unset keeps them.
    expect(first.queue).toMatchObject({ completedRetentionSeconds: 604_800, cancelledRetentionSeconds: 604_800, dlqRetentionSeconds: 2_592_000 });
    const kept = await client.upsertQueue(name, { completedRetentionSeconds: 3600, dlqRetentionSeconds: 0 });
    expect(kept.queue).toMatchObject({ completedRetentionSeconds: 3600, cancelledRetentionSeconds: 604_800, dlqRetentionSeconds: 0 });
    expect(await client.getQueue(name)).toMatchObject({ completedRetentionSeconds: 3600, dlqRetentionSeconds: 0, maxAttempts: 4 });

    // A new queue created with a backoff but no jitter keeps the server's default jitter.
    const other = queueName();
    const created = await client.upsertQueue(other, { backoff: { kind: 'linear' } });
    expect(created).toMatchObject({ created: true, queue: { backoff: { kind: 'linear', jitter: 0.2 } } });

    expect((await client.pauseQueue(name)).paused).toBe(true);
    expect((await client.getQueue(name)).paused).toBe(true);
    expect((await client.resumeQueue(name)).paused).toBe(false);
    const names = (await client.listQueues()).map((q) => q.name);
    expect(names).toEqual(expect.arrayContaining([name, other]));
    expect(names).toEqual([...names].sort());
  });
});

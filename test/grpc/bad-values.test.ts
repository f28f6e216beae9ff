/**
 * Values that pass a field's type but that PostgreSQL cannot store or compute with (a NUL
 * character, a time outside years 1..9999, an interval that overflows, an int64 beyond 2^53)
 * are refused before they reach a statement: INVALID_ARGUMENT with one line, nothing
 * changed, and in a batch of worker reports only the bad report is refused.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { JobState } from '../../src/gen/evora/v1/job.js';
import { queueName } from '../helpers/factories.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';

let clients: Clients;
beforeAll(async () => {
  ({ clients } = await serverSetup());
});

const ok = { type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) };
/** Seconds since the epoch of a time before year 1 and after year 9999. */
const YEAR_MINUS_5000 = -219_919_996_800;
const YEAR_20000 = 568_971_820_800;

async function refused(p: Promise<unknown>, message: RegExp): Promise<void> {
  const err = (await p.then(
    () => new Error('expected INVALID_ARGUMENT, got success'),
    (e: unknown) => e,
  )) as grpc.ServiceError;
  expect(grpc.status[err.code], err.details).toBe('INVALID_ARGUMENT');
  expect(err.details).not.toMatch(/\n/);
  expect(err.details).toMatch(message);
}

async function jobsIn(queue: string): Promise<number> {
  const res = await call(clients.jobs, 'listJobs', { queue, states: [], type: '', pageSize: 100, pageToken: '', idempotencyKey: '' } as never);
  return (res as { jobs: unknown[] }).jobs.length;
}

describe('values the database cannot hold are INVALID_ARGUMENT and change nothing', () => {
  it('submits: NUL in keys and payloads, times outside years 1..9999, unbounded backoffs, unknown kinds, a ref', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ idempotencyKey: 'k\u0000' }, /^idempotency_key contains a NUL character/],
      [{ concurrencyKey: 'c\u0000' }, /^concurrency_key contains a NUL character/],
      [{ payload: { a: 'x\u0000y' } }, /^payload contains a NUL character/],
      [{ payload: { ['k\u0000']: 1 } }, /^payload contains a NUL character/],
      [{ payload: undefined, payloadJson: Buffer.from('{"a":"\\u0000"}') }, /^payload_json contains a NUL character/],
      [{ runAt: new Date(YEAR_MINUS_5000 * 1000) }, /^run_at must be from 0001-01-01 to 9999-12-31/],
      [{ runAt: new Date(YEAR_20000 * 1000) }, /^run_at must be from 0001-01-01 to 9999-12-31/],
      [{ backoff: { kind: 0, jitter: 0, cap: { seconds: 1e15, nanos: 0 } } }, /^backoff.cap must be at most 365 days/],
      [{ backoff: { kind: 0, jitter: 0, base: { seconds: 400 * 86_400, nanos: 0 } } }, /^backoff.base must be at most 365 days/],
      [{ backoff: { kind: 99, jitter: 0 } }, /^backoff.kind 99 is not a known kind/],
      [{ ref: 'a' }, /^ref names a job for the others of one SubmitJobs call/],
    ];
    for (const [patch, message] of cases) {
      const queue = queueName();
      await refused(call(clients.jobs, 'submitJob', { ...ok, queue, ...patch } as never), message);
      expect(await jobsIn(queue)).toBe(0);
    }
    // A payload whose text has an escaped backslash before "u0000" holds no NUL: it is stored.
    const queue = queueName();
    const { job } = await call(clients.jobs, 'submitJob', { ...ok, queue, payload: { path: 'C:\\u0000' } } as never);
    expect(job!.payload).toEqual({ path: 'C:\\u0000' });
  });

  it('queues: a rate below one start per day, an unbounded backoff cap, an unknown kind', async () => {
    const queue = queueName();
    await refused(call(clients.queues, 'upsertQueue', { name: queue, rateLimit: { perSecond: 1e-300, burst: 1 } } as never), /^rate_limit.per_second must be at least 1\/86400/);
    await refused(call(clients.queues, 'upsertQueue', { name: queue, backoff: { kind: 0, jitter: 0, cap: { seconds: 1e15, nanos: 0 } } } as never), /^backoff.cap must be at most 365 days/);
    await refused(call(clients.queues, 'upsertQueue', { name: queue, backoff: { kind: 99, jitter: 0 } } as never), /^backoff.kind 99 is not a known kind/);
    const res = await call(clients.queues, 'listQueues', {} as never);
    expect((res as { queues: { name: string }[] }).queues.map((q) => q.name)).not.toContain(queue);
    // One start per day is the floor, and is taken.
    await call(clients.queues, 'upsertQueue', { name: queue, rateLimit: { perSecond: 1 / 86_400, burst: 1 } } as never);
  });
});

/** An object nested `depth` levels deep (itself level 1): {"a":{"a":...{"a":1}}}. */
function nested(depth: number): Record<string, unknown> {
  return depth === 1 ? { a: 1 } : { a: nested(depth - 1) };
}
/** JSON text of an object holding arrays `depth` levels deep in all: {"a":[[...[]]]}. */
function nestedArraysText(depth: number): Buffer {
  return Buffer.from(`{"a":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`);
}

describe('payloads and results nested deeper than every reader can decode are refused', () => {
  it('a payload (Struct or JSON text) more than 24 levels deep is INVALID_ARGUMENT; 24 is stored and reads back everywhere', async () => {
    const queue = queueName();
    await refused(call(clients.jobs, 'submitJob', { ...ok, queue, payload: nested(25) } as never), /^payload nests objects and arrays more than 24 levels deep$/);
    await refused(call(clients.jobs, 'submitJob', { ...ok, queue, payload: nested(40) } as never), /^the request could not be decoded/); // past the decoder's own limit
    await refused(
      call(clients.jobs, 'submitJob', { ...ok, queue, payload: undefined, payloadJson: nestedArraysText(25) } as never),
      /^payload_json nests objects and arrays more than 24 levels deep$/,
    );
    // Brackets inside strings are not nesting.
    const inString = Buffer.from(`{"a":"${'['.repeat(100)}\\"${'{'.repeat(100)}"}`); // an escaped quote inside
    expect((await call(clients.jobs, 'submitJob', { ...ok, queue, payload: undefined, payloadJson: inString } as never)).job!.payload).toEqual({
      a: `${'['.repeat(100)}"${'{'.repeat(100)}`,
    });
    expect(await jobsIn(queue)).toBe(1);

    const { job } = await call(clients.jobs, 'submitJob', { ...ok, queue, payload: nested(24) } as never);
    expect((await call(clients.jobs, 'getJob', { id: job!.id })).job!.payload).toEqual(nested(24));
    expect(await jobsIn(queue)).toBe(2);
    const deepArrays = await call(clients.jobs, 'submitJob', { ...ok, queue, payload: undefined, payloadJson: nestedArraysText(24) } as never);
    expect((await call(clients.jobs, 'getJob', { id: deepArrays.job!.id })).job!.payload).toEqual(JSON.parse(nestedArraysText(24).toString()));
  });

  it('a result more than 24 levels deep is refused alone (INVALID), and the job stays RUNNING', async () => {
    const queue = queueName();
    const { job } = await call(clients.jobs, 'submitJob', { ...ok, queue } as never);
    const w = new RawWorker(clients);
    await w.hello('deep', [queue], 1, { batches: true });
    await w.until(() => w.jobs.length === 1);
    const leased = w.jobs[0]!;
    w.send({ msg: { $case: 'completes', value: { completes: [{ jobId: job!.id, leaseToken: leased.leaseToken, resultJson: nestedArraysText(25) }] } } } as never);
    await w.until(() => w.acks(job!.id).length === 1);
    expect(w.acks(job!.id)[0]!.accepted).toBe(false);
    expect((await call(clients.jobs, 'getJob', { id: job!.id })).job!.state).toBe(JobState.JOB_STATE_RUNNING);
    w.close();
  });
});

describe('one bad report in a batch of worker reports is refused alone', () => {
  it('a completes batch with a NUL in one result: that one is INVALID, the others are applied', async () => {
    const queue = queueName();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await call(clients.jobs, 'submitJob', { ...ok, queue } as never)).job!.id);
    const w = new RawWorker(clients);
    await w.hello('batcher', [queue], 3, { batches: true });
    await w.until(() => w.jobs.length === 3);
    const [a, b, c] = w.jobs;
    w.send({
      msg: {
        $case: 'completes',
        value: {
          completes: [
            { jobId: a!.job!.id, leaseToken: a!.leaseToken, result: { n: 1 } },
            { jobId: b!.job!.id, leaseToken: b!.leaseToken, result: { bad: 'x\u0000' } },
            { jobId: c!.job!.id, leaseToken: c!.leaseToken, result: { n: 3 } },
          ],
        },
      },
    } as never);
    await w.until(() => w.jobs.every((j) => w.acks(j.job!.id).length === 1));
    expect(w.acks(a!.job!.id)[0]!.accepted).toBe(true);
    expect(w.acks(c!.job!.id)[0]!.accepted).toBe(true);
    expect(w.acks(b!.job!.id)[0]!.accepted).toBe(false);
    const states = await Promise.all([a, b, c].map(async (j) => (await call(clients.jobs, 'getJob', { id: j!.job!.id })).job!.state));
    expect(states).toEqual([JobState.JOB_STATE_COMPLETED, JobState.JOB_STATE_RUNNING, JobState.JOB_STATE_COMPLETED]);

    // A fail with a retry_at before year 1 is refused alone; one whose error holds a NUL is
    // stored with U+FFFD in its place (a failure is not lost for its text).
    w.send({
      msg: {
        $case: 'fails',
        value: {
          fails: [
            { jobId: b!.job!.id, leaseToken: b!.leaseToken, error: 'boom\u0000!', nonRetryable: true, retryAt: undefined },
          ],
        },
      },
    } as never);
    await w.until(() => w.acks(b!.job!.id).length === 2);
    expect(w.acks(b!.job!.id)[1]!.accepted).toBe(true);
    const failed = (await call(clients.jobs, 'getJob', { id: b!.job!.id })).job!;
    expect(failed.state).toBe(JobState.JOB_STATE_DLQ);
    expect(failed.lastError).toBe('boom\uFFFD!');
    w.close();
  });

  it('a fail with retry_at out of range is INVALID; unary calls refuse a NUL message and an int64 beyond 2^53', async () => {
    const queue = queueName();
    const { job } = await call(clients.jobs, 'submitJob', { ...ok, queue } as never);
    const { jobs } = await call(clients.workers, 'claimJobs', { workerId: 'u', queues: [queue], max: 1, jobTypes: [] } as never);
    const lease = { jobId: job!.id, leaseToken: jobs[0]!.leaseToken };
    await refused(call(clients.workers, 'failJob', { ...lease, error: 'e', nonRetryable: false, retryAt: new Date(YEAR_MINUS_5000 * 1000) } as never), /^retry_at must be from 0001-01-01/);
    await refused(call(clients.workers, 'reportProgress', { ...lease, message: 'half\u0000', percent: 50 } as never), /^message contains a NUL character/);
    await refused(call(clients.workers, 'reportProgress', { ...lease, message: '', done: 2 ** 60, total: 2 ** 60 } as never), /^the request could not be decoded/);
    expect((await call(clients.jobs, 'getJob', { id: job!.id })).job!.state).toBe(JobState.JOB_STATE_RUNNING);
  });
});

describe('unary CompleteJob follows the stream rules for results', () => {
  it('stores result_json; refuses result and result_json together; no result stores none', async () => {
    const queue = queueName();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await call(clients.jobs, 'submitJob', { ...ok, queue } as never)).job!.id);
    const { jobs } = await call(clients.workers, 'claimJobs', { workerId: 'u', queues: [queue], max: 3, jobTypes: [] } as never);
    const [a, b, c] = jobs.map((j) => ({ jobId: j.job!.id, leaseToken: j.leaseToken }));
    await call(clients.workers, 'completeJob', { ...a!, resultJson: Buffer.from('{"thumb":"x.png"}') } as never);
    expect((await call(clients.jobs, 'getJob', { id: a!.jobId })).job!.result).toEqual({ thumb: 'x.png' });
    await refused(call(clients.workers, 'completeJob', { ...b!, result: { a: 1 }, resultJson: Buffer.from('{"a":1}') } as never), /^set result or result_json, not both/);
    await refused(call(clients.workers, 'completeJob', { ...b!, resultJson: Buffer.from('{"a":') } as never), /^result_json is not JSON/);
    expect((await call(clients.jobs, 'getJob', { id: b!.jobId })).job!.state).toBe(JobState.JOB_STATE_RUNNING);
    await call(clients.workers, 'completeJob', { ...c! } as never);
    expect((await call(clients.jobs, 'getJob', { id: c!.jobId })).job!.result).toBeUndefined();
  });
});

describe("the welcome's lease is the shortest of the worker's queues", () => {
  it('a queue with 300 s leases: lease_seconds 300 and heartbeats every 100 s; with a queue not made yet, the default 30 s', async () => {
    const long = queueName();
    await call(clients.queues, 'upsertQueue', { name: long, leaseSeconds: 300 } as never);
    const w = new RawWorker(clients);
    await w.hello('patient', [long], 1);
    expect(w.messages('welcome')[0]).toMatchObject({ leaseSeconds: 300, heartbeatIntervalMs: 100_000 });
    w.close();
    const both = new RawWorker(clients);
    await both.hello('mixed', [long, queueName()], 1);
    expect(both.messages('welcome')[0]).toMatchObject({ leaseSeconds: 30, heartbeatIntervalMs: 10_000 });
    both.close();
    // Only the named queues' rows are read (queue-lease-seconds.sql), a name given twice
    // counting once: the 300 s queue alone is not shortened by the default.
    const twice = new RawWorker(clients);
    await twice.hello('twice', [long, long], 1);
    expect(twice.messages('welcome')[0]).toMatchObject({ leaseSeconds: 300 });
    twice.close();
    const short = queueName();
    await call(clients.queues, 'upsertQueue', { name: short, leaseSeconds: 6 } as never);
    const three = new RawWorker(clients);
    await three.hello('three', [long, short, queueName(), short], 1);
    expect(three.messages('welcome')[0]).toMatchObject({ leaseSeconds: 6, heartbeatIntervalMs: 2000 });
    three.close();
  });
});

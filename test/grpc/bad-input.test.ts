import { beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fromBinary } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { protoPath as healthProtoPath } from 'grpc-health-check';
import { queueName } from '../helpers/factories.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { expectStatus } from '../helpers/grpc-status.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { JobState } from '../../src/gen/evora/v1/job.js';
import { MAX_SLOTS, MAX_WORKER_QUEUES } from '../../src/domain/validate.js';

let clients: Clients;
let address: string;
/** EVORA_HELLO_TIMEOUT_MS of this file's server: short, for the stream that never says hello. */
const HELLO_TIMEOUT_MS = 1000;
beforeAll(async () => {
  ({ clients, address } = await serverSetup({ maxPayloadBytes: '1000', helloTimeoutMs: String(HELLO_TIMEOUT_MS) }));
});

const ok = { queue: 'q', type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) };
const MISSING = '00000000-0000-7000-8000-000000000000';
const { INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION } = grpc.status;

describe('bad input gets the right status and changes nothing', () => {
  it('INVALID_ARGUMENT for malformed submits', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ queue: '' }, /queue is required/],
      [{ queue: 'bad name!' }, /queue "bad name!" may contain only/],
      [{ queue: 'x'.repeat(200) }, /longer than 128/],
      [{ type: '' }, /type is required/],
      [{ type: 'a b' }, /type "a b"/],
      [{ priority: 5000 }, /priority must be/],
      [{ maxAttempts: -1 }, /max_attempts/],
      [{ idempotencyKey: 'k'.repeat(300) }, /idempotency_key/],
      // The scheduler's keys: a producer must not take a schedule's next fire first.
      [{ idempotencyKey: 'schedule:nightly:2026-11-30T03:01:00Z' }, /^idempotency_key may not start with "schedule:": such keys are the scheduler's/],
      [{ payload: { blob: 'x'.repeat(2000) } }, /payload is \d+ bytes of JSON; the limit is 1000/],
      [{ timeout: { seconds: 0, nanos: 0 } }, /^timeout must be positive, got 0 s$/],
      [{ timeout: { seconds: -5, nanos: 0 } }, /^timeout must be positive, got -5 s$/],
      [{ backoff: { kind: 0, jitter: 2 } }, /^backoff.jitter must be from 0 to 1$/],
      [{ backoff: { kind: 0, jitter: 0, base: { seconds: -1, nanos: 0 } } }, /^backoff durations must not be negative$/],
      [
        { backoff: { kind: 1, jitter: 0, base: { seconds: 600, nanos: 0 }, cap: { seconds: 1, nanos: 0 } } },
        /^backoff\.base \(600 s\) is longer than backoff\.cap \(1 s\): every delay would be the cap$/,
      ],
    ];
    for (const [patch, message] of cases) {
      await expectStatus(call(clients.jobs, 'submitJob', { ...ok, queue: queueName(), ...patch } as never), INVALID_ARGUMENT, message);
    }
    await expectStatus(
      call(clients.jobs, 'submitJobs', { idsOnly: false, jobs: [{ ...ok, queue: queueName() }, { ...ok, queue: '' }] }),
      INVALID_ARGUMENT,
      /jobs\[1\]: queue is required/,
    );
    // Nothing was created by any of them.
    const list = await call(clients.jobs, 'listJobs', { queue: '', states: [], type: '', pageSize: 100, pageToken: '', idempotencyKey: '' });
    expect(list.jobs).toHaveLength(0);
  });

  it('INVALID_ARGUMENT for bad ids, page sizes and page tokens', async () => {
    await expectStatus(call(clients.jobs, 'getJob', { id: 'not-a-uuid' }), INVALID_ARGUMENT, /not a UUID/);
    await expectStatus(call(clients.jobs, 'getJob', { id: '' }), INVALID_ARGUMENT);
    await expectStatus(call(clients.jobs, 'listJobs', { queue: '', states: [], type: '', pageSize: -1, pageToken: '', idempotencyKey: '' }), INVALID_ARGUMENT);
    await expectStatus(call(clients.jobs, 'listJobs', { queue: '', states: [], type: '', pageSize: 10, pageToken: 'garbage', idempotencyKey: '' }), INVALID_ARGUMENT, /page_token/);
    await expectStatus(call(clients.jobs, 'listJobs', { queue: '', states: [99 as JobState], type: '', pageSize: 10, pageToken: '', idempotencyKey: '' }), INVALID_ARGUMENT);
    await expectStatus(call(clients.workers, 'claimJobs', { workerId: '', queues: ['q'], max: 1, jobTypes: [] }), INVALID_ARGUMENT);
    await expectStatus(call(clients.workers, 'claimJobs', { workerId: 'w', queues: [], max: 1, jobTypes: [] }), INVALID_ARGUMENT);
    await expectStatus(call(clients.queues, 'upsertQueue', { name: 'q', leaseSeconds: 0 }), INVALID_ARGUMENT, /lease_seconds/);
    await expectStatus(call(clients.queues, 'upsertQueue', { name: 'q', backoff: { kind: 1, jitter: 2 } }), INVALID_ARGUMENT, /jitter/);
    await expectStatus(call(clients.queues, 'upsertQueue', { name: 'q', dlqRetention: { seconds: -1, nanos: 0 } }), INVALID_ARGUMENT, /dlq_retention/);
    await expectStatus(call(clients.queues, 'upsertQueue', { name: 'q', completedRetention: { seconds: 200 * 365 * 86_400, nanos: 0 } }), INVALID_ARGUMENT, /completed_retention/);
    await expectStatus(call(clients.queues, 'upsertQueue', { name: 'q', attemptTimeout: { seconds: -1, nanos: 0 } }), INVALID_ARGUMENT, /^attempt_timeout must be positive, got -1 s$/);
  });

  it('INVALID_ARGUMENT for a negative, NaN or infinite rate limit, or a burst of 0 with a rate; nothing changed', async () => {
    const name = queueName();
    await call(clients.queues, 'upsertQueue', { name, rateLimit: { perSecond: 2, burst: 3 } });
    for (const [perSecond, burst, field] of [
      [-1, 1, /rate_limit\.per_second must be from 0 \(no limit\)/],
      [Number.NaN, 1, /rate_limit\.per_second.*got NaN/],
      [Number.POSITIVE_INFINITY, 1, /rate_limit\.per_second.*got Infinity/],
      [5, 0, /rate_limit\.burst must be from 1 to 1000000, got 0/],
      [5, -2, /rate_limit\.burst/],
    ] as const) {
      await expectStatus(call(clients.queues, 'upsertQueue', { name, maxAttempts: 9, rateLimit: { perSecond, burst } }), INVALID_ARGUMENT, field);
    }
    const { queue } = await call(clients.queues, 'getQueue', { name });
    expect(queue?.rateLimit).toEqual({ perSecond: 2, burst: 3 });
    expect(queue?.maxAttempts).not.toBe(9);
    // per_second 0 clears the limit (its burst is ignored).
    const cleared = await call(clients.queues, 'upsertQueue', { name, rateLimit: { perSecond: 0, burst: 0 } });
    expect(cleared.queue?.rateLimit).toBeUndefined();
  });

  it('INVALID_ARGUMENT for a queue backoff whose base would be longer than its cap, given together or merged; nothing changed', async () => {
    const d = (seconds: number) => ({ seconds, nanos: 0 });
    const name = queueName();
    // A new queue's cap is 1 hour: a 2-hour base alone would make every delay the cap.
    await expectStatus(
      call(clients.queues, 'upsertQueue', { name, backoff: { kind: 3, jitter: 0, base: d(7200) } }),
      INVALID_ARGUMENT,
      /^backoff\.base would be longer than backoff\.cap/,
    );
    await expectStatus(call(clients.queues, 'getQueue', { name }), NOT_FOUND);
    await call(clients.queues, 'upsertQueue', { name, backoff: { kind: 1, jitter: 0, base: d(10), cap: d(60) } });
    await expectStatus(
      call(clients.queues, 'upsertQueue', { name, maxAttempts: 9, backoff: { kind: 1, jitter: 0, base: d(600), cap: d(1) } }),
      INVALID_ARGUMENT,
      /^backoff\.base \(600 s\) is longer than backoff\.cap \(1 s\)/,
    );
    // Merged with the stored cap (60 s) and base (10 s): each alone.
    await expectStatus(
      call(clients.queues, 'upsertQueue', { name, maxAttempts: 9, backoff: { kind: 0, jitter: 0, base: d(61) } }),
      INVALID_ARGUMENT,
      /^backoff\.base would be longer than backoff\.cap/,
    );
    await expectStatus(
      call(clients.queues, 'upsertQueue', { name, maxAttempts: 9, backoff: { kind: 0, jitter: 0, cap: d(9) } }),
      INVALID_ARGUMENT,
      /^backoff\.base would be longer than backoff\.cap/,
    );
    const { queue } = await call(clients.queues, 'getQueue', { name });
    expect(queue?.maxAttempts).not.toBe(9);
    expect(queue?.backoff).toMatchObject({ base: d(10), cap: d(60) });
    // Raising both at once is fine.
    const raised = await call(clients.queues, 'upsertQueue', { name, backoff: { kind: 0, jitter: 0, base: d(7200), cap: d(7200) } });
    expect(raised.queue?.backoff).toMatchObject({ base: d(7200), cap: d(7200) });
  });

  it('NOT_FOUND for unknown jobs and queues', async () => {
    await expectStatus(call(clients.jobs, 'getJob', { id: MISSING }), NOT_FOUND, /not found/);
    await expectStatus(call(clients.jobs, 'cancelJob', { id: MISSING }), NOT_FOUND);
    await expectStatus(call(clients.jobs, 'retryJob', { id: MISSING }), NOT_FOUND);
    await expectStatus(call(clients.queues, 'getQueue', { name: 'nope' }), NOT_FOUND);
    await expectStatus(call(clients.queues, 'pauseQueue', { name: 'nope' }), NOT_FOUND);
  });

  it('ALREADY_EXISTS for a reused idempotency key with other content; the first job is unchanged', async () => {
    const queue = queueName();
    const first = await call(clients.jobs, 'submitJob', { ...ok, queue, idempotencyKey: 'k', payload: { v: 1 } });
    await expectStatus(call(clients.jobs, 'submitJob', { ...ok, queue, idempotencyKey: 'k', payload: { v: 2 } }), ALREADY_EXISTS, /idempotency key "k"/);
    const got = await call(clients.jobs, 'getJob', { id: first.job!.id });
    expect(got.job?.payload).toEqual({ v: 1 });
  });

  it('ALREADY_EXISTS naming backoff or timeout for a replay that changes the job\'s own policy', async () => {
    const queue = queueName();
    const policy = { backoff: { kind: 3, base: { seconds: 1, nanos: 0 }, jitter: 0 }, timeout: { seconds: 30, nanos: 0 } };
    const first = await call(clients.jobs, 'submitJob', { ...ok, queue, idempotencyKey: 'k', ...policy });
    const again = await call(clients.jobs, 'submitJob', { ...ok, queue, idempotencyKey: 'k', ...policy });
    expect(again).toMatchObject({ created: false, job: { id: first.job!.id } });
    await expectStatus(
      call(clients.jobs, 'submitJob', { ...ok, queue, idempotencyKey: 'k', ...policy, backoff: { ...policy.backoff, kind: 1 } }),
      ALREADY_EXISTS,
      /submitted with a different backoff$/,
    );
    await expectStatus(
      call(clients.jobs, 'submitJob', { ...ok, queue, idempotencyKey: 'k', ...policy, timeout: { seconds: 31, nanos: 0 } }),
      ALREADY_EXISTS,
      /submitted with a different timeout$/,
    );
  });

  it('concurrency keys: an oversized key or per-key limit is INVALID_ARGUMENT and creates nothing; a replay with another key is ALREADY_EXISTS', async () => {
    const queue = queueName();
    await expectStatus(
      call(clients.jobs, 'submitJob', { ...ok, queue, concurrencyKey: 'é'.repeat(128) }),
      INVALID_ARGUMENT,
      /^concurrency_key is longer than 255 bytes \(got 256\)$/,
    );
    expect((await call(clients.jobs, 'listJobs', { queue, states: [], type: '', pageSize: 10, pageToken: '', idempotencyKey: '' })).jobs).toHaveLength(0);
    await expectStatus(call(clients.queues, 'upsertQueue', { name: queue, maxConcurrencyPerKey: -1 }), INVALID_ARGUMENT, /max_concurrency_per_key/);
    const { queue: q } = await call(clients.queues, 'upsertQueue', { name: queue, maxConcurrencyPerKey: 3 });
    expect(q!.maxConcurrencyPerKey).toBe(3);
    const first = await call(clients.jobs, 'submitJob', { ...ok, queue, idempotencyKey: 'k', concurrencyKey: 'tenant-1' });
    expect(first.job!.concurrencyKey).toBe('tenant-1');
    await expectStatus(
      call(clients.jobs, 'submitJob', { ...ok, queue, idempotencyKey: 'k', concurrencyKey: 'tenant-2' }),
      ALREADY_EXISTS,
      /submitted with a different concurrency_key$/,
    );
  });

  it('FAILED_PRECONDITION for retrying a COMPLETED job and for a stale lease on unary calls', async () => {
    const queue = queueName();
    const { job } = await call(clients.jobs, 'submitJob', { ...ok, queue });
    const { jobs } = await call(clients.workers, 'claimJobs', { workerId: 'w', queues: [queue], max: 1, jobTypes: [] });
    await call(clients.workers, 'completeJob', { jobId: job!.id, leaseToken: jobs[0]!.leaseToken, result: {} });
    await expectStatus(call(clients.jobs, 'retryJob', { id: job!.id }), FAILED_PRECONDITION, /COMPLETED/);
    await expectStatus(call(clients.jobs, 'cancelJob', { id: job!.id }), FAILED_PRECONDITION);
    await expectStatus(call(clients.workers, 'completeJob', { jobId: job!.id, leaseToken: jobs[0]!.leaseToken, result: {} }), FAILED_PRECONDITION, /lease lost/);
  });

  it('INVALID_ARGUMENT, not FAILED_PRECONDITION, for a malformed job id or lease token on every unary worker call', async () => {
    const queue = queueName();
    const { job } = await call(clients.jobs, 'submitJob', { ...ok, queue });
    const { jobs } = await call(clients.workers, 'claimJobs', { workerId: 'w', queues: [queue], max: 1, jobTypes: [] });
    const token = jobs[0]!.leaseToken;
    const bad: [string, string, RegExp][] = [
      [job!.id, 'junk', /lease_token "junk" is not a UUID/],
      [job!.id, '', /lease_token is required/],
      ['not-a-uuid', token, /job_id "not-a-uuid" is not a UUID/],
      ['', token, /job_id is required/],
    ];
    for (const [jobId, leaseToken, message] of bad) {
      await expectStatus(call(clients.workers, 'completeJob', { jobId, leaseToken, result: {} }), INVALID_ARGUMENT, message);
      await expectStatus(call(clients.workers, 'failJob', { jobId, leaseToken, error: 'x', nonRetryable: false }), INVALID_ARGUMENT, message);
      await expectStatus(call(clients.workers, 'snoozeJob', { jobId, leaseToken }), INVALID_ARGUMENT, message);
      await expectStatus(call(clients.workers, 'extendLease', { jobId, leaseToken }), INVALID_ARGUMENT, message);
    }
    for (const method of ['getJob', 'cancelJob', 'retryJob'] as const) {
      await expectStatus(call(clients.jobs, method, { id: 'not-a-uuid' }), INVALID_ARGUMENT, /id "not-a-uuid" is not a UUID/);
    }
    // Nothing changed: the lease is still current and the job still RUNNING.
    await call(clients.workers, 'extendLease', { jobId: job!.id, leaseToken: token });
    expect((await call(clients.jobs, 'getJob', { id: job!.id })).job?.state).toBe(JobState.JOB_STATE_RUNNING);
  });

  it('a Work stream that never says hello is ended INVALID_ARGUMENT after EVORA_HELLO_TIMEOUT_MS; one that did stays open', async () => {
    const queue = queueName('hello-late');
    const greeted = new RawWorker(clients);
    await greeted.hello('greeted', [queue], 1);
    const silent = new RawWorker(clients);
    await silent.until(() => silent.ended);
    expect((silent.error as grpc.ServiceError | null)?.code).toBe(INVALID_ARGUMENT);
    expect((silent.error as grpc.ServiceError).details).toBe(`no hello within ${HELLO_TIMEOUT_MS} ms of opening the Work stream: hello must be its first message`);
    // The stream opened before it, with its hello, is older than the timeout and still served.
    expect(greeted.ended).toBe(false);
    await call(clients.jobs, 'submitJob', { ...ok, queue });
    await greeted.until(() => greeted.jobs.length === 1);
    greeted.close();
  });

  it('a Work stream whose first message is not hello is closed with INVALID_ARGUMENT', async () => {
    const w = new RawWorker(clients);
    w.send({ msg: { $case: 'drain', value: {} } });
    await w.until(() => w.ended);
    expect((w.error as grpc.ServiceError | null)?.code).toBe(INVALID_ARGUMENT);
    expect((w.error as grpc.ServiceError).details).toMatch(/first message on a Work stream must be hello/);

    const v = new RawWorker(clients);
    v.send({ msg: { $case: 'hello', value: { workerId: 'w', queues: ['q'], slots: 0, held: [], jobTypes: [] } } });
    await v.until(() => v.ended);
    expect((v.error as grpc.ServiceError | null)?.code).toBe(INVALID_ARGUMENT);

    // An empty queue name is named as such, on the stream and on ClaimJobs.
    const e = new RawWorker(clients);
    e.send({ msg: { $case: 'hello', value: { workerId: 'w', queues: ['q', ''], slots: 1, held: [], jobTypes: [] } } });
    await e.until(() => e.ended);
    expect((e.error as grpc.ServiceError).details).toBe('hello.queues contains an empty queue name');
    const claim = await call(clients.workers, 'claimJobs', { workerId: 'w', queues: [''], max: 1, jobTypes: [] }).catch((err: grpc.ServiceError) => err);
    expect((claim as grpc.ServiceError).details).toBe('queues contains an empty queue name');

    // More than MAX_WORKER_QUEUES names: refused before anything is opened (a hello of
    // 100,000 names held the server's event loop for seconds); the limit itself is taken.
    const many = Array.from({ length: MAX_WORKER_QUEUES + 1 }, (_, i) => `q${i}`);
    const m = new RawWorker(clients);
    m.send({ msg: { $case: 'hello', value: { workerId: 'w', queues: many, slots: 1, held: [], jobTypes: [] } } });
    await m.until(() => m.ended);
    expect((m.error as grpc.ServiceError | null)?.code).toBe(INVALID_ARGUMENT);
    expect((m.error as grpc.ServiceError).details).toBe(`hello.queues names ${MAX_WORKER_QUEUES + 1} queues; the limit is ${MAX_WORKER_QUEUES}`);
    await expectStatus(call(clients.workers, 'claimJobs', { workerId: 'w', queues: many, max: 1, jobTypes: [] }), INVALID_ARGUMENT);
    const atLimit = await call(clients.workers, 'claimJobs', { workerId: 'w', queues: many.slice(1), max: 1, jobTypes: [] });
    expect(atLimit.jobs).toEqual([]);

    // hello.held: no worker holds more leases than its slots (at most 10,000).
    const held = Array.from({ length: MAX_SLOTS + 1 }, () => ({ jobId: MISSING, leaseToken: MISSING }));
    const h = new RawWorker(clients);
    h.send({ msg: { $case: 'hello', value: { workerId: 'w', queues: ['q'], slots: 1, held, jobTypes: [] } } });
    await h.until(() => h.ended);
    expect((h.error as grpc.ServiceError | null)?.code).toBe(INVALID_ARGUMENT);
    expect((h.error as grpc.ServiceError).details).toBe(`hello.held names ${MAX_SLOTS + 1} leases; the limit is ${MAX_SLOTS} (no worker holds more than its slots)`);
  });

  it('messages over the configured size are refused by gRPC', async () => {
    await expectStatus(
      call(clients.jobs, 'submitJob', { ...ok, queue: queueName(), payload: { blob: 'x'.repeat(5 * 1024 * 1024) } }),
      grpc.status.RESOURCE_EXHAUSTED,
    );
  });
});

describe('health and reflection', () => {
  it('grpc.health.v1.Health answers SERVING for the server and each service', async () => {
    const def = protoLoader.loadSync(healthProtoPath, { keepCase: true, enums: String });
    const Health = (grpc.loadPackageDefinition(def) as any).grpc.health.v1.Health as typeof grpc.Client;
    const health = new Health(address, grpc.credentials.createInsecure()) as grpc.Client & {
      check: (req: { service: string }, cb: (e: grpc.ServiceError | null, r: { status: string }) => void) => void;
    };
    for (const service of ['', 'evora.v1.JobService', 'evora.v1.WorkerService', 'evora.v1.QueueService', 'evora.v1.ScheduleService']) {
      const res = await new Promise<{ status: string }>((resolve, reject) =>
        health.check({ service }, (e, r) => (e ? reject(e) : resolve(r))),
      );
      expect(res.status).toBe('SERVING');
    }
    health.close();
  });

  it('server reflection lists the services and describes them with the .proto field names', async () => {
    const reflectionProto = join(dirname(createRequire(import.meta.url).resolve('@grpc/reflection')), '..', 'proto', 'grpc', 'reflection', 'v1', 'reflection.proto');
    const def = protoLoader.loadSync(reflectionProto, { keepCase: true });
    const Reflection = (grpc.loadPackageDefinition(def) as any).grpc.reflection.v1.ServerReflection as typeof grpc.Client;
    const client = new Reflection(address, grpc.credentials.createInsecure()) as grpc.Client & {
      ServerReflectionInfo: () => grpc.ClientDuplexStream<Record<string, unknown>, any>;
    };
    const ask = (req: Record<string, unknown>) =>
      new Promise<any>((resolve, reject) => {
        const stream = client.ServerReflectionInfo();
        stream.on('data', (res) => {
          resolve(res);
          stream.end();
        });
        stream.on('error', reject);
        stream.write(req);
      });
    const listed = await ask({ list_services: '' });
    const names = listed.list_services_response.service.map((s: { name: string }) => s.name);
    expect(names).toEqual(expect.arrayContaining(['evora.v1.JobService', 'evora.v1.WorkerService', 'evora.v1.QueueService', 'grpc.health.v1.Health']));

    const files = await ask({ file_containing_symbol: 'evora.v1.WorkerService' });
    const decoded = files.file_descriptor_response.file_descriptor_proto.map((b: Buffer) => fromBinary(FileDescriptorProtoSchema, b));
    const worker = decoded.find((f: { name: string }) => f.name === 'evora/v1/worker.proto');
    expect(worker).toBeDefined();
    const hello = worker.messageType.find((m: { name: string }) => m.name === 'WorkerHello');
    expect(hello.field.map((f: { name: string }) => f.name)).toEqual(['worker_id', 'queues', 'slots', 'held', 'accepts_batches', 'job_types', 'payloads_as_json']);
    // The well-known types it uses can be fetched too (grpcurl needs them to describe).
    const struct = await ask({ file_by_filename: 'google/protobuf/struct.proto' });
    expect(struct.file_descriptor_response.file_descriptor_proto.length).toBeGreaterThan(0);
    client.close();
  });
});

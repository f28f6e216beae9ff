import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { rawWorkers } from '../helpers/raw-worker.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Job-type routing (issue 16): a worker names the job types it runs (hello.job_types,
 * ClaimJobsRequest.job_types) and the server gives it only jobs of those types, so workers
 * with different handlers can share a queue without dead-lettering each other's jobs.
 */

let clients: Clients;
let address: string;
let client: EvoraClient;
const sdkWorkers: EvoraWorker[] = [];
beforeAll(async () => {
  ({ clients, address } = await serverSetup());
  client = new EvoraClient({ address });
});
afterEach(async () => {
  await Promise.all(sdkWorkers.splice(0).map((w) => w.stop({ timeoutMs: 0, graceMs: 1_000 })));
});
afterAll(() => client.close());
const worker = rawWorkers(() => clients);

/** The status code of a call that must fail. */
async function codeOf(p: Promise<unknown>): Promise<{ code: number; details: string }> {
  const err = (await p.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (e: unknown) => e,
  )) as grpc.ServiceError;
  return { code: err.code, details: err.details };
}

describe('job-type routing', () => {
  it('two SDK workers with different handlers on one queue: every job completes on the right worker, none dead-lettered', async () => {
    const queue = queueName();
    for (const type of ['x', 'y']) {
      const w = new EvoraWorker({ address, workerId: `only-${type}`, queues: [queue], slots: 3 });
      w.handle(type, (job) => ({ ranBy: `only-${type}`, type: job.type }));
      sdkWorkers.push(w);
      await w.start();
    }
    // One attempt each: a job given to the worker without its handler would be dead-lettered at once.
    const inputs = Array.from({ length: 20 }, (_, i) => ({ queue, type: i % 2 === 0 ? 'x' : 'y', payload: { i }, maxAttempts: 1 }));
    // Half in one batch (claims), half one by one (the submit's hand-off).
    const batch = await client.submitMany(inputs.slice(0, 10));
    const single = [];
    for (const input of inputs.slice(10)) single.push(await client.submit(input));
    const ids = [...batch, ...single].map((r) => r.job.id);
    const jobs = (await waitFor(
      async () => {
        const all = await Promise.all(ids.map((id) => client.get(id)));
        return all.every((j) => j.state === 'COMPLETED' || j.state === 'DLQ') ? all : null;
      },
      { what: 'every job to finish' },
    ))!;
    expect(jobs.filter((j) => j.state === 'DLQ')).toEqual([]);
    for (const j of jobs) expect(j.workerId).toBe(`only-${j.type}`);
    expect(jobs.filter((j) => j.type === 'x')).toHaveLength(10);
  });

  it('a session gets only its types: a claim and a hand-off skip jobs of other types', async () => {
    const queue = queueName();
    await client.submit({ queue, type: 'y', payload: {} });
    const wx = worker();
    await wx.hello('wx', [queue], 5, { jobTypes: ['x'] });
    const x1 = await client.submit({ queue, type: 'x', payload: {} });
    await wx.until(() => wx.jobs.length === 1);
    expect(wx.jobs.map((j) => j.job?.id)).toEqual([x1.job.id]);

    // A y worker takes the waiting y job; a later y submit goes to it, never to the x worker.
    const wy = worker();
    await wy.hello('wy', [queue], 5, { jobTypes: ['y', 'y'] });
    await wy.until(() => wy.jobs.length === 1);
    const y2 = await client.submit({ queue, type: 'y', payload: {} });
    await wy.until(() => wy.jobs.length === 2);
    expect(wy.jobs.map((j) => j.job?.type)).toEqual(['y', 'y']);
    expect(wy.jobs[1]?.job?.id).toBe(y2.job.id);
    expect(wx.jobs).toHaveLength(1);
  });

  it('ClaimJobs with job_types leases only those types; empty = any type', async () => {
    const queue = queueName();
    await client.submitMany(['a', 'b', 'a', 'c'].map((type) => ({ queue, type, payload: {} })));
    const onlyA = await call(clients.workers, 'claimJobs', { workerId: 'u', queues: [queue], max: 10, jobTypes: ['a'] });
    expect(onlyA.jobs.map((j) => j.job?.type)).toEqual(['a', 'a']);
    const none = await call(clients.workers, 'claimJobs', { workerId: 'u', queues: [queue], max: 10, jobTypes: ['a', 'zzz'] });
    expect(none.jobs).toEqual([]);
    const any = await call(clients.workers, 'claimJobs', { workerId: 'u', queues: [queue], max: 10, jobTypes: [] });
    expect(any.jobs.map((j) => j.job?.type).sort()).toEqual(['b', 'c']);
  });

  it('an empty or malformed name in job_types is INVALID_ARGUMENT', async () => {
    const { INVALID_ARGUMENT } = grpc.status;
    const bad = await codeOf(call(clients.workers, 'claimJobs', { workerId: 'u', queues: ['q'], max: 1, jobTypes: ['ok', 'not ok!'] }));
    expect(bad.code).toBe(INVALID_ARGUMENT);
    expect(bad.details).toMatch(/^job_types "not ok!" may contain only/);
    expect((await codeOf(call(clients.workers, 'claimJobs', { workerId: 'u', queues: ['q'], max: 1, jobTypes: [''] }))).code).toBe(INVALID_ARGUMENT);

    const w = worker();
    w.helloSend('w', [queueName()], 1, { jobTypes: ['x', ''] });
    await w.until(() => w.ended);
    expect((w.error as grpc.ServiceError | null)?.code).toBe(INVALID_ARGUMENT);
    expect((w.error as grpc.ServiceError).details).toBe('hello.job_types contains an empty job type');
  });
});

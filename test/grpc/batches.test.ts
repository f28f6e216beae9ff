import { beforeAll, describe, expect, it } from 'vitest';
import { JobState } from '../../src/gen/evora/v1/job.js';
import { AckResult } from '../../src/gen/evora/v1/worker.js';
import { queueName } from '../helpers/factories.js';
import { rawWorkers } from '../helpers/raw-worker.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';

/**
 * The batch messages of the Work stream: `jobs` and `acks` for workers that said
 * hello.accepts_batches, `completes` and `fails` from any worker.
 */

let clients: Clients;
beforeAll(async () => {
  ({ clients } = await serverSetup({ maxPayloadBytes: '1000' }));
});
const worker = rawWorkers(() => clients);

async function submitMany(queue: string, n: number): Promise<string[]> {
  const res = await call(clients.jobs, 'submitJobs', { idsOnly: false,
    jobs: Array.from({ length: n }, (_, i) => ({ queue, type: 't', payload: { i }, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) })),
  });
  return res.results.map((r) => r.job!.id);
}

async function states(queue: string): Promise<Map<string, JobState>> {
  const { jobs } = await call(clients.jobs, 'listJobs', { queue, states: [], type: '', pageSize: 1000, pageToken: '', idempotencyKey: '' });
  return new Map(jobs.map((j) => [j.id, j.state]));
}

describe('a worker that accepts batches', () => {
  it('gets the jobs of one claim in one `jobs` message, completes them with `completes`, and gets one `acks` message', async () => {
    const queue = queueName();
    const ids = await submitMany(queue, 30);
    const w = worker();
    await w.hello('batcher', [queue], 50, { batches: true });
    expect(w.messages('welcome')[0]).toMatchObject({ acceptsBatches: true });
    await w.until(() => w.jobs.length === 30);
    // One claim for all 30 free slots, dealt to this one session: one message.
    expect(w.messages('jobs')).toHaveLength(1);
    expect(w.messages('job')).toHaveLength(0);
    expect(new Set(w.jobs.map((j) => j.job!.id))).toEqual(new Set(ids));
    expect(w.jobs[0]!.job).toMatchObject({ state: JobState.JOB_STATE_RUNNING, workerId: 'batcher', payload: { i: expect.any(Number) } });

    w.completeMany(w.jobs, { ok: true });
    await w.until(() => w.allAcks().length === 30);
    expect(w.allAcks().every((a) => a.accepted && a.reason === '')).toBe(true);
    // The 30 writes committed in one statement, so their acks left in one message.
    expect(w.messages('acks')).toHaveLength(1);
    expect(w.messages('ack')).toHaveLength(0);
    expect([...(await states(queue)).values()]).toEqual(Array(30).fill(JobState.JOB_STATE_COMPLETED));
    expect((await call(clients.jobs, 'getJob', { id: ids[0]! })).job?.result).toEqual({ ok: true });
  });

  it('a lone ack or job still comes as `ack` / `job`; a single `complete` still works', async () => {
    const queue = queueName();
    const w = worker();
    await w.hello('batcher-1', [queue], 5, { batches: true });
    const [id] = await submitMany(queue, 1);
    await w.until(() => w.jobs.length === 1);
    expect(w.messages('job')).toHaveLength(1);
    w.complete(w.jobs[0]!);
    await w.until(() => w.acks(id!).length === 1);
    expect(w.messages('ack')).toEqual([{ jobId: id, leaseToken: w.jobs[0]!.leaseToken, accepted: true, reason: '', result: AckResult.ACK_RESULT_ACCEPTED, databaseUnavailable: false }]);
  });

  it('`fails` fails each job as `fail` would', async () => {
    const queue = queueName();
    const ids = await submitMany(queue, 3);
    const w = worker();
    await w.hello('failer', [queue], 3, { batches: true });
    await w.until(() => w.jobs.length === 3);
    w.send({
      msg: {
        $case: 'fails',
        value: { fails: w.jobs.map((j) => ({ jobId: j.job!.id, leaseToken: j.leaseToken, error: `bad ${j.job!.id}`, nonRetryable: true })) },
      },
    });
    await w.until(() => w.allAcks().length === 3);
    expect(w.allAcks().every((a) => a.accepted)).toBe(true);
    const got = await call(clients.jobs, 'getJob', { id: ids[1]! });
    expect(got.job).toMatchObject({ state: JobState.JOB_STATE_DLQ, lastError: `bad ${ids[1]}` });
  });
});

describe('a worker that does not accept batches', () => {
  it('gets one `job` message per job and one `ack` per report, even when it reports with `completes`', async () => {
    const queue = queueName();
    const ids = await submitMany(queue, 10);
    const w = worker();
    await w.hello('old-worker', [queue], 20);
    await w.until(() => w.jobs.length === 10);
    expect(w.messages('job')).toHaveLength(10);
    expect(w.messages('jobs')).toHaveLength(0);
    expect(w.messages('welcome')[0]).toMatchObject({ acceptsBatches: true });

    w.completeMany(w.jobs);
    await w.until(() => w.allAcks().length === 10);
    expect(w.messages('ack')).toHaveLength(10);
    expect(w.messages('acks')).toHaveLength(0);
    expect(w.allAcks().every((a) => a.accepted)).toBe(true);
    expect(new Set((await states(queue)).values())).toEqual(new Set([JobState.JOB_STATE_COMPLETED]));
    expect(new Set(w.allAcks().map((a) => a.jobId))).toEqual(new Set(ids));
  });

  it('hello.accepts_batches = false is the same as leaving it unset', async () => {
    const queue = queueName();
    await submitMany(queue, 4);
    const w = worker();
    await w.hello('old-worker-2', [queue], 4, { batches: false });
    await w.until(() => w.jobs.length === 4);
    expect(w.messages('job')).toHaveLength(4);
    expect(w.messages('jobs')).toHaveLength(0);
  });
});

describe('a `completes` batch is checked item by item', () => {
  it('a bad item gets its own accepted=false ack with the reason; the good ones commit', async () => {
    const queue = queueName();
    await submitMany(queue, 4);
    const w = worker();
    await w.hello('mixed', [queue], 4, { batches: true });
    await w.until(() => w.jobs.length === 4);
    const [good1, tooBig, wrongToken, good2] = w.jobs as [(typeof w.jobs)[0], (typeof w.jobs)[0], (typeof w.jobs)[0], (typeof w.jobs)[0]];
    w.send({
      msg: {
        $case: 'completes',
        value: {
          completes: [
            { jobId: good1.job!.id, leaseToken: good1.leaseToken, result: { n: 1 } },
            { jobId: tooBig.job!.id, leaseToken: tooBig.leaseToken, result: { blob: 'x'.repeat(2_000) } },
            { jobId: wrongToken.job!.id, leaseToken: 'not-the-lease-token', result: {} },
            { jobId: 'no-such-job', leaseToken: good2.leaseToken, result: {} },
            { jobId: good2.job!.id, leaseToken: good2.leaseToken, result: { n: 2 } },
          ],
        },
      },
    });
    await w.until(() => w.allAcks().length === 5);
    const ack = (id: string) => w.acks(id)[0]!;
    const accepted = { accepted: true, reason: '', result: AckResult.ACK_RESULT_ACCEPTED, databaseUnavailable: false };
    expect(ack(good1.job!.id)).toEqual({ jobId: good1.job!.id, leaseToken: good1.leaseToken, ...accepted });
    expect(ack(good2.job!.id)).toEqual({ jobId: good2.job!.id, leaseToken: good2.leaseToken, ...accepted });
    // Malformed reports are INVALID (resending them unchanged cannot succeed), never LEASE_LOST.
    const invalid = (reason: RegExp) => ({ accepted: false, result: AckResult.ACK_RESULT_INVALID, reason: expect.stringMatching(reason) });
    expect(ack(tooBig.job!.id)).toMatchObject(invalid(/result is \d+ bytes of JSON; the limit is 1000/));
    expect(ack(wrongToken.job!.id)).toMatchObject(invalid(/lease_token "not-the-lease-token" is not a UUID/));
    expect(ack('no-such-job')).toMatchObject(invalid(/job_id "no-such-job" is not a UUID/));

    const s = await states(queue);
    expect(s.get(good1.job!.id)).toBe(JobState.JOB_STATE_COMPLETED);
    expect(s.get(good2.job!.id)).toBe(JobState.JOB_STATE_COMPLETED);
    expect(s.get(tooBig.job!.id)).toBe(JobState.JOB_STATE_RUNNING);
    expect(s.get(wrongToken.job!.id)).toBe(JobState.JOB_STATE_RUNNING);

    // The refused ones can still be reported properly.
    w.completeMany([tooBig, wrongToken]);
    await w.until(() => w.allAcks().length === 7);
    expect(w.acks(tooBig.job!.id)[1]).toMatchObject({ accepted: true });
    expect(w.acks(wrongToken.job!.id)[1]).toMatchObject({ accepted: true });
  });

  it('fencing: a stale token (the lease expired and the job went to another worker) is refused in a batch', async () => {
    const queue = queueName();
    await call(clients.queues, 'upsertQueue', { name: queue, leaseSeconds: 1, backoff: { kind: 3, base: { seconds: 0, nanos: 0 }, jitter: 0 } });
    const [id, other] = await submitMany(queue, 2);
    const first = await call(clients.workers, 'claimJobs', { workerId: 'slow', queues: [queue], max: 2, jobTypes: [] });
    const stale = new Map(first.jobs.map((j) => [j.job!.id, j.leaseToken]));
    // Both leases expire; the sweeper requeues; a streaming worker gets them with new tokens.
    const w = worker();
    await w.hello('fast', [queue], 2, { batches: true });
    await w.until(() => w.jobs.length === 2);
    const fresh = new Map(w.jobs.map((j) => [j.job!.id, j.leaseToken]));
    expect(fresh.get(id!)).not.toBe(stale.get(id!));

    // The stale report of one job and the current one of the other, in one batch.
    w.send({
      msg: {
        $case: 'completes',
        value: {
          completes: [
            { jobId: id!, leaseToken: stale.get(id!)!, result: {} },
            { jobId: other!, leaseToken: fresh.get(other!)!, result: {} },
          ],
        },
      },
    });
    await w.until(() => w.allAcks().length === 2);
    expect(w.acks(id!)[0]).toMatchObject({ accepted: false, result: AckResult.ACK_RESULT_LEASE_LOST, reason: expect.stringMatching(/lease lost/) });
    expect(w.acks(other!)[0]).toMatchObject({ accepted: true, result: AckResult.ACK_RESULT_ACCEPTED });
    expect((await states(queue)).get(id!)).toBe(JobState.JOB_STATE_RUNNING);

    w.send({ msg: { $case: 'fails', value: { fails: [{ jobId: id!, leaseToken: stale.get(id!)!, error: 'late', nonRetryable: true }] } } });
    await w.until(() => w.acks(id!).length === 2);
    expect(w.acks(id!)[1]).toMatchObject({ accepted: false, result: AckResult.ACK_RESULT_LEASE_LOST });
    w.completeMany(w.jobs.filter((j) => j.job!.id === id));
    await w.until(() => w.acks(id!).length === 3);
    expect(w.acks(id!)[2]).toMatchObject({ accepted: true });
    expect((await states(queue)).get(id!)).toBe(JobState.JOB_STATE_COMPLETED);
  });
});

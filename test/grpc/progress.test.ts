import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status, type ServiceError } from '@grpc/grpc-js';
import pg from 'pg';
import { JobState } from '../../src/gen/evora/v1/job.js';
import { LeaseLostReason, type LeasedJob, type ReportProgressRequest } from '../../src/gen/evora/v1/worker.js';
import { EvoraClient, EvoraWorker, type JsonObject } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { rawWorkers } from '../helpers/raw-worker.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Progress and checkpoints (docs/api.md "Progress and checkpoints"): reports on the Work
 * stream and by ReportProgress are visible through GetJob while the job runs, coalesced to
 * about one write per job per second, fenced by the lease token, and a checkpoint reaches
 * the next attempt. Writes are counted by a trigger this test installs on its own database
 * (not part of the server).
 */

const MAX_PAYLOAD_BYTES = 2000;
let clients: Clients;
let address: string;
let sql: pg.Client;
beforeAll(async () => {
  let databaseUrl: string;
  ({ clients, address, databaseUrl } = await serverSetup({ maxPayloadBytes: String(MAX_PAYLOAD_BYTES) }));
  sql = new pg.Client({ connectionString: databaseUrl });
  await sql.connect();
  await sql.query(`
    CREATE TABLE public.progress_writes (job_id uuid NOT NULL);
    CREATE FUNCTION public.progress_write_count() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO public.progress_writes VALUES (NEW.id); RETURN NEW; END $$;
    CREATE TRIGGER progress_write_count AFTER UPDATE OF progress ON evora.jobs
      FOR EACH ROW WHEN (OLD.progress IS DISTINCT FROM NEW.progress) EXECUTE FUNCTION public.progress_write_count();
  `);
});
afterAll(async () => {
  await sql?.end();
});
const worker = rawWorkers(() => clients);

const submit = async (queue: string, maxAttempts = 0) =>
  (await call(clients.jobs, 'submitJob', { queue, type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) })).job!;
const getJob = async (id: string) => (await call(clients.jobs, 'getJob', { id })).job!;
const progressWrites = async (id: string) =>
  Number((await sql.query<{ n: string }>('SELECT count(*) AS n FROM public.progress_writes WHERE job_id = $1', [id])).rows[0]!.n);
const claimOne = async (queue: string, workerId = 'unary') =>
  (await call(clients.workers, 'claimJobs', { workerId, queues: [queue], max: 1, jobTypes: [] })).jobs[0]!;
const report = (l: LeasedJob, fields: Partial<ReportProgressRequest>): ReportProgressRequest => ({
  jobId: l.job!.id,
  leaseToken: l.leaseToken,
  message: '',
  ...fields,
});

describe('progress while a job runs', () => {
  it('a report on the stream shows in GetJob (percent, message, attempt, reported_at)', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const w = worker();
    await w.hello('p-stream', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    const leased = w.jobs[0]!;
    const before = Date.now();
    w.send({ msg: { $case: 'progress', value: report(leased, { percent: 40, message: 'copying' }) } });
    const job = (await waitFor(async () => {
      const j = await getJob(id);
      return j.progress ? j : null;
    }, { what: 'progress stored' }))!;
    expect(job.state).toBe(JobState.JOB_STATE_RUNNING);
    expect(job.progress).toMatchObject({ percent: 40, message: 'copying', attempt: 1 });
    expect(job.progress!.done).toBeUndefined();
    expect(job.progress!.reportedAt!.getTime()).toBeGreaterThanOrEqual(before - 1000);

    // Counts replace a percentage.
    w.send({ msg: { $case: 'progress', value: report(leased, { done: 3, total: 10 }) } });
    const counted = (await waitFor(async () => {
      const j = await getJob(id);
      return j.progress?.done === 3 ? j : null;
    }))!;
    expect(counted.progress).toMatchObject({ done: 3, total: 10, message: '' });
    expect(counted.progress!.percent).toBeUndefined();
    w.complete(leased);
    await w.until(() => w.acks(id).length === 1);
  });

  it('ReportProgress answers once the report is stored (a message of 256 emoji is within the limit)', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const leased = await claimOne(queue);
    await call(clients.workers, 'reportProgress', report(leased, { percent: 12.5, message: 'unary' }));
    // Stored before the answer: no waiting here.
    expect((await getJob(id)).progress).toMatchObject({ percent: 12.5, message: 'unary', attempt: 1 });
    // 256 characters is the limit, counted as characters: 256 emoji (512 UTF-16 units) are taken.
    const emoji = '\u{1F680}'.repeat(256);
    await call(clients.workers, 'reportProgress', report(leased, { percent: 13, message: emoji }));
    expect((await getJob(id)).progress).toMatchObject({ percent: 13, message: emoji });
    await call(clients.workers, 'completeJob', { jobId: id, leaseToken: leased.leaseToken });
  });

  it('many reports within a second cost few writes: the latest report per job is stored', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const w = worker();
    await w.hello('p-chatty', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    const leased = w.jobs[0]!;
    // 200 reports over about two seconds (load, not an assertion: each report is sent).
    const started = Date.now();
    for (let i = 1; i <= 200; i++) {
      w.send({ msg: { $case: 'progress', value: report(leased, { done: i, total: 200 }) } });
      if (i % 20 === 0) await new Promise((r) => setTimeout(r, 200));
    }
    const seconds = (Date.now() - started) / 1000;
    await waitFor(async () => (await getJob(id)).progress?.done === 200, { what: 'the last report stored' });
    const writes = await progressWrites(id);
    // One flush per second at most, plus the one that carries the last report.
    expect(writes).toBeGreaterThanOrEqual(1);
    expect(writes).toBeLessThanOrEqual(Math.ceil(seconds) + 2);
    w.complete(leased);
    await w.until(() => w.acks(id).length === 1);
  });
});

describe('fencing', () => {
  it('a stale token changes nothing: the stream answers lease_lost, ReportProgress FAILED_PRECONDITION', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const w = worker();
    await w.hello('p-stale', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    const leased = w.jobs[0]!;
    // The job is leased again behind this worker's back (as if its lease had expired and
    // another worker had claimed it): this worker's token is no longer current.
    await sql.query('UPDATE evora.jobs SET lease_token = gen_random_uuid() WHERE id = $1', [id]);
    const before = await getJob(id);

    w.send({ msg: { $case: 'progress', value: report(leased, { percent: 99, checkpoint: { late: true } }) } });
    await w.until(() => w.messages('leaseLost').some((l) => l.jobId === id));
    expect(w.messages('leaseLost').find((l) => l.jobId === id)).toMatchObject({
      leaseToken: leased.leaseToken,
      code: LeaseLostReason.LEASE_LOST_REASON_EXPIRED,
    });
    await expect(call(clients.workers, 'reportProgress', report(leased, { percent: 98 }))).rejects.toMatchObject({
      code: status.FAILED_PRECONDITION,
    });
    const after = await getJob(id);
    expect(after).toEqual(before);
    expect(after.progress).toBeUndefined();
    expect((await sql.query('SELECT checkpoint FROM evora.jobs WHERE id = $1', [id])).rows[0].checkpoint).toBeNull();
  });

  it('a report about a job already completed changes nothing and is dropped without an answer', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const w = worker();
    await w.hello('p-late', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    const leased = w.jobs[0]!;
    w.complete(leased, { done: true });
    await w.until(() => w.acks(id).length === 1);
    const finished = await getJob(id);
    w.send({ msg: { $case: 'progress', value: report(leased, { percent: 99, checkpoint: { late: true } }) } });
    // The same lease's unary report joins the stream's in the same flush: once it is answered,
    // the stream's report has been written (and refused) too.
    await expect(call(clients.workers, 'reportProgress', report(leased, { percent: 98 }))).rejects.toMatchObject({
      code: status.FAILED_PRECONDITION,
    });
    expect(await getJob(id)).toEqual(finished);
    expect(w.messages('leaseLost')).toEqual([]);
  });

  it('a report waiting when the job completes is dropped; the completed job keeps what was stored', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const w = worker();
    await w.hello('p-drop', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    const leased = w.jobs[0]!;
    w.send({ msg: { $case: 'progress', value: report(leased, { percent: 50 }) } });
    w.complete(leased);
    await w.until(() => w.acks(id).length === 1);
    // Once a later report of the lease is answered, any flush that could have carried the
    // first has run: it was dropped at the completion.
    await expect(call(clients.workers, 'reportProgress', report(leased, { percent: 70 }))).rejects.toMatchObject({
      code: status.FAILED_PRECONDITION,
    });
    const job = await getJob(id);
    expect(job.state).toBe(JobState.JOB_STATE_COMPLETED);
    expect(job.progress).toBeUndefined();
    expect(await progressWrites(id)).toBe(0);
  });
});

describe('checkpoints', () => {
  it('the next attempt of a retried job is pushed with the last checkpoint', async () => {
    const queue = queueName();
    const { id } = await submit(queue, 3);
    const w = worker();
    await w.hello('p-ckpt', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    const first = w.jobs[0]!;
    expect(first.checkpoint).toBeUndefined();
    w.send({ msg: { $case: 'progress', value: report(first, { percent: 30, checkpoint: { page: 7 } }) } });
    w.send({ msg: { $case: 'progress', value: report(first, { percent: 35 }) } }); // no checkpoint: the earlier one stays
    // Failed at once: the waiting report is stored before the failure.
    w.send({ msg: { $case: 'fail', value: { jobId: id, leaseToken: first.leaseToken, error: 'boom', nonRetryable: false, retryAt: new Date() } } });
    await w.until(() => w.jobs.length === 2);
    const second = w.jobs[1]!;
    expect(second.job!.attempt).toBe(2);
    expect(second.checkpoint).toEqual({ page: 7 });
    expect((await getJob(id)).progress).toMatchObject({ percent: 35, attempt: 1 });
    w.complete(second);
    await w.until(() => w.acks(id).length === 2);
  });

  it("the SDK worker: ctx.progress stores a checkpoint and the retry's ctx.checkpoint has it", async () => {
    const queue = queueName();
    const client = new EvoraClient({ address });
    const seen: (JsonObject | null)[] = [];
    const sdkWorker = new EvoraWorker({ address, queues: [queue], slots: 1 });
    sdkWorker.handle('t', async (_job, ctx) => {
      seen.push(ctx.checkpoint);
      if (ctx.checkpoint === null) {
        ctx.progress({ done: 5, total: 10, message: 'half', checkpoint: { offset: 5 } });
        throw new Error('crash after half');
      }
      ctx.progress({ percent: 100 });
      return { resumedFrom: ctx.checkpoint.offset };
    });
    try {
      await sdkWorker.start();
      const { job } = await client.submit({ queue, type: 't', payload: {}, maxAttempts: 3 });
      const done = (await waitFor(async () => {
        const j = await client.get(job.id);
        return j.state === 'COMPLETED' ? j : null;
      }))!;
      expect(seen).toEqual([null, { offset: 5 }]);
      expect(done.result).toEqual({ resumedFrom: 5 });
      expect(done.progress).toMatchObject({ done: 5, total: 10, message: 'half', attempt: 1 });
    } finally {
      await sdkWorker.stop();
      client.close();
    }
  });
});

describe('the SDK client', () => {
  it('reportProgress stores a report of a unary lease; a malformed one throws before it is sent', async () => {
    const queue = queueName();
    const client = new EvoraClient({ address });
    try {
      const { id } = await submit(queue);
      const leased = await claimOne(queue, 'sdk-unary');
      const lease = { jobId: id, leaseToken: leased.leaseToken };
      await client.reportProgress(lease, { done: 2, total: 8, message: 'two of eight', checkpoint: { at: 2 } });
      expect((await client.get(id)).progress).toMatchObject({ percent: null, done: 2, total: 8, message: 'two of eight', attempt: 1 });
      await expect(client.reportProgress(lease, { percent: 120 })).rejects.toThrow(RangeError);
      await expect(client.reportProgress(lease, { percent: 5, done: 1, total: 2 })).rejects.toThrow(TypeError);
      await expect(client.reportProgress(lease, {})).rejects.toThrow(/progress report is empty/);
      expect((await client.attempts(id)).map((a) => [a.attempt, a.workerId, a.outcome])).toEqual([[1, 'sdk-unary', 'RUNNING']]);
      await call(clients.workers, 'completeJob', { jobId: id, leaseToken: leased.leaseToken });
    } finally {
      client.close();
    }
  });
});

describe('bad input is INVALID_ARGUMENT with one line, and changes nothing', () => {
  const cases: [Partial<ReportProgressRequest>, RegExp, string?][] = [
    [{ percent: 101 }, /^percent must be from 0 to 100, got 101$/],
    [{ percent: -1 }, /^percent must be from 0 to 100, got -1$/],
    [{ percent: Number.NaN }, /^percent must be from 0 to 100, got NaN$/, '{"percent":NaN}'],
    [{ done: 11, total: 10 }, /^done must not exceed total, got 11\/10$/],
    [{ done: -1, total: 10 }, /^done and total must be integers of at least 0, got -1\/10$/],
    [{ done: 1 }, /^done and total must be set together$/],
    [{ percent: 5, done: 1, total: 2 }, /^progress takes percent or done\/total, not both$/],
    [{ message: 'x'.repeat(257) }, /^message is longer than 256 characters$/, 'a message of 257 characters'],
    [{}, /^progress report is empty: give percent, done and total, a message or a checkpoint$/, 'an empty report (it wiped the stored progress)'],
    [{ checkpoint: { blob: 'x'.repeat(MAX_PAYLOAD_BYTES) } }, /^checkpoint is \d+ bytes of JSON; the limit is 2000$/, 'a checkpoint over the limit'],
    [{ jobId: 'nope' }, /^job_id "nope" is not a UUID$/],
  ];
  it.each(cases.map(([fields, message, label]) => [label ?? JSON.stringify(fields), fields, message] as const))('%s', async (_label, fields, message) => {
    const queue = queueName();
    const { id } = await submit(queue);
    const leased = await claimOne(queue);
    const err = (await call(clients.workers, 'reportProgress', report(leased, fields)).catch((e: unknown) => e)) as ServiceError;
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    expect(err.details).toMatch(message);
    expect((await getJob(id)).progress).toBeUndefined();
    await call(clients.workers, 'completeJob', { jobId: id, leaseToken: leased.leaseToken });
  });
});

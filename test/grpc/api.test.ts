import { beforeAll, describe, expect, it } from 'vitest';
import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import pg from 'pg';
import { JobState } from '../../src/gen/evora/v1/job.js';
import { AckResult, CancelReason } from '../../src/gen/evora/v1/worker.js';
import { queueName } from '../helpers/factories.js';
import { rawWorkers } from '../helpers/raw-worker.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import type { EvoraServer } from '../../src/server/server.js';
import { waitFor } from '../helpers/wait.js';

let clients: Clients;
let server: EvoraServer;
let databaseUrl: string;
beforeAll(async () => {
  ({ clients, server, databaseUrl } = await serverSetup());
});
const worker = rawWorkers(() => clients);

const submit = (queue: string, extra: Record<string, unknown> = {}) =>
  call(clients.jobs, 'submitJob', { queue, type: 'email', payload: { to: 'a@example.com' }, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0), ...extra });

describe('a job through the API', () => {
  it('submit -> pushed to a worker -> complete -> COMPLETED with the result', async () => {
    const queue = queueName();
    const { job, created } = await submit(queue, { idempotencyKey: 'once' });
    expect(created).toBe(true);
    expect(job?.state).toBe(JobState.JOB_STATE_PENDING);
    const replay = await submit(queue, { idempotencyKey: 'once' });
    expect(replay).toMatchObject({ created: false, job: { id: job!.id } });

    const w = worker();
    await w.hello('w1', [queue], 2);
    const welcome = w.received[0]?.msg;
    expect(welcome?.$case).toBe('welcome');
    await w.until(() => w.jobs.length === 1);
    const leased = w.jobs[0]!;
    expect(leased.job).toMatchObject({ id: job!.id, state: JobState.JOB_STATE_RUNNING, attempt: 1, workerId: 'w1', payload: { to: 'a@example.com' } });
    expect(leased.leaseToken).toMatch(/^[0-9a-f-]{36}$/);

    w.complete(leased, { sent: true });
    await w.until(() => w.acks(job!.id).length === 1);
    expect(w.acks(job!.id)[0]).toMatchObject({ accepted: true });

    const got = await call(clients.jobs, 'getJob', { id: job!.id });
    expect(got.job).toMatchObject({ state: JobState.JOB_STATE_COMPLETED, result: { sent: true }, attempt: 1 });
    expect(got.job?.finishedAt).toBeInstanceOf(Date);
    const list = await call(clients.jobs, 'listJobs', { queue, states: [JobState.JOB_STATE_COMPLETED], type: '', pageSize: 10, pageToken: '', idempotencyKey: '' });
    expect(list.jobs.map((j) => j.id)).toEqual([job!.id]);
  });

  it('fail with retry, snooze, and a unary claim/complete round trip', async () => {
    const queue = queueName();
    await call(clients.queues, 'upsertQueue', { name: queue, maxAttempts: 3, backoff: { kind: 3, base: { seconds: 0, nanos: 0 }, jitter: 0 } });
    const { job } = await submit(queue);
    const w = worker();
    await w.hello('w1', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    const first = w.jobs[0]!;
    w.send({ msg: { $case: 'fail', value: { jobId: job!.id, leaseToken: first.leaseToken, error: 'smtp down', nonRetryable: false } } });
    // Zero backoff: the retry is claimable at once and comes back to the same worker.
    await w.until(() => w.jobs.length === 2);
    expect(w.jobs[1]?.job).toMatchObject({ id: job!.id, attempt: 2, lastError: 'smtp down' });
    const runAt = new Date(Date.now() + 3_600_000);
    w.send({ msg: { $case: 'snooze', value: { jobId: job!.id, leaseToken: w.jobs[1]!.leaseToken, runAt } } });
    await w.until(() => w.acks(job!.id).length === 2);
    const snoozed = await call(clients.jobs, 'getJob', { id: job!.id });
    expect(snoozed.job).toMatchObject({ state: JobState.JOB_STATE_PENDING, attempt: 1 });
    expect(snoozed.job?.runAt?.getTime()).toBe(runAt.getTime());

    const q2 = queueName();
    const { job: j2 } = await submit(q2);
    const claimed = await call(clients.workers, 'claimJobs', { workerId: 'unary', queues: [q2], max: 5, jobTypes: [] });
    expect(claimed.jobs.map((l) => l.job?.id)).toEqual([j2!.id]);
    const ext = await call(clients.workers, 'extendLease', { jobId: j2!.id, leaseToken: claimed.jobs[0]!.leaseToken });
    expect(ext.leaseExpiresAt).toBeInstanceOf(Date);
    const done = await call(clients.workers, 'completeJob', { jobId: j2!.id, leaseToken: claimed.jobs[0]!.leaseToken, result: { ok: 1 } });
    expect(done.job?.state).toBe(JobState.JOB_STATE_COMPLETED);
  });

  it('ClaimJobs with wait long-polls until a job is submitted', async () => {
    const queue = queueName();
    const pending = call(clients.workers, 'claimJobs', { workerId: 'poller', queues: [queue], max: 1, jobTypes: [], wait: { seconds: 20, nanos: 0 } });
    await waitFor(() => server.dispatcher.waitingClaims > 0, { what: 'the claim to wait' });
    const { job } = await submit(queue);
    const claimed = await pending;
    expect(claimed.jobs[0]?.job?.id).toBe(job!.id);
  });
});

describe('ClaimJobs for a caller that has gone', () => {
  it('a long-poll whose client deadline passes while its claim runs gives the claimed job back: the next caller gets it', async () => {
    const queue = queueName();
    const { job } = await submit(queue);
    const id = job!.id;
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    try {
      // Hold the outbox so that the claim (which writes its events there) waits, with the
      // job already committed and claimable, until the caller has gone.
      await admin.query('BEGIN');
      await admin.query('LOCK TABLE evora.job_events IN EXCLUSIVE MODE');
      const gone = new Promise<ServiceError>((resolve) =>
        clients.workers.claimJobs(
          { workerId: 'gone', queues: [queue], max: 1, jobTypes: [], wait: { seconds: 20, nanos: 0 } },
          new Metadata(),
          { deadline: Date.now() + 2000 },
          (err) => resolve(err!),
        ),
      );
      // Inside admin's transaction pg_stat_activity keeps the state and query it first read
      // (only the wait event is live): clear that snapshot at each look, or a claim that
      // reaches PostgreSQL after the first look is never seen (through pgbouncer, often).
      await waitFor(
        async () => {
          await admin.query('SELECT pg_stat_clear_snapshot()');
          const waiting = await admin.query(
            `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%claimable_queues%'`,
          );
          return waiting.rowCount === 1;
        },
        { what: 'the claim to wait for the outbox' },
      );
      expect((await gone).code).toBe(status.DEADLINE_EXCEEDED);
      // A call behind the deadline's cancel on the same connection: once it is answered, the
      // server has seen the cancel.
      await expect(
        call(clients.workers, 'extendLease', { jobId: '00000000-0000-4000-8000-000000000000', leaseToken: '00000000-0000-4000-8000-000000000000' }),
      ).rejects.toMatchObject({ code: status.FAILED_PRECONDITION });
    } finally {
      await admin.query('ROLLBACK'); // the claim goes on, and takes the job
      await admin.end();
    }
    // Claimed (it has started) and given back: PENDING, not RUNNING for a caller that is gone.
    const back = await waitFor(
      async () => {
        const got = (await call(clients.jobs, 'getJob', { id })).job!;
        return got.startedAt && got.state === JobState.JOB_STATE_PENDING ? got : null;
      },
      { what: 'the job to be claimed and given back' },
    );
    expect(back!.attempt).toBe(0);
    const next = await call(clients.workers, 'claimJobs', { workerId: 'next', queues: [queue], max: 1, jobTypes: [] });
    expect(next.jobs.map((j) => j.job!.id)).toEqual([id]);
  });
});

describe('slots', () => {
  it('a worker with 3 slots never holds more than 3 of 20 jobs, and gets all 20', async () => {
    const queue = queueName();
    await call(clients.jobs, 'submitJobs', { idsOnly: false,
      jobs: Array.from({ length: 20 }, (_, i) => ({ queue, type: 't', payload: { i }, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) })),
    });
    const w = worker();
    await w.hello('w-slots', [queue], 3);
    const held = new Set<string>();
    let maxHeld = 0;
    let completed = 0;
    await w.until(() => {
      // Answer each pushed job once; the check runs after every message from the server.
      for (const leased of w.jobs) {
        const id = leased.job!.id;
        if (!held.has(id) && w.acks(id).length === 0) {
          held.add(id);
          maxHeld = Math.max(maxHeld, held.size);
          // Hold jobs a little while so pushes pile up against the slot limit.
          setTimeout(() => w.complete(leased), 5);
        }
      }
      for (const id of [...held]) if (w.acks(id).length > 0) {
        held.delete(id);
        completed++;
      }
      return completed === 20;
    });
    expect(maxHeld).toBeLessThanOrEqual(3);
    expect(maxHeld).toBe(3);
    expect(new Set(w.jobs.map((j) => j.job!.id)).size).toBe(20);
  });
});

describe('fencing and cancel', () => {
  it('a stale token is refused over the stream (ack accepted=false) and on unary calls (FAILED_PRECONDITION)', async () => {
    const queue = queueName();
    await call(clients.queues, 'upsertQueue', { name: queue, leaseSeconds: 1, backoff: { kind: 3, base: { seconds: 0, nanos: 0 }, jitter: 0 } });
    const { job } = await submit(queue);
    const first = await call(clients.workers, 'claimJobs', { workerId: 'slow', queues: [queue], max: 1, jobTypes: [] });
    const staleToken = first.jobs[0]!.leaseToken;
    // The lease expires; the sweeper requeues; a streaming worker gets it with a new token.
    const w = worker();
    await w.hello('fast', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    expect(w.jobs[0]!.leaseToken).not.toBe(staleToken);

    w.send({ msg: { $case: 'complete', value: { jobId: job!.id, leaseToken: staleToken, result: {} } } });
    await w.until(() => w.acks(job!.id).length === 1);
    expect(w.acks(job!.id)[0]).toMatchObject({ accepted: false, result: AckResult.ACK_RESULT_LEASE_LOST });
    expect(w.acks(job!.id)[0]?.reason).toMatch(/lease lost/);
    for (const [method, req] of [
      ['completeJob', { jobId: job!.id, leaseToken: staleToken, result: {} }],
      ['failJob', { jobId: job!.id, leaseToken: staleToken, error: 'x', nonRetryable: false }],
      ['extendLease', { jobId: job!.id, leaseToken: staleToken }],
    ] as const) {
      await expect(call(clients.workers, method as 'completeJob', req as never)).rejects.toMatchObject({ code: status.FAILED_PRECONDITION });
    }
    expect((await call(clients.jobs, 'getJob', { id: job!.id })).job?.state).toBe(JobState.JOB_STATE_RUNNING);
    w.complete(w.jobs[0]!);
    await w.until(() => w.acks(job!.id).length === 2);
    expect(w.acks(job!.id)[1]).toMatchObject({ accepted: true });
  });

  it('CancelJob on a running job pushes cancel to the worker that holds it; failing it then makes it CANCELLED', async () => {
    const queue = queueName();
    const { job } = await submit(queue);
    const w = worker();
    await w.hello('holder', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    const cancelled = await call(clients.jobs, 'cancelJob', { id: job!.id });
    expect(cancelled.job).toMatchObject({ state: JobState.JOB_STATE_RUNNING, cancelRequested: true });
    await w.until(() => w.received.some((r) => r.msg?.$case === 'cancel' && r.msg.value.jobId === job!.id));
    expect(w.messages('cancel')).toEqual([{ jobId: job!.id, code: CancelReason.CANCEL_REASON_OPERATOR }]);
    w.send({ msg: { $case: 'fail', value: { jobId: job!.id, leaseToken: w.jobs[0]!.leaseToken, error: 'cancelled', nonRetryable: true } } });
    await w.until(() => w.acks(job!.id).length === 1);
    expect((await call(clients.jobs, 'getJob', { id: job!.id })).job?.state).toBe(JobState.JOB_STATE_CANCELLED);
    const retried = await call(clients.jobs, 'retryJob', { id: job!.id });
    expect(retried.job?.state).toBe(JobState.JOB_STATE_PENDING);
  });

  it("a job's timeout: the server fails the attempt, pushes cancel TIMEOUT to its holder, refuses the late complete, and frees the slot", async () => {
    const queue = queueName();
    const { job } = await submit(queue, { maxAttempts: 1, timeout: { seconds: 1, nanos: 0 } });
    const w = worker();
    await w.hello('slowpoke', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    await w.until(() => w.received.some((r) => r.msg?.$case === 'cancel' && r.msg.value.jobId === job!.id));
    expect(w.messages('cancel')).toEqual([{ jobId: job!.id, code: CancelReason.CANCEL_REASON_TIMEOUT }]);
    expect((await call(clients.jobs, 'getJob', { id: job!.id })).job).toMatchObject({
      state: JobState.JOB_STATE_DLQ,
      attempt: 1,
      lastError: 'attempt timed out after 1s',
    });
    w.complete(w.jobs[0]!);
    await w.until(() => w.acks(job!.id).length === 1);
    expect(w.acks(job!.id)[0]).toMatchObject({ accepted: false, result: AckResult.ACK_RESULT_LEASE_LOST });
    // The one slot is free again: the next job is pushed to the same worker.
    const next = await submit(queue);
    await w.until(() => w.jobs.some((j) => j.job?.id === next.job!.id));
  });

  it('a worker killed mid-job: the job goes to another worker after the lease expires', async () => {
    const queue = queueName();
    await call(clients.queues, 'upsertQueue', { name: queue, leaseSeconds: 1, backoff: { kind: 3, base: { seconds: 0, nanos: 0 }, jitter: 0 } });
    const { job } = await submit(queue);
    const doomed = worker();
    await doomed.hello('doomed', [queue], 1);
    await doomed.until(() => doomed.jobs.length === 1);
    doomed.kill();
    const rescuer = worker();
    await rescuer.hello('rescuer', [queue], 1);
    await rescuer.until(() => rescuer.jobs.length === 1);
    expect(rescuer.jobs[0]?.job).toMatchObject({ id: job!.id, attempt: 2, workerId: 'rescuer' });
    expect(rescuer.jobs[0]?.job?.lastError).toMatch(/lease expired \(worker doomed\)/);
    rescuer.complete(rescuer.jobs[0]!);
    await waitFor(async () => (await call(clients.jobs, 'getJob', { id: job!.id })).job?.state === JobState.JOB_STATE_COMPLETED);
  });
});

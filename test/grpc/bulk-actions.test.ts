import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import pg from 'pg';
import { JobState } from '../../src/gen/evora/v1/job.js';
import { EvoraClient, EvoraWorker, NonRetryableError, type JobStateName } from '../../src/sdk/index.js';
import { deadLettersInsert } from '../helpers/dead-letters.js';
import { queueName } from '../helpers/factories.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * RetryJobs, PurgeJobs and CancelJobs over the wire: a thousand DLQ jobs retried and run to
 * completion by a worker, dry runs that change nothing, purges that never touch PENDING or
 * RUNNING jobs, a cancel that stops a worker's running job and cascades to a dependent in
 * another queue, repeats that find nothing left to do, a dry run's finished_before keeping
 * the action to the jobs it counted, and bad filters refused with nothing changed.
 */

let clients: Clients;
let client: EvoraClient;
let address: string;
let sql: pg.Pool;
const workers: EvoraWorker[] = [];

beforeAll(async () => {
  let databaseUrl: string;
  ({ clients, address, databaseUrl } = await serverSetup());
  client = new EvoraClient({ address });
  sql = new pg.Pool({ connectionString: databaseUrl, max: 2 });
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0, graceMs: 1_000 })));
});
afterAll(async () => {
  client.close();
  await sql.end();
});

/** The queue's jobs counted by state (states with none are absent). */
async function counts(queue: string): Promise<Partial<Record<JobStateName, number>>> {
  const { rows } = await sql.query<{ state: JobStateName; n: number }>(
    'SELECT state, count(*)::int AS n FROM evora.jobs WHERE queue = $1 GROUP BY state',
    [queue],
  );
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

/** Waits until telemetry has projected every event so far (the outbox is empty): finished jobs may then be purged. */
async function projected(): Promise<void> {
  await waitFor(async () => (await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM evora.job_events')).rows[0]!.n === 0, {
    what: 'the outbox to be empty',
  });
}

const filter = (f: { queue?: string; states?: JobState[]; type?: string; finishedBefore?: Date; ids?: string[] }) => ({
  queue: '',
  states: [],
  type: '',
  ids: [],
  ...f,
});

describe('RetryJobs', () => {
  it('retries 1,000 DLQ jobs in batches: a dry run counts them and changes nothing, then all run to completion; a repeat finds none', async () => {
    const queue = queueName('bulk');
    await client.upsertQueue(queue, { maxAttempts: 1 });
    let failing = true;
    const w = new EvoraWorker({ address, workerId: 'bulk-worker', queues: [queue], slots: 50 });
    workers.push(w);
    w.handle('work', async () => {
      if (failing) throw new NonRetryableError('not yet');
      return { ok: true };
    });
    w.handle('fine', async () => ({ ok: true }));
    await client.submitMany(Array.from({ length: 1000 }, (_, i) => ({ queue, type: 'work', payload: { n: i } })));
    const { job: done } = await client.submit({ queue, type: 'fine' });
    await w.start();
    await waitFor(async () => (await counts(queue)).DLQ === 1000 && (await counts(queue)).COMPLETED === 1, { what: '1,000 DLQ jobs', timeoutMs: 60_000 });

    const dry = await call(clients.jobs, 'retryJobs', { filter: filter({ queue, states: [JobState.JOB_STATE_DLQ] }), dryRun: true });
    expect(dry.count).toBe(1000);
    expect(await counts(queue)).toEqual({ DLQ: 1000, COMPLETED: 1 });

    const before = await client.get(done.id);
    failing = false;
    // No states: DLQ and CANCELLED; the COMPLETED job in the queue is left as it is.
    const res = await call(clients.jobs, 'retryJobs', { filter: filter({ queue }), dryRun: false });
    expect(res.count).toBe(1000);
    await waitFor(async () => (await counts(queue)).COMPLETED === 1001, { what: 'every retried job to complete', timeoutMs: 60_000 });
    const { rows } = await sql.query<{ attempt: number; n: number }>(
      "SELECT attempt, count(*)::int AS n FROM evora.jobs WHERE queue = $1 AND type = 'work' GROUP BY attempt",
      [queue],
    );
    // Attempts reset by the retry: each ran once more, as attempt 1.
    expect(rows).toEqual([{ attempt: 1, n: 1000 }]);
    expect(await client.get(done.id)).toMatchObject({ state: 'COMPLETED', finishedAt: before.finishedAt, attempt: 1 });
    // One retried_manually event per job, written by two statements of 500 (telemetry's copy of the outbox).
    await projected();
    const events = await sql.query<{ events: number; statements: number }>(
      `SELECT count(*)::int AS events, count(DISTINCT r.outbox_id)::int AS statements
       FROM evora.telemetry_recent_events r, unnest(r.kinds, r.queues) AS e(kind, queue)
       WHERE e.kind = 'retried_manually' AND e.queue = $1`,
      [queue],
    );
    expect(events.rows[0]).toEqual({ events: 1000, statements: 2 });

    expect((await call(clients.jobs, 'retryJobs', { filter: filter({ queue }), dryRun: false })).count).toBe(0);
    expect((await call(clients.jobs, 'retryJobs', { filter: filter({ queue }), dryRun: true })).count).toBe(0);
  });

  it('explicit ids: only the DLQ and CANCELLED ones among them are retried; unknown ids are skipped', async () => {
    const queue = queueName('ids');
    const [a, b, c] = await client.submitMany([1, 2, 3].map((n) => ({ queue, type: 't', payload: { n } })));
    await client.cancel(a!.job.id);
    await client.cancel(b!.job.id);
    const unknown = '00000000-0000-4000-8000-000000000000';
    const ids = [a!.job.id, c!.job.id, unknown];
    expect(await client.retryJobs({ ids }, { dryRun: true })).toBe(1);
    expect(await client.retryJobs({ ids })).toBe(1);
    expect(await counts(queue)).toEqual({ PENDING: 2, CANCELLED: 1 });
    expect((await client.get(b!.job.id)).state).toBe('CANCELLED');
    expect(await client.retryJobs({ ids })).toBe(0);
  });
});

describe('PurgeJobs', () => {
  it('deletes only finished jobs, dry run first; PENDING and RUNNING jobs stay; a repeat deletes nothing', async () => {
    const queue = queueName('purge');
    await client.upsertQueue(queue, { maxAttempts: 1 });
    const submitted = await client.submitMany(Array.from({ length: 8 }, (_, i) => ({ queue, type: i < 6 ? 'a' : 'b', payload: { n: i } })));
    const ids = submitted.map((r) => r.job.id);
    // 3 COMPLETED, 2 DLQ, 1 RUNNING (claimed, unfinished), then 1 CANCELLED and 1 PENDING.
    const claimed = await call(clients.workers, 'claimJobs', { workerId: 'unary', queues: [queue], max: 6, jobTypes: ['a'] });
    expect(claimed.jobs).toHaveLength(6);
    for (const [i, leased] of claimed.jobs.entries()) {
      const lease = { jobId: leased.job!.id, leaseToken: leased.leaseToken };
      if (i < 3) await call(clients.workers, 'completeJob', { ...lease, result: {} });
      else if (i < 5) await call(clients.workers, 'failJob', { ...lease, error: 'bad', nonRetryable: true });
    }
    await client.cancel(ids[6]!);
    expect(await counts(queue)).toEqual({ COMPLETED: 3, DLQ: 2, RUNNING: 1, CANCELLED: 1, PENDING: 1 });
    await projected();

    const dry = (f: Parameters<typeof filter>[0]) => call(clients.jobs, 'purgeJobs', { filter: filter(f), dryRun: true }).then((r) => r.count);
    expect(await dry({ queue })).toBe(6);
    expect(await dry({ queue, states: [JobState.JOB_STATE_COMPLETED] })).toBe(3);
    expect(await dry({ queue, type: 'b' })).toBe(1);
    expect(await dry({ queue, finishedBefore: new Date(Date.now() - 3_600_000) })).toBe(0);
    // Explicit ids, every one of the queue's: the unfinished ones are not counted.
    expect(await dry({ ids })).toBe(6);
    expect(await counts(queue)).toEqual({ COMPLETED: 3, DLQ: 2, RUNNING: 1, CANCELLED: 1, PENDING: 1 });

    const dlq = await call(clients.jobs, 'purgeJobs', { filter: filter({ queue, states: [JobState.JOB_STATE_DLQ] }), dryRun: false });
    expect(dlq.count).toBe(2);
    expect(await counts(queue)).toEqual({ COMPLETED: 3, RUNNING: 1, CANCELLED: 1, PENDING: 1 });
    const rest = await call(clients.jobs, 'purgeJobs', { filter: filter({ ids }), dryRun: false });
    expect(rest.count).toBe(4);
    expect(await counts(queue)).toEqual({ RUNNING: 1, PENDING: 1 });
    await expect(client.get(ids[0]!)).rejects.toMatchObject({ codeName: 'NOT_FOUND' });

    expect(await client.purgeJobs({ queue })).toBe(0);
    expect(await client.purgeJobs({ queue }, { dryRun: true })).toBe(0);
    // The RUNNING job still completes: its lease was not disturbed.
    const running = claimed.jobs[5]!;
    await call(clients.workers, 'completeJob', { jobId: running.job!.id, leaseToken: running.leaseToken, result: {} });
    expect(await counts(queue)).toEqual({ COMPLETED: 1, PENDING: 1 });
  });

  it('purges more than one batch (1,200 COMPLETED jobs)', async () => {
    const queue = queueName('many');
    await client.submitMany(Array.from({ length: 1200 }, (_, i) => ({ queue, type: 't', payload: { n: i } })));
    for (let left = 1200; left > 0; ) {
      const claimed = await call(clients.workers, 'claimJobs', { workerId: 'unary', queues: [queue], max: 100, jobTypes: [] });
      await Promise.all(claimed.jobs.map((j) => call(clients.workers, 'completeJob', { jobId: j.job!.id, leaseToken: j.leaseToken, result: {} })));
      left -= claimed.jobs.length;
    }
    await projected();
    expect(await client.purgeJobs({ queue, states: 'completed' }, { dryRun: true })).toBe(1200);
    expect(await client.purgeJobs({ queue, states: 'completed' })).toBe(1200);
    expect(await counts(queue)).toEqual({});
  });
});

describe('CancelJobs', () => {
  it('cancels pending and waiting jobs at once (a dependent in another queue with them) and stops a running one through its worker; finished jobs stay; a repeat finds none', async () => {
    const queue = queueName('cancel');
    const other = queueName('cancel-child');
    const w = new EvoraWorker({ address, workerId: 'cancel-worker', queues: [queue], slots: 1 });
    workers.push(w);
    let aborted: unknown = null;
    w.handle('slow', (_job, ctx) => new Promise((_resolve, reject) => {
      ctx.signal.addEventListener('abort', () => {
        aborted = ctx.signal.reason;
        reject(ctx.signal.reason);
      });
    }));
    w.handle('quick', () => ({ ok: true }));
    const { job: finished } = await client.submit({ queue, type: 'quick' });
    await w.start();
    await waitFor(async () => (await client.get(finished.id)).state === 'COMPLETED', { what: 'the quick job to complete' });
    const { job: running } = await client.submit({ queue, type: 'slow' });
    await waitFor(async () => (await client.get(running.id)).state === 'RUNNING', { what: 'the slow job to run' });
    // The worker's one slot is taken: these wait.
    const pending = await client.submitMany(Array.from({ length: 3 }, (_, i) => ({ queue, type: 'quick', payload: { n: i } })));
    const { job: child } = await client.submit({ queue: other, type: 'quick', dependsOn: [pending[0]!.job.id] });
    expect(await counts(queue)).toEqual({ COMPLETED: 1, RUNNING: 1, PENDING: 3 });
    expect(await counts(other)).toEqual({ WAITING: 1 });

    expect(await client.cancelJobs({ queue }, { dryRun: true })).toBe(4);
    expect(await client.cancelJobs({ queue, states: 'running' }, { dryRun: true })).toBe(1);
    expect(await counts(queue)).toEqual({ COMPLETED: 1, RUNNING: 1, PENDING: 3 });

    expect(await client.cancelJobs({ queue })).toBe(4);
    expect(await counts(other)).toEqual({ CANCELLED: 1 });
    await waitFor(async () => (await client.get(running.id)).state === 'CANCELLED', { what: 'the running job to be cancelled by its worker' });
    expect(aborted).toMatchObject({ kind: 'cancelled' });
    expect(await counts(queue)).toEqual({ COMPLETED: 1, CANCELLED: 4 });
    expect((await client.get(child.id)).state).toBe('CANCELLED');
    expect(await client.cancelJobs({ queue })).toBe(0);
    expect(await client.cancelJobs({ queue }, { dryRun: true })).toBe(0);
  });
});

describe('acting on what a dry run counted (its finished_before)', () => {
  it('RetryJobs and PurgeJobs: the same filter with the dry run\'s finished_before leaves the dead letters that came after the count', async () => {
    for (const method of ['retryJobs', 'purgeJobs'] as const) {
      const queue = queueName(method);
      // Long finished (the purge then never waits for telemetry), to the microsecond.
      const counted = await deadLettersInsert(sql, queue, ['2020-01-01 00:00:00.1+00', '2020-01-01 00:00:00.123456+00']);
      const dlq = filter({ queue, states: [JobState.JOB_STATE_DLQ] });
      const dry = await call(clients.jobs, method, { filter: dlq, dryRun: true });
      // The newest counted (.123456) cut to the millisecond, plus one: this API's Timestamps are of milliseconds.
      expect(dry).toEqual({ count: 2, finishedBefore: new Date('2020-01-01T00:00:00.124Z') });
      expect((await call(clients.jobs, method, { filter: { ...dlq, type: 'none' }, dryRun: true })).finishedBefore).toBeUndefined();

      // The group fills up after the count: a dead letter at the bound, and one now.
      const later = await deadLettersInsert(sql, queue, ['2020-01-01 00:00:00.124+00', new Date().toISOString()]);
      const done = await call(clients.jobs, method, { filter: { ...dlq, finishedBefore: dry.finishedBefore }, dryRun: false });
      expect(done.count).toBe(2);
      expect(done.finishedBefore).toBeUndefined();
      const { rows } = await sql.query<{ id: string; state: string }>('SELECT id, state FROM evora.jobs WHERE queue = $1 ORDER BY id', [queue]);
      const states = new Map(rows.map((r) => [r.id, r.state]));
      expect(counted.map((id) => states.get(id))).toEqual(method === 'retryJobs' ? ['PENDING', 'PENDING'] : [undefined, undefined]);
      expect(later.map((id) => states.get(id))).toEqual(['DLQ', 'DLQ']);
    }
  });
});

describe('bad filters: INVALID_ARGUMENT with one line, nothing changed', () => {
  it('refuses empty filters, states the action cannot touch, bad ids and names', async () => {
    const queue = queueName('bad');
    const { job } = await client.submit({ queue, type: 't' });
    await client.cancel(job.id);
    const cases: [method: 'retryJobs' | 'purgeJobs' | 'cancelJobs', f: Parameters<typeof filter>[0], message: RegExp][] = [
      ['cancelJobs', {}, /^a filter is required \(queue, states, type, error_group or ids\)$/],
      ['cancelJobs', { queue, states: [JobState.JOB_STATE_CANCELLED] }, /^filter\.states: CANCELLED jobs cannot be cancelled \(only PENDING, WAITING, RUNNING\)$/],
      ['cancelJobs', { queue, finishedBefore: new Date() }, /^filter\.finished_before cannot select jobs to cancel: they have not finished/],
      ['retryJobs', {}, /^a filter is required/],
      ['purgeJobs', {}, /^a filter is required/],
      ['retryJobs', { queue, states: [JobState.JOB_STATE_COMPLETED] }, /^filter\.states: COMPLETED jobs cannot be retried \(only DLQ, CANCELLED\)$/],
      ['retryJobs', { queue, states: [JobState.JOB_STATE_PENDING] }, /PENDING jobs cannot be retried/],
      ['purgeJobs', { queue, states: [JobState.JOB_STATE_PENDING] }, /^filter\.states: PENDING jobs cannot be purged \(only COMPLETED, DLQ, CANCELLED\)$/],
      ['purgeJobs', { queue, states: [JobState.JOB_STATE_CANCELLED, JobState.JOB_STATE_RUNNING] }, /RUNNING jobs cannot be purged/],
      ['purgeJobs', { queue, states: [JobState.JOB_STATE_UNSPECIFIED] }, /^filter\.states\[0\] is not a known state$/],
      ['retryJobs', { ids: [job.id, 'nope'] }, /^filter\.ids\[1\] "nope" is not a UUID$/],
      ['purgeJobs', { queue: 'not a queue' }, /^filter\.queue "not a queue" may contain only/],
      ['retryJobs', { type: 'bad type' }, /^filter\.type "bad type"/],
    ];
    for (const [method, f, message] of cases) {
      for (const dryRun of [true, false]) {
        const err = await call(clients.jobs, method, { filter: filter(f), dryRun }).then(
          () => null,
          (e: { code: number; details: string }) => e,
        );
        expect(err, `${method} ${JSON.stringify(f)}`).toMatchObject({ code: status.INVALID_ARGUMENT });
        expect(err!.details).toMatch(message);
      }
    }
    // Without a filter message at all.
    await expect(call(clients.jobs, 'purgeJobs', { filter: undefined, dryRun: false })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT });
    expect(await counts(queue)).toEqual({ CANCELLED: 1 });
  });
});

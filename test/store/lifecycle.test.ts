import { beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { jobInput, jobInputs, queueName } from '../helpers/factories.js';
import { sqlFor, storeSetup } from '../helpers/store-setup.js';
import { LIST_PAGE_BYTES } from '../../src/domain/validate.js';
import { queryConfig, statementsDeclared } from '../../src/store/statements.js';

let store: Store;
beforeAll(async () => {
  ({ store } = await storeSetup());
});

const T0 = new Date('2030-01-01T00:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

async function claimOne(queue: string, now = T0, workerId = 'w1') {
  const [job] = await store.jobClaim({ queues: [queue], limit: 1, workerId, now });
  if (!job) throw new Error('nothing claimed');
  return job;
}

/** A job claimed by 'old-worker' at T0, its lease expired and swept, claimed again by 'new-worker'. */
async function reclaimedJob() {
  const queue = queueName();
  await store.queueUpsert({ name: queue, backoffBaseSeconds: 0, backoffJitter: 0 });
  await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
  const first = await claimOne(queue, T0, 'old-worker');
  await store.jobSweepExpired({ limit: 10, now: at(31) });
  const second = await claimOne(queue, at(31), 'new-worker');
  return { first, second };
}

describe('claim', () => {
  it('returns each job exactly as the table now holds it, in claim order, each with its worker', async () => {
    const queue = queueName();
    await store.jobSubmitMany({ jobs: [0, 1, 2].map((i) => jobInput({ queue, payload: { i }, priority: -i, idempotencyKey: `k${i}` })), now: T0 });
    const claimed = await store.jobClaim({ queues: [queue], workerIds: ['a', 'b', 'c'], now: at(1) });
    expect(claimed.map((j) => [j.payload, j.workerId])).toEqual([[{ i: 2 }, 'a'], [{ i: 1 }, 'b'], [{ i: 0 }, 'c']]);
    for (const job of claimed) expect(job).toEqual(await store.jobGet({ id: job.id }));
  });
});

describe('submit', () => {
  it('creates the queue with defaults and a PENDING job', async () => {
    const queue = queueName();
    const { job, created } = await store.jobSubmit({ job: jobInput({ queue, payload: { a: 1 } }), now: T0 });
    expect(created).toBe(true);
    expect(job).toMatchObject({ queue, type: 'noop', payload: { a: 1 }, state: 'PENDING', attempt: 0, priority: 0 });
    expect(job.runAt).toEqual(T0);
    const q = await store.queueGet({ name: queue });
    expect(job.maxAttempts).toBe(q.maxAttempts);
    expect(q).toMatchObject({ paused: false, backoffKind: 'exponential', leaseSeconds: 30 });
  });

  it('submitMany returns results in input order and is all or nothing', async () => {
    const queue = queueName();
    const results = await store.jobSubmitMany({ jobs: jobInputs(queue, 5), now: T0 });
    expect(results.map((r) => r.job.payload)).toEqual([0, 1, 2, 3, 4].map((n) => ({ n })));
    await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k', payload: { v: 1 } }) });
    // The second job reuses a key with other content: the whole batch is refused.
    await expect(
      store.jobSubmitMany({
        jobs: [jobInput({ queue, idempotencyKey: 'fresh' }), jobInput({ queue, idempotencyKey: 'k', payload: { v: 2 } })],
      }),
    ).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    const { jobs } = await store.jobList({ queue, limit: 100 });
    expect(jobs).toHaveLength(6);
    expect(jobs.some((j) => j.idempotencyKey === 'fresh')).toBe(false);
  });

  it('a replay in a batch returns the existing job with created=false', async () => {
    const queue = queueName();
    const first = await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k1' }) });
    const batch = await store.jobSubmitMany({
      jobs: [jobInput({ queue, idempotencyKey: 'k1' }), jobInput({ queue, idempotencyKey: 'k2' })],
    });
    expect(batch[0]).toMatchObject({ created: false, job: { id: first.job.id } });
    expect(batch[1]?.created).toBe(true);
  });

  it('a job with run_at in the future is PENDING but not claimable until then', async () => {
    const queue = queueName();
    await store.jobSubmit({ job: jobInput({ queue, runAt: at(60) }), now: T0 });
    expect(await store.jobClaim({ queues: [queue], limit: 10, workerId: 'w', now: T0 })).toHaveLength(0);
    expect(await store.jobClaim({ queues: [queue], limit: 10, workerId: 'w', now: at(60) })).toHaveLength(1);
  });
});

describe('claim', () => {
  it('claims in priority then run_at order, sets RUNNING, attempt+1, a fresh token and the lease', async () => {
    const queue = queueName();
    await store.jobSubmitMany({
      jobs: [
        jobInput({ queue, priority: 5, runAt: at(-30), payload: { name: 'p5-old' } }),
        jobInput({ queue, priority: 1, runAt: at(-10), payload: { name: 'p1-new' } }),
        jobInput({ queue, priority: 1, runAt: at(-20), payload: { name: 'p1-old' } }),
      ],
      now: T0,
    });
    const claimed = await store.jobClaim({ queues: [queue], limit: 2, workerId: 'w1', now: T0 });
    expect(claimed.map((j) => j.payload.name)).toEqual(['p1-old', 'p1-new']);
    for (const job of claimed) {
      expect(job).toMatchObject({ state: 'RUNNING', attempt: 1, workerId: 'w1' });
      expect(job.lockedUntil).toEqual(at(30));
      expect(job.leaseToken).toMatch(/^[0-9a-f-]{36}$/);
    }
    expect(claimed[0]?.leaseToken).not.toBe(claimed[1]?.leaseToken);
  });

  it('jobs of one batch (same priority and run_at) are claimed in submit order', async () => {
    const queue = queueName();
    const submitted = await store.jobSubmitMany({ jobs: jobInputs(queue, 30), now: T0 });
    const claimed = await store.jobClaim({ queues: [queue], limit: 30, workerId: 'w', now: T0 });
    expect(claimed.map((j) => j.id)).toEqual(submitted.map((r) => r.job.id));
    // Finish them, so other tests' sweeps at the same simulated time do not meet them.
    await store.jobCompleteMany({ completions: claimed.map((j) => ({ id: j.id, token: j.leaseToken!, result: {} })) });
  });

  it('skips paused queues', async () => {
    const queue = queueName();
    await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
    await store.queueSetPaused({ name: queue, paused: true });
    expect(await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: T0 })).toHaveLength(0);
    await store.queueSetPaused({ name: queue, paused: false });
    expect(await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: T0 })).toHaveLength(1);
  });
});

describe('worker writes', () => {
  it('complete stores the result and frees the lease', async () => {
    const queue = queueName();
    await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
    const job = await claimOne(queue);
    const [out] = await store.jobCompleteMany({
      completions: [{ id: job.id, token: job.leaseToken!, result: { ok: true } }],
      now: at(1),
    });
    expect(out).toMatchObject({ accepted: true, job: { id: job.id, state: 'COMPLETED', attempt: 1, workerId: job.workerId } });
    expect(await store.jobGet({ id: job.id })).toMatchObject({ state: 'COMPLETED', result: { ok: true }, lockedUntil: null, finishedAt: at(1) });
  });

  it('a stale token cannot complete, fail, snooze or heartbeat a re-claimed job', async () => {
    // The lease expires, the sweeper requeues, another worker claims it.
    const { first, second } = await reclaimedJob();
    expect(second.id).toBe(first.id);
    expect(second.leaseToken).not.toBe(first.leaseToken);

    const stale = { id: first.id, token: first.leaseToken! };
    const lost = { id: first.id, accepted: false, reason: 'lease_lost' };
    expect(await store.jobCompleteMany({ completions: [{ ...stale, result: {} }] })).toEqual([lost]);
    expect(await store.jobFailMany({ failures: [{ ...stale, error: 'x', retryable: true }] })).toEqual([lost]);
    expect(await store.jobSnoozeMany({ snoozes: [{ ...stale, runAt: at(100) }] })).toEqual([lost]);
    expect(await store.jobHeartbeatMany({ leases: [stale], now: at(32) })).toEqual({ extended: [], lost: [stale] });

    const after = await store.jobGet({ id: first.id });
    expect(after).toMatchObject({ state: 'RUNNING', workerId: 'new-worker', leaseToken: second.leaseToken, attempt: 2 });
    expect(after.lockedUntil).toEqual(at(61));
    // The current holder still can.
    const [ok] = await store.jobCompleteMany({ completions: [{ id: second.id, token: second.leaseToken!, result: {} }] });
    expect(ok?.accepted).toBe(true);
  });

  it('a stale and a fresh report of one job in the same batch: the fresh one is accepted, whatever the order', async () => {
    for (const staleFirst of [true, false]) {
      const { first, second } = await reclaimedJob();
      const stale = { id: first.id, token: first.leaseToken!, result: { run: 1 } };
      const fresh = { id: second.id, token: second.leaseToken!, result: { run: 2 } };
      const out = await store.jobCompleteMany({ completions: staleFirst ? [stale, fresh] : [fresh, stale] });
      expect(out.map((o) => o.accepted)).toEqual(staleFirst ? [false, true] : [true, false]);
      expect(await store.jobGet({ id: first.id })).toMatchObject({ state: 'COMPLETED', result: { run: 2 } });
    }
  });

  it('malformed ids or tokens are answered lease_lost, not errors', async () => {
    const out = await store.jobCompleteMany({ completions: [{ id: 'nope', token: 'nope', result: {} }] });
    expect(out).toEqual([{ id: 'nope', accepted: false, reason: 'lease_lost' }]);
  });

  it('heartbeat extends only current leases and says which are lost', async () => {
    const queue = queueName();
    await store.jobSubmitMany({ jobs: jobInputs(queue, 2), now: T0 });
    const [a, b] = await store.jobClaim({ queues: [queue], limit: 2, workerId: 'w', now: T0 });
    const beat = await store.jobHeartbeatMany({
      leases: [
        { id: a!.id, token: a!.leaseToken! },
        { id: b!.id, token: '00000000-0000-4000-8000-000000000000' },
      ],
      now: at(20),
    });
    expect(beat.extended).toEqual([{ id: a!.id, token: a!.leaseToken, lockedUntil: at(50), cancelRequested: false }]);
    expect(beat.lost).toEqual([{ id: b!.id, token: '00000000-0000-4000-8000-000000000000' }]);
  });

  it('heartbeat of a stale and the current lease of one job: only the current one is extended, the stale one is lost', async () => {
    const { first, second } = await reclaimedJob();
    const stale = { id: first.id, token: first.leaseToken! };
    const current = { id: second.id, token: second.leaseToken! };
    for (const leases of [
      [stale, current],
      [current, stale],
    ]) {
      const beat = await store.jobHeartbeatMany({ leases, now: at(40) });
      expect(beat.extended).toEqual([{ ...current, lockedUntil: at(70), cancelRequested: false }]);
      expect(beat.lost).toEqual([stale]);
    }
  });

  it('fail with attempts left goes back to PENDING after the backoff, or at retryAt', async () => {
    const queue = queueName();
    await store.queueUpsert({ name: queue, backoffKind: 'fixed', backoffBaseSeconds: 10, backoffJitter: 0 });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 2), now: T0 });
    const [a, b] = await store.jobClaim({ queues: [queue], limit: 2, workerId: 'w', now: T0 });
    const out = await store.jobFailMany({
      failures: [
        { id: a!.id, token: a!.leaseToken!, error: 'boom', retryable: true },
        { id: b!.id, token: b!.leaseToken!, error: 'later', retryable: true, retryAt: at(500) },
      ],
      now: at(1),
    });
    expect(out.map((o) => o.accepted)).toEqual([true, true]);
    const ja = await store.jobGet({ id: a!.id });
    expect(ja).toMatchObject({ state: 'PENDING', attempt: 1, lastError: 'boom', lockedUntil: null });
    expect(ja.runAt).toEqual(at(11));
    expect((await store.jobGet({ id: b!.id })).runAt).toEqual(at(500));
  });

  it('fail non-retryable, or with no attempts left, dead-letters with the error kept', async () => {
    const queue = queueName();
    await store.jobSubmitMany({
      jobs: [jobInput({ queue, maxAttempts: 5 }), jobInput({ queue, maxAttempts: 1 })],
      now: T0,
    });
    const claimed = await store.jobClaim({ queues: [queue], limit: 2, workerId: 'w', now: T0 });
    // Same priority and run_at: claim order between them is not defined; tell them apart.
    const a = claimed.find((j) => j.maxAttempts === 5);
    const b = claimed.find((j) => j.maxAttempts === 1);
    await store.jobFailMany({
      failures: [
        { id: a!.id, token: a!.leaseToken!, error: 'fatal', retryable: false },
        { id: b!.id, token: b!.leaseToken!, error: 'last try', retryable: true },
      ],
      now: at(1),
    });
    expect(await store.jobGet({ id: a!.id })).toMatchObject({ state: 'DLQ', lastError: 'fatal', finishedAt: at(1) });
    expect(await store.jobGet({ id: b!.id })).toMatchObject({ state: 'DLQ', lastError: 'last try' });
  });

  it('snooze goes back to PENDING at runAt without using up an attempt', async () => {
    const queue = queueName();
    await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
    const job = await claimOne(queue);
    const [out] = await store.jobSnoozeMany({ snoozes: [{ id: job.id, token: job.leaseToken!, runAt: at(300) }], now: at(1) });
    expect(out).toMatchObject({ accepted: true, job: { state: 'PENDING', attempt: 0, runAt: at(300) } });
    expect(await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: at(299) })).toHaveLength(0);
    expect((await claimOne(queue, at(300))).attempt).toBe(1);
  });
});

describe('cancel and retry', () => {
  it('cancels a PENDING job at once', async () => {
    const queue = queueName();
    const { job } = await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
    expect(await store.jobCancel({ id: job.id, now: at(1) })).toMatchObject({ state: 'CANCELLED', finishedAt: at(1) });
    expect(await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: at(2) })).toHaveLength(0);
    // Cancel is idempotent.
    expect((await store.jobCancel({ id: job.id })).state).toBe('CANCELLED');
  });

  it('flags a RUNNING job; it becomes CANCELLED when the worker gives it up', async () => {
    const queue = queueName();
    await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
    const job = await claimOne(queue);
    const flagged = await store.jobCancel({ id: job.id, now: at(1) });
    expect(flagged).toMatchObject({ state: 'RUNNING', cancelRequestedAt: at(1) });
    const beat = await store.jobHeartbeatMany({ leases: [{ id: job.id, token: job.leaseToken! }], now: at(2) });
    expect(beat.extended[0]?.cancelRequested).toBe(true);
    const [out] = await store.jobFailMany({
      failures: [{ id: job.id, token: job.leaseToken!, error: 'cancelled by operator', retryable: true }],
      now: at(3),
    });
    expect(out).toMatchObject({ accepted: true, job: { state: 'CANCELLED' } });
  });

  it('a RUNNING job flagged for cancel becomes CANCELLED when its lease expires', async () => {
    const queue = queueName();
    await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
    const job = await claimOne(queue);
    await store.jobCancel({ id: job.id, now: at(1) });
    const swept = await store.jobSweepExpired({ limit: 10, now: at(31) });
    expect(swept.cancelled).toBe(1);
    expect((await store.jobGet({ id: job.id })).state).toBe('CANCELLED');
  });

  it('a RUNNING job flagged for cancel gets one lease length to stop: heartbeats do not hold it past that', async () => {
    // A handler that ignores the cancel while its worker keeps heartbeating used to hold the
    // job RUNNING (cancel requested) for ever: each beat extended the lease by a full length.
    const queue = queueName();
    await store.queueUpsert({ name: queue, leaseSeconds: 30 });
    await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
    const job = await claimOne(queue);
    const lease = [{ id: job.id, token: job.leaseToken! }];
    await store.jobCancel({ id: job.id, now: at(1) });
    const early = await store.jobHeartbeatMany({ leases: lease, now: at(10) });
    expect(early.extended).toEqual([{ id: job.id, token: job.leaseToken, lockedUntil: at(31), cancelRequested: true }]);
    expect((await store.jobHeartbeatMany({ leases: lease, now: at(25) })).extended[0]?.lockedUntil).toEqual(at(31));
    const late = await store.jobHeartbeatMany({ leases: lease, now: at(31) });
    expect(late).toEqual({ extended: [], lost: lease });
    const swept = await store.jobSweepExpired({ limit: 10, now: at(32) });
    expect(swept.cancelled).toBe(1);
    expect(await store.jobGet({ id: job.id })).toMatchObject({ state: 'CANCELLED', finishedAt: at(32) });
  });

  it('retry brings DLQ and CANCELLED jobs back with attempts reset; COMPLETED is refused', async () => {
    const queue = queueName();
    const { job } = await store.jobSubmit({ job: jobInput({ queue, maxAttempts: 1 }), now: T0 });
    const claimed = await claimOne(queue);
    await store.jobFailMany({ failures: [{ id: job.id, token: claimed.leaseToken!, error: 'x', retryable: true }], now: at(1) });
    expect((await store.jobGet({ id: job.id })).state).toBe('DLQ');
    const retried = await store.jobRetry({ id: job.id, now: at(2) });
    expect(retried).toMatchObject({ state: 'PENDING', attempt: 0, runAt: at(2), finishedAt: null });
    const again = await claimOne(queue, at(2));
    await store.jobCompleteMany({ completions: [{ id: job.id, token: again.leaseToken!, result: { ok: 1 } }] });
    await expect(store.jobRetry({ id: job.id })).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    await expect(store.jobCancel({ id: job.id })).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
  });

  it('unknown ids are NOT_FOUND, malformed ones INVALID_ARGUMENT', async () => {
    await expect(store.jobGet({ id: '00000000-0000-4000-8000-000000000000' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(store.jobGet({ id: 'x' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(store.jobRetry({ id: '00000000-0000-4000-8000-000000000000' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe('list', () => {
  it('filters by queue, states and type, newest first, with keyset pages', async () => {
    const queue = queueName();
    await store.jobSubmitMany({ jobs: jobInputs(queue, 7, { type: 'a' }) });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 3, { type: 'b' }) });
    const seen: string[] = [];
    let afterId: string | null = null;
    let pages = 0;
    do {
      const page: { jobs: { id: string }[]; nextAfterId: string | null } = await store.jobList({
        queue,
        type: 'a',
        states: ['PENDING'],
        limit: 3,
        afterId,
      });
      seen.push(...page.jobs.map((j) => j.id));
      afterId = page.nextAfterId;
      pages++;
    } while (afterId);
    expect(pages).toBe(3);
    expect(seen).toHaveLength(7);
    expect(new Set(seen).size).toBe(7);
    expect([...seen].sort().reverse()).toEqual(seen);
    expect((await store.jobList({ queue, states: ['RUNNING'], limit: 10 })).jobs).toHaveLength(0);
  });

  it('sizes a page only up to its 1 MiB cut: the jobs past it are never turned into text', async () => {
    // Converting a large jsonb to text costs about 40 ms per MiB: a page of 1,000 large jobs
    // sized whole took some 40 s to return the one or two before its cut.
    const queue = queueName();
    const ids: string[] = [];
    for (let n = 0; n < 8; n++) ids.push((await store.jobSubmit({ job: jobInput({ queue, payload: { n, blob: 'x'.repeat(600_000) } }) })).job.id);
    const newest = [...ids].reverse();
    const page = await store.jobList({ queue, limit: 100 });
    expect(page.jobs.map((j) => j.id)).toEqual(newest.slice(0, 2));
    expect(page.nextAfterId).toBe(newest[1]);
    const next = await store.jobList({ queue, limit: 2, afterId: page.nextAfterId });
    expect([next.jobs.map((j) => j.id), next.nextAfterId]).toEqual([newest.slice(2, 4), newest[3]]);
    // The window that sizes the jobs read 3 of the 8: the two returned and the first past the bound.
    const list = statementsDeclared().find((st) => st.file === 'job-list.sql')!;
    const params = { queue, states: null, type: null, idempotencyKey: null, errorGroup: null, afterId: null, limit: 101, pageBytes: LIST_PAGE_BYTES };
    const { rows } = await sqlFor(store).query<{ 'QUERY PLAN': unknown }>({ ...queryConfig(list, params), name: undefined, text: `EXPLAIN (ANALYZE, FORMAT JSON) ${list.text}` });
    const windows: { 'Actual Rows': number }[] = [];
    const walk = (node: { 'Node Type'?: string; Plans?: unknown[] }) => {
      if (node['Node Type'] === 'WindowAgg') windows.push(node as { 'Actual Rows': number });
      for (const child of node.Plans ?? []) walk(child as typeof node);
    };
    walk((rows[0]!['QUERY PLAN'] as { Plan: { Plans?: unknown[] } }[])[0]!.Plan);
    expect(windows.map((w) => w['Actual Rows'])).toEqual([3]);
  });
});

describe('queues', () => {
  it('upsert creates, changes only given fields, says which it did, and lists', async () => {
    const name = queueName();
    const created = await store.queueUpsert({ name, maxAttempts: 3, leaseSeconds: 60, now: T0 });
    expect(created).toEqual({
      created: true,
      queue: expect.objectContaining({ name, maxAttempts: 3, leaseSeconds: 60, backoffKind: 'exponential', maxConcurrency: null, createdAt: T0, updatedAt: T0 }),
    });
    const changed = await store.queueUpsert({ name, backoffKind: 'linear', maxConcurrency: 4, now: at(5) });
    expect(changed).toEqual({
      created: false,
      queue: expect.objectContaining({ maxAttempts: 3, leaseSeconds: 60, backoffKind: 'linear', maxConcurrency: 4, createdAt: T0, updatedAt: at(5) }),
    });
    expect((await store.queueUpsert({ name, maxConcurrency: 0 })).queue.maxConcurrency).toBeNull();
    expect((await store.queueList()).map((q) => q.name)).toContain(name);
    await expect(store.queueGet({ name: 'missing' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(store.queueSetPaused({ name: 'missing', paused: true })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('of upserts racing to create one queue, exactly one says it created it', async () => {
    const name = queueName();
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => store.queueUpsert({ name, leaseSeconds: 10 + i })));
    expect(results.filter((r) => r.created)).toHaveLength(1);
  });
});

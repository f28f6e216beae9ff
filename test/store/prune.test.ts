import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logger.js';
import { Projector } from '../../src/maintenance/projector.js';
import { statementNamed } from '../../src/store/catalog.js';
import type { Store } from '../../src/store/store.js';
import { PostgresTelemetrySink } from '../../src/telemetry/pg-sink.js';
import { jobInput, jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';

/**
 * The retention statement (sql/job-prune.sql) through Store.jobPrune: which jobs one batch
 * deletes and which it never touches. The pruner service's loop, metrics and leadership are
 * in test/maintenance/pruner.test.ts.
 */

let store: Store;
let sql: pg.Pool;
let projector: Projector;
beforeAll(async () => {
  ({ store, sql } = await storeSetup());
  projector = new Projector({ store, sink: new PostgresTelemetrySink(store), logger: silentLogger() });
});

const signal = new AbortController().signal;
const T0 = new Date('2032-03-01T00:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const HOUR = 3600;
const DAY = 86_400;

/** Applies every outbox event to telemetry, so that no job is held back by unprojected events. */
async function projectAll(): Promise<void> {
  while ((await projector.runOnce(signal)).events > 0);
  expect((await store.outboxLag()).events).toBe(0);
}

/** This queue's counts in a prune result (the statement prunes every queue). */
function countsOf(result: { queue: string; state: string; jobs: number }[], queue: string): Record<string, number> {
  return Object.fromEntries(result.filter((c) => c.queue === queue).map((c) => [c.state, c.jobs]));
}

async function jobIds(queue: string): Promise<Set<string>> {
  const { rows } = await sql.query<{ id: string }>('SELECT id FROM evora.jobs WHERE queue = $1', [queue]);
  return new Set(rows.map((r) => r.id));
}

/** One job of each state in `queue`, all finished (or not) at `when`; a scheduled one due 10 days later. */
async function jobOfEachState(queue: string, when: Date) {
  await store.queueUpsert({ name: queue, maxAttempts: 1, leaseSeconds: 30 * DAY });
  const submitted = await store.jobSubmitMany({
    jobs: [...jobInputs(queue, 5), jobInput({ queue, runAt: new Date(when.getTime() + 10 * DAY) })],
    now: when,
  });
  const [completed, dlq, cancelled, running, pending, scheduled] = submitted.map((r) => r.job.id) as [string, string, string, string, string, string];
  // Claimed in submit order: the first four.
  const claimed = await store.jobClaim({ queues: [queue], limit: 4, workerId: 'w', now: when });
  expect(claimed.map((j) => j.id)).toEqual([completed, dlq, cancelled, running]);
  const token = (id: string) => claimed.find((j) => j.id === id)!.leaseToken!;
  await store.jobCompleteMany({ completions: [{ id: completed, token: token(completed) }], now: when });
  await store.jobFailMany({ failures: [{ id: dlq, token: token(dlq), error: 'boom', retryable: false }], now: when });
  await store.jobCancel({ id: cancelled, now: when });
  await store.jobFailMany({ failures: [{ id: cancelled, token: token(cancelled), error: 'gave up', retryable: true }], now: when });
  const ids = { completed, dlq, cancelled, running, pending, scheduled };
  const states = { completed: 'COMPLETED', dlq: 'DLQ', cancelled: 'CANCELLED', running: 'RUNNING', pending: 'PENDING', scheduled: 'PENDING' } as const;
  for (const [k, state] of Object.entries(states)) expect((await store.jobGet({ id: ids[k as keyof typeof ids] })).state).toBe(state);
  return ids;
}

describe('retention: jobPrune', () => {
  it("deletes each finished job once its queue's retention for its state has passed, and never a PENDING, RUNNING or scheduled one", async () => {
    const queue = queueName('ret');
    const ids = await jobOfEachState(queue, T0);
    await store.queueUpsert({ name: queue, completedRetentionSeconds: HOUR, cancelledRetentionSeconds: 2 * HOUR, dlqRetentionSeconds: 3 * HOUR });
    await projectAll();

    expect(countsOf(await store.jobPrune({ limit: 100, now: at(HOUR) }), queue)).toEqual({}); // not before its retention
    expect(countsOf(await store.jobPrune({ limit: 100, now: at(HOUR + 1) }), queue)).toEqual({ COMPLETED: 1 });
    expect(countsOf(await store.jobPrune({ limit: 100, now: at(2 * HOUR + 1) }), queue)).toEqual({ CANCELLED: 1 });
    expect(countsOf(await store.jobPrune({ limit: 100, now: at(3 * HOUR + 1) }), queue)).toEqual({ DLQ: 1 });
    expect(await jobIds(queue)).toEqual(new Set([ids.pending, ids.running, ids.scheduled]));
    // Years later, the jobs that never finished are still there.
    expect(countsOf(await store.jobPrune({ limit: 100, now: at(5 * 365 * DAY) }), queue)).toEqual({});
    expect(await jobIds(queue)).toEqual(new Set([ids.pending, ids.running, ids.scheduled]));
  });

  it('a new queue gets the defaults (7 days completed and cancelled, 30 days DLQ); 0 keeps them forever; each queue its own', async () => {
    const defaults = queueName('def');
    const forever = queueName('forever');
    const { queue } = await store.queueUpsert({ name: defaults });
    expect(queue).toMatchObject({ completedRetentionSeconds: 7 * DAY, cancelledRetentionSeconds: 7 * DAY, dlqRetentionSeconds: 30 * DAY });
    const { queue: kept } = await store.queueUpsert({ name: forever, completedRetentionSeconds: 0, dlqRetentionSeconds: 0 });
    expect(kept).toMatchObject({ completedRetentionSeconds: null, cancelledRetentionSeconds: 7 * DAY, dlqRetentionSeconds: null });
    // Unset keeps the current value.
    expect((await store.queueUpsert({ name: forever, maxAttempts: 3 })).queue).toMatchObject({ completedRetentionSeconds: null, dlqRetentionSeconds: null });
    // A queue created by a submit gets the table's defaults too.
    const bySubmit = queueName('bysubmit');
    await store.jobSubmit({ job: jobInput({ queue: bySubmit }) });
    expect(await store.queueGet({ name: bySubmit })).toMatchObject({ completedRetentionSeconds: 7 * DAY, dlqRetentionSeconds: 30 * DAY });

    const a = await jobOfEachState(defaults, T0);
    const b = await jobOfEachState(forever, T0);
    await projectAll();
    const week = await store.jobPrune({ limit: 100, now: at(7 * DAY + 1) });
    expect(countsOf(week, defaults)).toEqual({ COMPLETED: 1, CANCELLED: 1 });
    expect(countsOf(week, forever)).toEqual({ CANCELLED: 1 }); // kept forever: only its completed and DLQ jobs
    expect(countsOf(await store.jobPrune({ limit: 100, now: at(30 * DAY + 1) }), defaults)).toEqual({ DLQ: 1 });
    expect(await jobIds(defaults)).toEqual(new Set([a.pending, a.running, a.scheduled]));

    expect(countsOf(await store.jobPrune({ limit: 100, now: at(99 * 365 * DAY) }), forever)).toEqual({});
    expect(await jobIds(forever)).toEqual(new Set([b.completed, b.dlq, b.pending, b.running, b.scheduled]));
  });

  it('never deletes a job whose events are still in the outbox; once they are projected, it goes', async () => {
    const queue = queueName('unprojected');
    await projectAll();
    await store.queueUpsert({ name: queue, completedRetentionSeconds: 1 });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 3), now: T0 });
    const claimed = await store.jobClaim({ queues: [queue], limit: 3, workerId: 'w', now: T0 });
    await store.jobCompleteMany({ completions: claimed.map((j) => ({ id: j.id, token: j.leaseToken! })), now: at(10) });
    expect((await store.outboxLag()).events).toBeGreaterThan(0);

    expect(countsOf(await store.jobPrune({ limit: 100, now: at(365 * DAY) }), queue)).toEqual({});
    expect((await jobIds(queue)).size).toBe(3);
    await projectAll();
    expect(countsOf(await store.jobPrune({ limit: 100, now: at(365 * DAY) }), queue)).toEqual({ COMPLETED: 3 });
  });

  it('an event written after a job finished (another job, later) does not hold that job back; one written before it does', async () => {
    const queue = queueName('horizon');
    await projectAll();
    await store.queueUpsert({ name: queue, completedRetentionSeconds: 1 });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 2), now: T0 });
    const [first, second] = await store.jobClaim({ queues: [queue], limit: 2, workerId: 'w', now: T0 });
    await store.jobCompleteMany({ completions: [{ id: first!.id, token: first!.leaseToken! }], now: at(10) });
    await projectAll();
    // An unprojected event after the first job finished: the first may go, the second (finished later) not.
    await store.jobCompleteMany({ completions: [{ id: second!.id, token: second!.leaseToken! }], now: at(20) });
    await store.jobSubmit({ job: jobInput({ queue: queueName('other') }), now: at(15) });
    expect(countsOf(await store.jobPrune({ limit: 100, now: at(DAY) }), queue)).toEqual({ COMPLETED: 1 });
    expect(await jobIds(queue)).toEqual(new Set([second!.id]));
    await projectAll();
    expect(countsOf(await store.jobPrune({ limit: 100, now: at(DAY) }), queue)).toEqual({ COMPLETED: 1 });
  });

  it('deletes at most `limit` jobs per call, oldest finished first', async () => {
    const queue = queueName('limit');
    await store.queueUpsert({ name: queue, completedRetentionSeconds: 1 });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 10), now: T0 });
    const claimed = await store.jobClaim({ queues: [queue], limit: 10, workerId: 'w', now: T0 });
    // Finished one second apart, newest first.
    for (const [i, j] of [...claimed].reverse().entries()) {
      await store.jobCompleteMany({ completions: [{ id: j.id, token: j.leaseToken! }], now: at(100 + i) });
    }
    await projectAll();
    expect(countsOf(await store.jobPrune({ limit: 4, now: at(DAY) }), queue)).toEqual({ COMPLETED: 4 });
    // The four that finished first (the last four claimed) are gone.
    expect(await jobIds(queue)).toEqual(new Set(claimed.slice(0, 6).map((j) => j.id)));
    expect(countsOf(await store.jobPrune({ limit: 4, now: at(DAY) }), queue)).toEqual({ COMPLETED: 4 });
    expect(countsOf(await store.jobPrune({ limit: 4, now: at(DAY) }), queue)).toEqual({ COMPLETED: 2 });
  });

  it("a pruned job's idempotency key is free again: the same key makes a new job", async () => {
    const queue = queueName('idem');
    await store.queueUpsert({ name: queue, completedRetentionSeconds: 1 });
    const first = await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k1' }), now: T0 });
    expect((await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k1' }), now: T0 })).created).toBe(false);
    const [claimed] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: T0 });
    await store.jobCompleteMany({ completions: [{ id: claimed!.id, token: claimed!.leaseToken! }], now: T0 });
    await projectAll();
    expect(countsOf(await store.jobPrune({ limit: 100, now: at(DAY) }), queue)).toEqual({ COMPLETED: 1 });
    const again = await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k1' }), now: at(DAY) });
    expect(again.created).toBe(true);
    expect(again.job.id).not.toBe(first.job.id);
  });

  it("walks jobs_finished_idx for each queue's finished states and deletes by primary key", async () => {
    const s = statementNamed('jobPrune');
    const client = await sql.connect();
    try {
      await client.query('BEGIN');
      // The plan at scale: on a table of a few rows a sequential scan is cheaper, and how few
      // depends on the width of a row (a column added to jobs flipped it).
      await client.query(`INSERT INTO evora.jobs (queue, type, max_attempts) SELECT 'plan-scale', 't', 1 FROM generate_series(1, 20000)`);
      await client.query('ANALYZE evora.jobs');
      await client.query(`PREPARE prune_plan AS ${s.text}`);
      const args = s.paramNames.map((p) => (p === 'limit' ? '1000' : 'NULL'));
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE prune_plan(${args.join(', ')})`);
      const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(plan).toMatch(/Index (Only )?Scan using jobs_finished_idx on jobs/);
      expect(plan).toMatch(/Index Scan (using|on) jobs_pkey/);
      expect(plan).not.toMatch(/Seq Scan on jobs/);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });
});

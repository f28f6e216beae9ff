import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import type { JobBulkFilter } from '../../src/domain/job.js';
import { silentLogger } from '../../src/logger.js';
import { Projector } from '../../src/maintenance/projector.js';
import type { Store } from '../../src/store/store.js';
import { PostgresTelemetrySink } from '../../src/telemetry/pg-sink.js';
import { jobInput, jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';
import { lockWaits } from '../helpers/lock-waits.js';

/**
 * The bulk statements (sql/job-retry-many.sql, job-purge-many.sql, job-cancel-many.sql,
 * job-count-many.sql) through Store.jobRetryMany, jobPurgeMany and jobCancelMany: the batch
 * loop, `now`, rows another transaction holds, the purge's outbox rule, and the cancel's
 * rules (running jobs flagged once, jobs created after the run began left alone). The RPCs are in test/grpc/bulk-actions.test.ts.
 */

let store: Store;
let sql: pg.Pool;
let projector: Projector;
beforeAll(async () => {
  ({ store, sql } = await storeSetup());
  projector = new Projector({ store, sink: new PostgresTelemetrySink(store), logger: silentLogger() });
});

const signal = new AbortController().signal;
const T0 = new Date('2032-05-01T00:00:00Z');

async function projectAll(): Promise<void> {
  while ((await projector.runOnce(signal)).events > 0);
}

const filterOf = (f: Partial<JobBulkFilter> & Pick<JobBulkFilter, 'states'>): JobBulkFilter => ({
  queue: null,
  type: null,
  finishedBefore: null,
  ids: null,
  ...f,
});

/** `n` jobs of `queue` dead-lettered at T0 (max_attempts 1, failed as not retryable). */
async function deadLettered(queue: string, n: number): Promise<string[]> {
  await store.queueUpsert({ name: queue, maxAttempts: 1 });
  await store.jobSubmitMany({ jobs: jobInputs(queue, n), now: T0 });
  const claimed = await store.jobClaim({ queues: [queue], limit: n, workerId: 'w', now: T0 });
  await store.jobFailMany({ failures: claimed.map((j) => ({ id: j.id, token: j.leaseToken!, error: 'boom', retryable: false })), now: T0 });
  return claimed.map((j) => j.id);
}

describe('jobRetryMany', () => {
  it('loops over batches to the end, due at `now`; a row another transaction holds is skipped and retried by the next run', async () => {
    const queue = queueName('retry');
    const ids = await deadLettered(queue, 7);
    const held = await sql.connect();
    try {
      await held.query('BEGIN');
      await held.query('SELECT id FROM evora.jobs WHERE id = $1 FOR UPDATE', [ids[3]]);
      const now = new Date(T0.getTime() + 60_000);
      const filter = filterOf({ queue, states: ['DLQ'] });
      expect((await store.jobRetryCount({ filter })).jobs).toBe(7);
      // Batches of 2: 2, 2 (one skipped), 2, 0.
      expect(await store.jobRetryMany({ filter, now, batchSize: 2 })).toBe(6);
      const { rows } = await sql.query<{ state: string; run_at: Date; attempt: number; n: number }>(
        'SELECT state, run_at, attempt, count(*)::int AS n FROM evora.jobs WHERE queue = $1 GROUP BY 1, 2, 3 ORDER BY 1',
        [queue],
      );
      expect(rows).toEqual([
        { state: 'PENDING', run_at: now, attempt: 0, n: 6 },
        { state: 'DLQ', run_at: T0, attempt: 1, n: 1 },
      ]);
      await held.query('ROLLBACK');
      expect(await store.jobRetryMany({ filter, now, batchSize: 2 })).toBe(1);
      expect(await store.jobRetryMany({ filter, now, batchSize: 2 })).toBe(0);
    } finally {
      await held.query('ROLLBACK');
      held.release();
    }
  });

  it('stops between batches when its signal aborts; what was done stays done', async () => {
    const queue = queueName('abort');
    await deadLettered(queue, 4);
    const ac = new AbortController();
    ac.abort(new Error('stop'));
    await expect(store.jobRetryMany({ filter: filterOf({ queue, states: ['DLQ'] }), signal: ac.signal })).rejects.toThrow('stop');
    expect((await store.jobRetryCount({ filter: filterOf({ queue, states: ['DLQ'] }) })).jobs).toBe(4);
  });

  it('beforeBatch is asked before each batch after the first, with the jobs done so far; what it throws ends the run there', async () => {
    const queue = queueName('before');
    await deadLettered(queue, 5);
    const filter = filterOf({ queue, states: ['DLQ'] });
    const asked: number[] = [];
    const beforeBatch = (done: number) => {
      asked.push(done);
      if (done >= 4) throw new Error('stop');
    };
    await expect(store.jobRetryMany({ filter, batchSize: 2, beforeBatch, now: T0 })).rejects.toThrow('stop');
    expect(asked).toEqual([2, 4]);
    expect((await store.jobRetryCount({ filter })).jobs).toBe(1);
  });
});

describe('a dry run\'s finishedBefore', () => {
  /** Sets the jobs' finished_at to these times (PostgreSQL text, to the microsecond). */
  async function finishedAt(ids: string[], times: string[]): Promise<void> {
    await sql.query('UPDATE evora.jobs j SET finished_at = v.at FROM unnest($1::uuid[], $2::timestamptz[]) AS v(id, at) WHERE j.id = v.id', [ids, times]);
  }

  it('is the newest finished_at counted cut to the millisecond plus one: a run with it takes the jobs counted and not one that finished at it or later', async () => {
    const queue = queueName('bound');
    const counted = await deadLettered(queue, 2);
    await finishedAt(counted, ['2032-05-01 00:00:00.1+00', '2032-05-01 00:00:00.123456+00']);
    const filter = filterOf({ queue, states: ['DLQ'] });
    const count = await store.jobRetryCount({ filter });
    // .123456 cut to .123, plus 1 ms (.123 + 1 µs would pass over the job at .123456).
    expect(count).toEqual({ jobs: 2, finishedBefore: new Date('2032-05-01T00:00:00.124Z') });
    // A filter's own earlier bound stays the bound: the count's is never later.
    expect(await store.jobRetryCount({ filter: { ...filter, finishedBefore: new Date('2032-05-01T00:00:00.110Z') } })).toEqual({
      jobs: 1,
      finishedBefore: new Date('2032-05-01T00:00:00.101Z'),
    });
    expect(await store.jobRetryCount({ filter: { ...filter, type: 'none' } })).toEqual({ jobs: 0, finishedBefore: null });

    // Two more dead letters after the count, at the bound and later: the run leaves them.
    const later = await deadLettered(queue, 2);
    await finishedAt(later, ['2032-05-01 00:00:00.124+00', '2032-05-01 00:00:01+00']);
    expect(await store.jobRetryMany({ filter: { ...filter, finishedBefore: count.finishedBefore } })).toBe(2);
    const { rows } = await sql.query<{ id: string }>("SELECT id FROM evora.jobs WHERE queue = $1 AND state = 'DLQ' ORDER BY id", [queue]);
    expect(rows.map((r) => r.id)).toEqual([...later].sort());
    // The purge's count is the same statement: its bound too.
    await projectAll();
    expect(await store.jobPurgeCount({ filter })).toEqual({ jobs: 2, finishedBefore: new Date('2032-05-01T00:00:01.001Z') });
  });
});

describe('jobPurgeMany', () => {
  it('leaves finished jobs whose events telemetry has not projected; deletes them once it has', async () => {
    const queue = queueName('purge');
    const ids = await deadLettered(queue, 5);
    const filter = filterOf({ queue, states: ['COMPLETED', 'DLQ', 'CANCELLED'] });
    expect((await store.jobPurgeCount({ filter })).jobs).toBe(0);
    expect(await store.jobPurgeMany({ filter })).toBe(0);
    await projectAll();
    expect((await store.jobPurgeCount({ filter })).jobs).toBe(5);
    expect((await store.jobPurgeCount({ filter: { ...filter, finishedBefore: T0 } })).jobs).toBe(0);
    expect(await store.jobPurgeMany({ filter: { ...filter, ids: ids.slice(0, 2) } })).toBe(2);
    // Batches of 2: 2, then (only jobs finished by the first batch's `now`) 1.
    expect(await store.jobPurgeMany({ filter, batchSize: 2, now: T0 })).toBe(3);
    expect((await sql.query('SELECT 1 FROM evora.jobs WHERE queue = $1', [queue])).rowCount).toBe(0);
  });

  it('a batch that keeps a parent (its child held by another transaction) does not end the run: the other matching jobs are deleted; a full batch that changed nothing does', async () => {
    const queue = queueName('purge-kept');
    await store.queueUpsert({ name: queue, maxAttempts: 1 });
    // P first (so the first batch is likely to take it), its child C, then four more.
    const submitted = await store.jobSubmitMany({
      jobs: [jobInput({ queue, ref: 'p' }), jobInput({ queue, dependsOnRefs: ['p'] }), ...jobInputs(queue, 4)],
      now: T0,
    });
    const [p, c] = submitted.map((r) => r.job.id) as [string, string];
    const claimed = await store.jobClaim({ queues: [queue], limit: 10, workerId: 'w', now: T0 });
    expect(claimed).toHaveLength(5);
    await store.jobFailMany({ failures: claimed.map((j) => ({ id: j.id, token: j.leaseToken!, error: 'boom', retryable: false })), now: T0 });
    await projectAll();
    const held = await sql.connect();
    try {
      await held.query('BEGIN');
      await held.query("SELECT 1 FROM evora.jobs WHERE id = $1 AND state = 'CANCELLED' FOR UPDATE", [c]);
      // Batches of 2 over 5 DLQ jobs: the one with P deletes 1 of its 2, and the run goes on.
      const filter = filterOf({ queue, states: ['DLQ'] });
      expect(await store.jobPurgeMany({ filter, batchSize: 2, now: T0 })).toBe(4);
      // A full batch that changed nothing ends the run: P alone is left and still kept, so a run
      // of batches of 1 takes it and keeps it; a second batch would take it again, for ever.
      const endless = () => {
        throw new Error('a batch after one that changed nothing');
      };
      expect(await store.jobPurgeMany({ filter, batchSize: 1, now: T0, beforeBatch: endless })).toBe(0);
    } finally {
      await held.query('ROLLBACK');
      held.release();
    }
    const left = await sql.query<{ id: string; state: string }>('SELECT id, state FROM evora.jobs WHERE queue = $1 ORDER BY state::text', [queue]);
    expect(left.rows).toEqual([{ id: c, state: 'CANCELLED' }, { id: p, state: 'DLQ' }]);
  });
});

describe('jobCancelMany', () => {
  it('cancels PENDING and WAITING jobs and flags RUNNING ones, in batches; a flagged job is not taken again; jobs created after the first batch are left; the dry run counts the same', async () => {
    const queue = queueName('cancel');
    const submitted = await store.jobSubmitMany({ jobs: [jobInput({ queue, ref: 'p' }), jobInput({ queue, dependsOnRefs: ['p'] }), ...jobInputs(queue, 5)], now: T0 });
    const ids = submitted.map((r) => r.job.id);
    // p and two more RUNNING, one of them then COMPLETED; p's child WAITING; three PENDING.
    const claimed = await store.jobClaim({ queues: [queue], limit: 3, workerId: 'w', now: T0 });
    expect(claimed.map((j) => j.id)).toContain(ids[0]);
    const done = claimed.find((j) => j.id !== ids[0])!;
    await store.jobCompleteMany({ completions: [{ id: done.id, token: done.leaseToken! }], now: T0 });
    const states = async () =>
      Object.fromEntries(
        (await sql.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM evora.jobs WHERE queue = $1 GROUP BY state', [queue])).rows.map((r) => [r.state, r.n]),
      );
    expect(await states()).toEqual({ RUNNING: 2, COMPLETED: 1, WAITING: 1, PENDING: 3 });
    const filter = filterOf({ queue, states: ['PENDING', 'WAITING', 'RUNNING'] });
    expect((await store.jobCancelCount({ filter })).jobs).toBe(6);
    expect((await store.jobCancelCount({ filter: { ...filter, states: ['RUNNING'] } })).jobs).toBe(2);

    // A job created after the run's time (`now`, a minute after T0) is left alone, in every
    // batch: the first included.
    const now = new Date(T0.getTime() + 60_000);
    const lateJob = (await store.jobSubmitMany({ jobs: jobInputs(queue, 1), now: new Date(T0.getTime() + 120_000) }))[0]!.job.id;
    expect((await store.jobCancelCount({ filter })).jobs).toBe(7);
    // Batches of 2: 2, 2, 2, then one that picks none.
    const batchesBefore: number[] = [];
    expect(await store.jobCancelMany({ filter, batchSize: 2, now, beforeBatch: (n) => batchesBefore.push(n) })).toBe(6);
    expect(batchesBefore).toEqual([2, 4, 6]);
    expect(await states()).toEqual({ RUNNING: 2, COMPLETED: 1, CANCELLED: 4, PENDING: 1 });
    const flagged = await sql.query<{ id: string; cancel_requested_at: Date | null }>(
      "SELECT id, cancel_requested_at FROM evora.jobs WHERE queue = $1 AND state = 'RUNNING'",
      [queue],
    );
    expect(flagged.rows.map((r) => r.cancel_requested_at)).toEqual([now, now]);
    // A repeat over the original jobs finds nothing to do: the running ones are flagged already.
    expect((await store.jobCancelCount({ filter: { ...filter, ids } })).jobs).toBe(0);
    expect(await store.jobCancelMany({ filter: { ...filter, ids }, now })).toBe(0);
    expect((await store.jobGet({ id: lateJob })).state).toBe('PENDING');
  });

  /**
   * A transaction of the test's own holding job `id` (FOR NO KEY UPDATE) that never looks for
   * deadlocks itself (deadlock_timeout 60 s; the store's sessions look after the default 1 s):
   * in a deadlock with the store, the store's statement is the one PostgreSQL aborts.
   * `release` rolls back what was not committed.
   */
  async function rowHeld(id: string) {
    const client = await sql.connect();
    await client.query('BEGIN');
    await client.query("SET LOCAL deadlock_timeout = '60s'");
    await client.query('SELECT id FROM evora.jobs WHERE id = $1 FOR NO KEY UPDATE', [id]);
    const release = async () => {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release();
    };
    return { client, release };
  }

  // Two cancels at once (two operators, or CancelJob beside CancelJobs) deadlocked on a chain
  // p -> c -> d: this run held p and d (c skipped, held by the other), its cancel of p
  // cascaded to c and waited; the other's cancel of c cascaded to d and waited in turn.
  // PostgreSQL aborted this run's batch, and the call failed INTERNAL with nothing wrong.
  it('a batch PostgreSQL aborts to break a deadlock with another cancel is run again: the run ends with every job cancelled', async () => {
    const queue = queueName('cancel-deadlock');
    const chain = await store.jobSubmitMany({
      jobs: [jobInput({ queue, ref: 'p' }), jobInput({ queue, ref: 'c', dependsOnRefs: ['p'] }), jobInput({ queue, dependsOnRefs: ['c'] })],
    });
    const [p, c, d] = chain.map((r) => r.job.id);
    const { client: other, release } = await rowHeld(c!);
    try {
      // Settled at once, so that a failure is this test's, not an unhandled rejection.
      const run = store.jobCancelMany({ filter: filterOf({ queue, states: ['PENDING', 'WAITING', 'RUNNING'] }) }).catch((err: unknown) => err);
      await waitFor(async () => (await lockWaits(sql)) === 1, { what: "the run's cascade to c waiting for the other transaction" });
      // The other transaction cancels c: its cascade reaches d, which the run holds.
      await other.query("UPDATE evora.jobs SET state = 'CANCELLED', finished_at = now() WHERE id = $1", [c]);
      await other.query('COMMIT');
      expect(await run).toBe(1); // p: c and d were cancelled by the other transaction
    } finally {
      await release();
    }
    const left = await sql.query<{ state: string }>('SELECT state FROM evora.jobs WHERE id = ANY ($1)', [[p, c, d]]);
    expect(left.rows.map((r) => r.state)).toEqual(['CANCELLED', 'CANCELLED', 'CANCELLED']);
  });

  // Three runs over 200 chains p -> c -> d at once picked interleaved rows (SKIP LOCKED):
  // one held p and d, another c, and each one's cascade waited for the other's: most calls
  // failed, deadlocked batch after batch (retries did not help: they met again).
  it('runs over one queue at once take turns batch by batch: none deadlocks, every job ends CANCELLED', async () => {
    const queue = queueName('cancel-together');
    const chains = Array.from({ length: 200 }, (_, k) => [
      jobInput({ queue, ref: `p${k}` }),
      jobInput({ queue, ref: `c${k}`, dependsOnRefs: [`p${k}`] }),
      jobInput({ queue, dependsOnRefs: [`c${k}`] }),
    ]);
    await store.jobSubmitMany({ jobs: chains.flat() });
    const filter = filterOf({ queue, states: ['PENDING', 'WAITING', 'RUNNING'] });
    const runs = await Promise.all([1, 2, 3].map(() => store.jobCancelMany({ filter, batchSize: 50 }).catch((err: unknown) => err)));
    for (const run of runs) expect(typeof run, String(run)).toBe('number');
    const left = await sql.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM evora.jobs WHERE queue = $1 GROUP BY state', [queue]);
    expect(left.rows).toEqual([{ state: 'CANCELLED', n: 600 }]);
  });

  it('a batch waits for the one under way of another run (sql/job-bulk-lock.sql), whatever its queue', async () => {
    const [queue, other] = [queueName('turns'), queueName('turns-other')];
    const [p, c] = (await store.jobSubmitMany({ jobs: [jobInput({ queue, ref: 'p' }), jobInput({ queue, dependsOnRefs: ['p'] })] })).map((r) => r.job.id);
    const [o] = (await store.jobSubmitMany({ jobs: [jobInput({ queue: other })] })).map((r) => r.job.id);
    const { client: holder, release } = await rowHeld(c!);
    try {
      // The first run's batch cancels p and waits in its cascade for c; the second's waits its turn.
      const first = store.jobCancelMany({ filter: filterOf({ queue, states: ['PENDING', 'WAITING', 'RUNNING'] }) }).catch((err: unknown) => err);
      await waitFor(async () => (await lockWaits(sql)) === 1, { what: "the first run's cascade waiting for c" });
      const second = store.jobCancelMany({ filter: filterOf({ queue: other, states: ['PENDING'] }) }).catch((err: unknown) => err);
      await waitFor(async () => (await lockWaits(sql)) === 2, { what: 'the second run waiting for its turn' });
      expect((await store.jobGet({ id: o! })).state).toBe('PENDING');
      await holder.query('COMMIT');
      expect(await first).toBe(1);
      expect(await second).toBe(1);
    } finally {
      await release();
    }
    const left = await sql.query<{ state: string }>('SELECT state FROM evora.jobs WHERE id = ANY ($1)', [[p, c, o]]);
    expect(left.rows.map((r) => r.state)).toEqual(['CANCELLED', 'CANCELLED', 'CANCELLED']);
  });

  it('so is a single cancel (CancelJob) aborted to break a deadlock: it answers the job CANCELLED', async () => {
    const queue = queueName('cancel-deadlock-one');
    const [p, c] = (await store.jobSubmitMany({ jobs: [jobInput({ queue, ref: 'p' }), jobInput({ queue, dependsOnRefs: ['p'] })] })).map((r) => r.job.id);
    const { client: other, release } = await rowHeld(c!);
    try {
      // The cancel holds p and its cascade waits for c; the other transaction then wants p.
      const cancel = store.jobCancel({ id: p! }).catch((err: unknown) => err);
      await waitFor(async () => (await lockWaits(sql)) === 1, { what: "the cancel's cascade to c waiting for the other transaction" });
      await other.query("UPDATE evora.jobs SET state = 'CANCELLED', finished_at = now() WHERE id = ANY ($1)", [[p, c]]);
      await other.query('COMMIT');
      expect(await cancel).toMatchObject({ id: p, state: 'CANCELLED' });
    } finally {
      await release();
    }
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Store } from '../../src/store/store.js';
import { jobInput, jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';
import { lockWaits } from '../helpers/lock-waits.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Deleting a queue (Store.queueDelete, DeleteQueue): only an empty one (no job of any state,
 * no schedule into it) goes, with its settings and an audit event; and a submit racing the
 * delete never leaves a job without its queue row (a job without one is never claimed:
 * job-claim.sql joins evora.queues).
 */

let store: Store;
let sql: pg.Pool;
let url: string;
beforeAll(async () => {
  ({ store, sql, url } = await storeSetup({ maxConnections: 16 }));
});

const ops = { kind: 'token' as const, tokenId: randomUUID(), name: 'ops' };

async function queueRows(name: string): Promise<number> {
  return (await sql.query('SELECT count(*)::int AS n FROM evora.queues WHERE name = $1', [name])).rows[0].n;
}

/** The jobs whose queue row is missing, among the queues named with `prefix`. */
async function orphans(prefix: string): Promise<number> {
  return (
    await sql.query(
      `SELECT count(*)::int AS n FROM evora.jobs j
       WHERE j.queue LIKE $1 || '%' AND NOT EXISTS (SELECT 1 FROM evora.queues q WHERE q.name = j.queue)`,
      [prefix],
    )
  ).rows[0].n;
}

describe('queueDelete', () => {
  it('deletes an empty queue with its settings and writes queue.delete; a paused one too; an unknown queue is NOT_FOUND', async () => {
    const q = queueName('dq');
    await store.queueUpsert({ name: q, maxAttempts: 9 });
    await store.queueSetPaused({ name: q, paused: true });
    await store.queueDelete({ name: q, actor: ops });
    expect(await queueRows(q)).toBe(0);
    await expect(store.queueGet({ name: q })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const events = (await sql.query(`SELECT action, token_name FROM evora.audit_events WHERE target = $1 ORDER BY id`, [q])).rows;
    expect(events.at(-1)).toEqual({ action: 'queue.delete', token_name: 'ops' });
    await expect(store.queueDelete({ name: q })).rejects.toMatchObject({ code: 'NOT_FOUND', message: `queue "${q}" not found` });
  });

  it('a queue created again, by a submit or an upsert, starts with the defaults (not paused, 5 attempts)', async () => {
    const q = queueName('dq');
    await store.queueUpsert({ name: q, maxAttempts: 9, leaseSeconds: 120 });
    await store.queueSetPaused({ name: q, paused: true });
    await store.queueDelete({ name: q });
    const [submitted] = await store.jobSubmitMany({ jobs: [jobInput({ queue: q })] });
    expect(submitted!.job.maxAttempts).toBe(5);
    const again = await store.queueGet({ name: q });
    expect([again.paused, again.maxAttempts, again.leaseSeconds]).toEqual([false, 5, 30]);
    const r = queueName('dq');
    await store.queueUpsert({ name: r, maxAttempts: 9 });
    await store.queueDelete({ name: r });
    const { queue, created } = await store.queueUpsert({ name: r });
    expect([created, queue.maxAttempts]).toEqual([true, 5]);
  });

  it('refuses a queue with jobs of any state or a schedule, FAILED_PRECONDITION saying what is in it, and changes nothing', async () => {
    const q = queueName('dq');
    await store.jobSubmitMany({ jobs: jobInputs(q, 3) });
    const [claimed] = await store.jobClaim({ queues: [q], limit: 1, workerId: 'w' });
    await store.jobCompleteMany({ completions: [{ id: claimed!.id, token: claimed!.leaseToken!, result: null }] });
    await expect(store.queueDelete({ name: q })).rejects.toMatchObject({
      code: 'FAILED_PRECONDITION',
      message:
        `queue "${q}" is not empty: it has 3 jobs (2 PENDING, 1 COMPLETED); only an empty queue is deleted: ` +
        `cancel its unfinished jobs (evora cancel --all --queue ${q}), purge its jobs once finished (evora purge --queue ${q}), then delete it again`,
    });
    expect(await queueRows(q)).toBe(1);

    const s = queueName('dq');
    await store.queueUpsert({ name: s });
    await store.scheduleUpsert({
      name: `${s}-nightly`, cron: '0 0 * * *', timezone: 'UTC', queue: s, type: 'tick', payload: {}, priority: 0, maxAttempts: null,
      misfirePolicy: 'skip', misfireCap: 1, nextRunAt: new Date('2030-01-01T00:00:00Z'),
    });
    await expect(store.queueDelete({ name: s })).rejects.toMatchObject({
      code: 'FAILED_PRECONDITION',
      message: `queue "${s}" is not empty: it has 1 schedule (${s}-nightly); only an empty queue is deleted: delete its schedules (evora schedule delete <name>), then delete it again`,
    });
    expect(await queueRows(s)).toBe(1);
    const audit = (await sql.query(`SELECT count(*)::int AS n FROM evora.audit_events WHERE action = 'queue.delete' AND target IN ($1, $2)`, [q, s])).rows[0];
    expect(audit.n).toBe(0);
  });

  it('submits racing deletes (batch, ids-only, hand-off, graph, SQL submit_job): every committed job keeps its queue row', async () => {
    const prefix = `race${Date.now() % 100000}`;
    const outcomes = { deleted: 0, refused: 0, notFound: 0 };
    for (let round = 0; round < 150; round++) {
      const queue = `${prefix}_${round}`;
      await store.queueUpsert({ name: queue });
      const deletes = Array.from({ length: 3 }, () =>
        store.queueDelete({ name: queue }).then(
          () => void outcomes.deleted++,
          (err: { code?: string }) => {
            if (err.code === 'FAILED_PRECONDITION') outcomes.refused++;
            else if (err.code === 'NOT_FOUND') outcomes.notFound++;
            else throw err;
          },
        ),
      );
      await Promise.all([
        ...deletes,
        store.jobSubmitMany({ jobs: jobInputs(queue, 5) }),
        store.jobSubmitManyIds({ jobs: jobInputs(queue, 3) }),
        store.jobSubmit({ job: jobInput({ queue }), handoffWorkerId: 'race-worker' }),
        store.jobSubmitMany({ jobs: [jobInput({ queue, ref: 'a' }), jobInput({ queue, ref: 'b', dependsOnRefs: ['a'] })] }),
        sql.query(`SELECT * FROM evora.submit_job($1, 'sql')`, [queue]),
      ]);
    }
    expect(await orphans(prefix)).toBe(0);
    // Both sides of the race happened: some deletes went first (the submits made the row again), some refused.
    expect(outcomes.deleted).toBeGreaterThan(0);
    expect(outcomes.refused).toBeGreaterThan(0);
    const jobs = (await sql.query(`SELECT count(*)::int AS n FROM evora.jobs WHERE queue LIKE $1 || '%'`, [prefix])).rows[0].n;
    expect(jobs).toBe(150 * 12);
  });

  /**
   * Each way a job is inserted, caught mid-statement: a blocker transaction holds an
   * uncommitted job with the submit's idempotency key, so the submit has taken its snapshot
   * and its queue locks and waits inside its insert; then DeleteQueue runs. The delete must
   * wait for the submit (the queue's lock) and then refuse; before the lock it found the
   * queue empty, deleted it and the submit's job was left without a queue row, for good.
   */
  const submitters: [string, (queue: string) => Promise<unknown>][] = [
    ['SubmitJobs (job-insert-many.sql)', (queue) => store.jobSubmitMany({ jobs: [jobInput({ queue, idempotencyKey: 'k' })] })],
    ['ids_only (job-insert-many-ids.sql)', (queue) => store.jobSubmitManyIds({ jobs: [jobInput({ queue, idempotencyKey: 'k' })] })],
    ['SubmitJob with a hand-off (job-insert-handoff.sql)', (queue) => store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k' }), handoffWorkerId: 'w' })],
    [
      'a graph (job-insert-graph.sql)',
      (queue) => store.jobSubmitMany({ jobs: [jobInput({ queue, ref: 'a', idempotencyKey: 'k' }), jobInput({ queue, ref: 'b', dependsOnRefs: ['a'] })] }),
    ],
    ['evora.submit_job in SQL (0025)', (queue) => sql.query(`SELECT * FROM evora.submit_job($1, 'noop', idempotency_key => 'k')`, [queue])],
  ];
  for (const [what, submit] of submitters) {
    it(`a delete while ${what} is mid-statement waits for it and refuses; its job keeps its queue row`, async () => {
      const queue = queueName('mid');
      await store.queueUpsert({ name: queue });
      const blocker = new pg.Client({ connectionString: url });
      await blocker.connect();
      try {
        await blocker.query('BEGIN');
        await blocker.query(`INSERT INTO evora.jobs (queue, type, max_attempts, idempotency_key) VALUES ($1, 'blocker', 1, 'k')`, [queue]);
        const submitted = submit(queue);
        await waitFor(async () => (await lockWaits(sql)) >= 1, { what: 'the submit waiting for the blocker' });
        let settled = false;
        const deleted = store.queueDelete({ name: queue }).then(
          () => 'deleted',
          (err: { code?: string }) => err.code ?? String(err),
        );
        void deleted.then(() => (settled = true));
        await waitFor(async () => settled || (await lockWaits(sql)) >= 2, { what: 'the delete waiting for the submit, or done' });
        await blocker.query('ROLLBACK');
        await submitted;
        expect(await deleted).toBe('FAILED_PRECONDITION');
        expect(await orphans(queue)).toBe(0);
      } finally {
        await blocker.end();
      }
    });
  }

  /**
   * The other order: the delete holds the queue's lock (here a transaction of the test's
   * that takes it and deletes the row, as queue-delete-lock.sql and queue-delete.sql do)
   * when the submit starts, so the submit's snapshot still shows the row. The submit waits
   * for the lock and must make the row again: a check on its snapshot alone would see the
   * deleted row and insert none.
   */
  for (const [what, submit] of submitters) {
    it(`${what} that waited for a delete makes the queue row again, with the defaults`, async () => {
      const queue = queueName('after');
      await store.queueUpsert({ name: queue, maxAttempts: 9, attemptTimeoutSeconds: 10 });
      const deleter = new pg.Client({ connectionString: url });
      await deleter.connect();
      try {
        await deleter.query('BEGIN');
        await deleter.query('SELECT pg_advisory_xact_lock(7301847, hashtext($1))', [queue]);
        await deleter.query('DELETE FROM evora.queues WHERE name = $1', [queue]);
        const submitted = submit(queue);
        await waitFor(async () => (await lockWaits(sql)) >= 1, { what: 'the submit waiting for the delete' });
        await deleter.query('COMMIT');
        await submitted;
        expect(await orphans(queue)).toBe(0);
        expect((await store.queueGet({ name: queue })).maxAttempts).toBe(5);
        // Its job takes the new row's settings, not the deleted queue's that its snapshot showed.
        const jobs = (await sql.query(`SELECT max_attempts, timeout_seconds FROM evora.jobs WHERE queue = $1`, [queue])).rows;
        expect(jobs.length).toBeGreaterThan(0);
        for (const j of jobs) expect([j.max_attempts, j.timeout_seconds]).toEqual([5, null]);
      } finally {
        await deleter.end();
      }
    });
  }

  it('a submit does not wait for a transaction that updates its queue row (a rate-limited claim, an upsert, a pause)', async () => {
    const queue = queueName('busy');
    await store.queueUpsert({ name: queue });
    const updater = new pg.Client({ connectionString: url });
    await updater.connect();
    try {
      await updater.query('BEGIN');
      await updater.query('UPDATE evora.queues SET updated_at = now() WHERE name = $1', [queue]);
      // Done while the update is still open: an ON CONFLICT check on the row would wait for it.
      const [submitted] = await store.jobSubmitMany({ jobs: [jobInput({ queue })] });
      expect(submitted!.created).toBe(true);
      const handed = await store.jobSubmit({ job: jobInput({ queue }), handoffWorkerId: 'w' });
      expect(handed.created).toBe(true);
      await sql.query(`SELECT * FROM evora.submit_job($1, 'sql')`, [queue]);
    } finally {
      await updater.query('ROLLBACK');
      await updater.end();
    }
  });
});

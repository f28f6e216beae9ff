import { beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import type { Job } from '../../src/domain/job.js';
import type { Store } from '../../src/store/store.js';
import { jobInput, queueName } from '../helpers/factories.js';
import { OUTBOX_EVENTS, storeSetup } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Queues that delete their jobs at completion (Queue.delete_on_complete, 0015): the
 * completion deletes instead of updating, writes the same event and the same ack, keeps a
 * job with dependents (also one that gains a dependent while the completion waits for it),
 * and leaves queues without the setting as they were.
 */

let store: Store;
let sql: pg.Pool;
beforeAll(async () => {
  ({ store, sql } = await storeSetup());
});

const T0 = new Date('2030-01-01T00:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

/** A queue with delete_on_complete set (or not). */
async function queueWith(deleteOnComplete: boolean): Promise<string> {
  const queue = queueName();
  const { queue: q } = await store.queueUpsert({ name: queue, deleteOnComplete });
  expect(q.deleteOnComplete).toBe(deleteOnComplete);
  return queue;
}

async function claimAll(queue: string, now = at(1)): Promise<Job[]> {
  return store.jobClaim({ queues: [queue], limit: 100, workerId: 'w', now });
}

async function rowCount(id: string): Promise<number> {
  return Number((await sql.query('SELECT count(*) AS n FROM evora.jobs WHERE id = $1', [id])).rows[0].n);
}

describe('delete_on_complete', () => {
  it('is off by default, set and kept by upserts that do not name it, and cleared by false', async () => {
    const queue = queueName();
    expect((await store.queueUpsert({ name: queue })).queue.deleteOnComplete).toBe(false);
    expect((await store.queueUpsert({ name: queue, deleteOnComplete: true })).queue.deleteOnComplete).toBe(true);
    expect((await store.queueUpsert({ name: queue, maxAttempts: 3 })).queue.deleteOnComplete).toBe(true);
    expect((await store.queueGet({ name: queue })).deleteOnComplete).toBe(true);
    expect((await store.queueUpsert({ name: queue, deleteOnComplete: false })).queue.deleteOnComplete).toBe(false);
  });

  it('deletes a completed job with its attempt history, writes its completed event, frees its idempotency key', async () => {
    const queue = await queueWith(true);
    const [submitted] = await store.jobSubmitMany({ jobs: [jobInput({ queue, idempotencyKey: 'k1' })], now: T0 });
    const job = submitted!.job;
    // A snoozed attempt leaves a history row without using up an attempt.
    const [first] = await claimAll(queue);
    await store.jobSnoozeMany({ snoozes: [{ id: first!.id, token: first!.leaseToken!, runAt: at(1) }], now: at(1) });
    expect((await sql.query('SELECT count(*)::int AS n FROM evora.job_attempts WHERE job_id = $1', [job.id])).rows[0].n).toBe(1);
    const [run] = await claimAll(queue, at(2));
    expect(run!.attempt).toBe(1);

    const [out] = await store.jobCompleteMany({ completions: [{ id: run!.id, token: run!.leaseToken!, result: { ok: true } }], now: at(3) });
    expect(out).toMatchObject({ accepted: true, job: { id: job.id, queue, state: 'COMPLETED', attempt: 1, workerId: 'w', lastError: null } });
    expect(await rowCount(job.id)).toBe(0);
    await expect(store.jobGet({ id: job.id })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect((await sql.query('SELECT count(*)::int AS n FROM evora.job_attempts WHERE job_id = $1', [job.id])).rows[0].n).toBe(0);

    const { rows } = await sql.query(
      `SELECT kind::text, from_state::text, to_state::text, attempt, worker_id, run_ms FROM ${OUTBOX_EVENTS} e WHERE job_id = $1 ORDER BY id`,
      [job.id],
    );
    expect(rows.at(-1)).toEqual({ kind: 'completed', from_state: 'RUNNING', to_state: 'COMPLETED', attempt: 1, worker_id: 'w', run_ms: 1000 });

    // The key is free again: the same submit makes a new job.
    const [again] = await store.jobSubmitMany({ jobs: [jobInput({ queue, idempotencyKey: 'k1' })], now: at(4) });
    expect(again!.created).toBe(true);
    expect(again!.job.id).not.toBe(job.id);
  });

  it('in one batch: deletes the jobs of a deleting queue, updates the others, refuses a stale lease and changes nothing for it', async () => {
    const deleting = await queueWith(true);
    const keeping = await queueWith(false);
    await store.jobSubmitMany({ jobs: [jobInput({ queue: deleting }), jobInput({ queue: deleting }), jobInput({ queue: keeping })], now: T0 });
    const [d1, d2] = await claimAll(deleting);
    const [k1] = await claimAll(keeping);
    const outcomes = await store.jobCompleteMany({
      completions: [
        { id: d1!.id, token: d1!.leaseToken!, result: { n: 1 } },
        { id: d2!.id, token: '00000000-0000-4000-8000-000000000000', result: { n: 2 } },
        { id: k1!.id, token: k1!.leaseToken!, result: { n: 3 } },
      ],
      now: at(2),
    });
    expect(outcomes.map((o) => o.accepted)).toEqual([true, false, true]);
    expect(await rowCount(d1!.id)).toBe(0);
    expect((await store.jobGet({ id: d2!.id })).state).toBe('RUNNING');
    const kept = await store.jobGet({ id: k1!.id });
    expect(kept).toMatchObject({ state: 'COMPLETED', result: { n: 3 } });
    // The stale report of d2 wrote no event; d1 and k1 wrote one each.
    const { rows } = await sql.query(
      `SELECT job_id FROM ${OUTBOX_EVENTS} e WHERE kind = 'completed' AND job_id = ANY ($1::uuid[]) ORDER BY job_id`,
      [[d1!.id, d2!.id, k1!.id]],
    );
    expect(rows.map((r) => r.job_id).sort()).toEqual([d1!.id, k1!.id].sort());
  });

  it('keeps a job with dependents: its children are released with its result', async () => {
    const queue = await queueWith(true);
    const [parent, child] = (
      await store.jobSubmitMany({
        jobs: [jobInput({ queue, type: 'parent', ref: 'p' }), jobInput({ queue, type: 'child', dependsOnRefs: ['p'] })],
        now: T0,
      })
    ).map((r) => r.job);
    const [run] = await claimAll(queue);
    expect(run!.id).toBe(parent!.id);
    const [out] = await store.jobCompleteMany({ completions: [{ id: run!.id, token: run!.leaseToken!, result: { from: 'parent' } }], now: at(2) });
    expect(out!.accepted).toBe(true);
    expect(await store.jobGet({ id: parent!.id })).toMatchObject({ state: 'COMPLETED', result: { from: 'parent' } });
    const [childRun] = await claimAll(queue, at(3));
    expect(childRun!.id).toBe(child!.id);
    expect(childRun!.parentResults).toEqual({ [parent!.id]: { from: 'parent' } });
    // The child has no dependents: it is deleted at its completion.
    await store.jobCompleteMany({ completions: [{ id: childRun!.id, token: childRun!.leaseToken!, result: {} }], now: at(4) });
    expect(await rowCount(child!.id)).toBe(0);
    // A deleted job can no longer be named as a parent.
    await expect(store.jobSubmitMany({ jobs: [jobInput({ queue, dependsOn: [child!.id] })], now: at(5) })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
  });

  it('keeps a job that gains a dependent while its completion waits for its row', async () => {
    const queue = await queueWith(true);
    await store.jobSubmitMany({ jobs: [jobInput({ queue })], now: T0 });
    const [run] = await claimAll(queue);
    // Another transaction holds the row and marks it a parent, as a submit naming it does.
    const other = await sql.connect();
    try {
      await other.query('BEGIN');
      await other.query('UPDATE evora.jobs SET has_dependents = true WHERE id = $1', [run!.id]);
      const completion = store.jobCompleteMany({ completions: [{ id: run!.id, token: run!.leaseToken!, result: { kept: true } }], now: at(2) });
      await waitFor(
        async () =>
          Number(
            (
              await sql.query(
                `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%DELETE FROM evora.jobs%'`,
              )
            ).rows[0].n,
          ) > 0,
        { what: 'the completion to wait for the row' },
      );
      await other.query('COMMIT');
      const [out] = await completion;
      expect(out!.accepted).toBe(true);
    } finally {
      other.release();
    }
    expect(await store.jobGet({ id: run!.id })).toMatchObject({ state: 'COMPLETED', result: { kept: true } });
    const { rows } = await sql.query(`SELECT count(*)::int AS n FROM ${OUTBOX_EVENTS} e WHERE kind = 'completed' AND job_id = $1`, [run!.id]);
    expect(rows[0].n).toBe(1);
  });
});

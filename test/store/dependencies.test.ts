import { beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import type { Job, JobState, JobSubmitInput } from '../../src/domain/job.js';
import type { Store } from '../../src/store/store.js';
import { jobInput, queueName } from '../helpers/factories.js';
import { OUTBOX_EVENTS, storeSetup } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';

/** Job dependencies in the store: the submit, the parents' trigger, the claim's parent results, the repair pass. */

let store: Store;
let sql: pg.Pool;
beforeAll(async () => {
  ({ store, sql } = await storeSetup());
});

const T0 = new Date('2030-01-01T00:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

/** Claims every claimable job of `queue` as worker w. */
async function claimAll(queue: string, now = at(1)): Promise<Job[]> {
  return store.jobClaim({ queues: [queue], limit: 100, workerId: 'w', now });
}

async function complete(job: Job, result: Record<string, unknown>, now = at(2)): Promise<void> {
  const [out] = await store.jobCompleteMany({ completions: [{ id: job.id, token: job.leaseToken!, result }], now });
  expect(out?.accepted).toBe(true);
}

async function stateOf(id: string): Promise<string> {
  return (await store.jobGet({ id })).state;
}

/** The diamond A -> B, A -> C, B and C -> D, in one call, refs in any order. */
async function diamond(queue: string, realTime = false): Promise<{ a: Job; b: Job; c: Job; d: Job }> {
  const jobs: JobSubmitInput[] = [
    jobInput({ queue, type: 'd', ref: 'd', dependsOnRefs: ['b', 'c'] }),
    jobInput({ queue, type: 'b', ref: 'b', dependsOnRefs: ['a'] }),
    jobInput({ queue, type: 'a', ref: 'a' }),
    jobInput({ queue, type: 'c', ref: 'c', dependsOnRefs: ['a'] }),
  ];
  const [d, b, a, c] = (await store.jobSubmitMany({ jobs, ...(realTime ? {} : { now: T0 }) })).map((r) => r.job);
  return { a: a!, b: b!, c: c!, d: d! };
}

describe('a diamond submitted in one call', () => {
  it('runs A, then B and C, then D with both results; WAITING jobs are never claimed', async () => {
    const queue = queueName();
    const { a, b, c, d } = await diamond(queue);
    expect([a.state, b.state, c.state, d.state]).toEqual(['PENDING', 'WAITING', 'WAITING', 'WAITING']);
    expect(a.parentIds).toBeNull();
    expect(b.parentIds).toEqual([a.id]);
    expect([...d.parentIds!].sort()).toEqual([b.id, c.id].sort());

    const first = await claimAll(queue);
    expect(first.map((j) => j.id)).toEqual([a.id]);
    expect(first[0]!.parentResults).toBeUndefined();
    await complete(first[0]!, { from: 'a' });
    expect([await stateOf(b.id), await stateOf(c.id), await stateOf(d.id)]).toEqual(['PENDING', 'PENDING', 'WAITING']);

    const second = await claimAll(queue, at(3));
    expect(second.map((j) => j.type).sort()).toEqual(['b', 'c']);
    for (const j of second) expect(j.parentResults).toEqual({ [a.id]: { from: 'a' } });
    await complete(second.find((j) => j.type === 'b')!, { from: 'b' }, at(4));
    expect(await stateOf(d.id)).toBe('WAITING');
    expect(await claimAll(queue, at(4))).toEqual([]);
    await complete(second.find((j) => j.type === 'c')!, { from: 'c' }, at(5));
    expect(await stateOf(d.id)).toBe('PENDING');

    const [dRun] = await claimAll(queue, at(6));
    expect(dRun!.id).toBe(d.id);
    expect(dRun!.parentResults).toEqual({ [b.id]: { from: 'b' }, [c.id]: { from: 'c' } });

    const { rows } = await sql.query(
      `SELECT kind::text, from_state::text, to_state::text FROM ${OUTBOX_EVENTS} ev WHERE job_id = $1 ORDER BY id`,
      [d.id],
    );
    expect(rows).toEqual([
      { kind: 'submitted', from_state: null, to_state: 'WAITING' },
      { kind: 'released', from_state: 'WAITING', to_state: 'PENDING' },
      { kind: 'claimed', from_state: 'PENDING', to_state: 'RUNNING' },
    ]);
  });

  it('A dead-lettered cancels B, C and D naming A; retrying A puts them back and the graph runs', async () => {
    const queue = queueName();
    const { a, b, c, d } = await diamond(queue);
    const [aRun] = await claimAll(queue);
    await store.jobFailMany({ failures: [{ id: aRun!.id, token: aRun!.leaseToken!, error: 'boom', retryable: false }], now: at(2) });
    for (const id of [b.id, c.id, d.id]) {
      const job = await store.jobGet({ id });
      expect(job.state).toBe('CANCELLED');
      expect(job.lastError).toBe(`parent ${a.id} ended DLQ`);
    }
    // A cancelled child cannot be retried on its own while its parent is DLQ.
    await expect(store.jobRetry({ id: d.id, now: at(3) })).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });

    expect((await store.jobRetry({ id: a.id, now: at(3) })).state).toBe('PENDING');
    for (const id of [b.id, c.id, d.id]) {
      const job = await store.jobGet({ id });
      expect([job.state, job.lastError, job.finishedAt]).toEqual(['WAITING', null, null]);
    }
    // The whole graph runs.
    for (let step = 0, t = 4; step < 3; step++, t += 2) {
      const claimed = await claimAll(queue, at(t));
      expect(claimed.length).toBeGreaterThan(0);
      for (const j of claimed) await complete(j, { t: j.type }, at(t + 1));
    }
    for (const id of [a.id, b.id, c.id, d.id]) expect(await stateOf(id)).toBe('COMPLETED');
  });

  it('a bulk retry leaves the children a DLQ parent cancelled, and retrying the parent in bulk restores them', async () => {
    const queue = queueName();
    const { a, b, c, d } = await diamond(queue);
    const [aRun] = await claimAll(queue);
    await store.jobFailMany({ failures: [{ id: aRun!.id, token: aRun!.leaseToken!, error: 'boom', retryable: false }], now: at(2) });
    // Only A can be retried: B, C and D wait for it (not counted, not taken).
    const filter = (states: JobState[]) => ({ queue, states, type: null, finishedBefore: null, ids: null });
    expect((await store.jobRetryCount({ filter: filter(['DLQ', 'CANCELLED']) })).jobs).toBe(1);
    expect(await store.jobRetryMany({ filter: filter(['CANCELLED']), now: at(3) })).toBe(0);
    for (const id of [b.id, c.id, d.id]) expect(await stateOf(id)).toBe('CANCELLED');
    expect(await store.jobRetryMany({ filter: filter(['DLQ', 'CANCELLED']), now: at(3) })).toBe(1);
    expect(await stateOf(a.id)).toBe('PENDING');
    for (const id of [b.id, c.id, d.id]) expect(await stateOf(id)).toBe('WAITING');
  });

  it('a child held back by a second failed parent stays CANCELLED when the first is retried', async () => {
    const queue = queueName();
    const { b, c, d } = await diamond(queue);
    const [aRun] = await claimAll(queue);
    await complete(aRun!, {});
    const [bRun, cRun] = await claimAll(queue, at(3));
    await store.jobFailMany({
      failures: [bRun!, cRun!].map((j) => ({ id: j.id, token: j.leaseToken!, error: 'x', retryable: false })),
      now: at(4),
    });
    expect(await stateOf(d.id)).toBe('CANCELLED');
    await store.jobRetry({ id: b.id, now: at(5) });
    const held = await store.jobGet({ id: d.id });
    expect(held.state).toBe('CANCELLED');
    expect(held.lastError).toBe(`parent ${c.id} ended DLQ`);
    await store.jobRetry({ id: c.id, now: at(6) });
    expect(await stateOf(d.id)).toBe('WAITING');
  });
});

describe('a deep chain (one trigger level per generation overflowed the stack)', () => {
  /** r0 -> r1 -> ... -> r<n-1>, in one call. */
  async function chain(queue: string, n: number): Promise<Job[]> {
    const jobs: JobSubmitInput[] = [];
    for (let i = 0; i < n; i++) jobs.push(jobInput({ queue, type: 't', ref: `r${i}`, ...(i > 0 ? { dependsOnRefs: [`r${i - 1}`] } : {}) }));
    return (await store.jobSubmitMany({ jobs, now: T0 })).map((r) => r.job);
  }

  it('a root of 1,500 generations dead-lettered cancels every one naming it; its retry restores them all', async () => {
    const queue = queueName();
    const jobs = await chain(queue, 1500);
    const [root] = await claimAll(queue);
    const [out] = await store.jobFailMany({ failures: [{ id: root!.id, token: root!.leaseToken!, error: 'boom', retryable: false }], now: at(2) });
    expect(out?.accepted).toBe(true);
    const { rows } = await sql.query(
      `SELECT state::text, last_error, count(*)::int AS n FROM evora.jobs WHERE id = ANY ($1) GROUP BY 1, 2 ORDER BY 1`,
      [jobs.slice(1).map((j) => j.id)],
    );
    expect(rows).toEqual([{ state: 'CANCELLED', last_error: `parent ${root!.id} ended DLQ`, n: 1499 }]);
    // Each names the generation before it, so the retry walks the same way back.
    const { rows: via } = await sql.query('SELECT cancelled_by::text AS by FROM evora.jobs WHERE id = $1', [jobs[1000]!.id]);
    expect(via).toEqual([{ by: jobs[999]!.id }]);
    // The last one's refused retry names the job to retry first, 1,499 generations up.
    await expect(store.jobRetry({ id: jobs[1499]!.id, now: at(3) })).rejects.toMatchObject({
      code: 'FAILED_PRECONDITION',
      message: `job ${jobs[1499]!.id} has a parent in DLQ or CANCELLED (parent ${root!.id} ended DLQ); retry job ${root!.id} first (parent ${jobs[1498]!.id} is held back by it)`,
    });

    expect((await store.jobRetry({ id: root!.id, now: at(3) })).state).toBe('PENDING');
    const { rows: after } = await sql.query(
      `SELECT state::text, count(*)::int AS n FROM evora.jobs WHERE id = ANY ($1) GROUP BY 1`,
      [jobs.slice(1).map((j) => j.id)],
    );
    expect(after).toEqual([{ state: 'WAITING', n: 1499 }]);
  }, 60_000);

  it('an operator cancel of the root of 1,500 generations cancels them all', async () => {
    const queue = queueName();
    const jobs = await chain(queue, 1500);
    expect((await store.jobCancel({ id: jobs[0]!.id, now: at(1) })).state).toBe('CANCELLED');
    expect(await stateOf(jobs[1499]!.id)).toBe('CANCELLED');
  }, 60_000);
});

describe('depends_on (existing jobs)', () => {
  it('a COMPLETED parent does not hold the child back; an unfinished one does', async () => {
    const queue = queueName();
    const parent = (await store.jobSubmit({ job: jobInput({ queue }), now: T0 })).job;
    const waiting = (await store.jobSubmit({ job: jobInput({ queue, dependsOn: [parent.id] }), now: T0 })).job;
    expect(waiting.state).toBe('WAITING');
    const [run] = await claimAll(queue);
    await complete(run!, { ok: true });
    const pending = (await store.jobSubmit({ job: jobInput({ queue, dependsOn: [parent.id] }), now: at(3) })).job;
    expect(pending.state).toBe('PENDING');
    expect(await stateOf(waiting.id)).toBe('PENDING');
  });

  it('an unknown parent is NOT_FOUND and a DLQ parent FAILED_PRECONDITION, and nothing is inserted', async () => {
    const queue = queueName();
    const missing = '01900000-0000-7000-8000-000000000000';
    await expect(
      store.jobSubmitMany({ jobs: [jobInput({ queue, ref: 'x' }), jobInput({ queue, dependsOn: [missing] })], now: T0 }),
    ).rejects.toMatchObject({ code: 'NOT_FOUND', message: `jobs[1].depends_on names job ${missing}, which does not exist` });

    const dead = (await store.jobSubmit({ job: jobInput({ queue: queueName() }), now: T0 })).job;
    const [run] = await claimAll(dead.queue);
    await store.jobFailMany({ failures: [{ id: run!.id, token: run!.leaseToken!, error: 'x', retryable: false }], now: at(2) });
    await expect(store.jobSubmit({ job: jobInput({ queue, dependsOn: [dead.id] }), now: at(3) })).rejects.toMatchObject({
      code: 'FAILED_PRECONDITION',
      message: `depends_on names job ${dead.id}, which is DLQ: retry it first, or submit without it`,
    });
    const { rows } = await sql.query('SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1', [queue]);
    expect(rows[0].n).toBe(0);
  });

  it('a replay with other parents is ALREADY_EXISTS naming depends_on', async () => {
    const queue = queueName();
    const p1 = (await store.jobSubmit({ job: jobInput({ queue }), now: T0 })).job;
    const p2 = (await store.jobSubmit({ job: jobInput({ queue }), now: T0 })).job;
    const first = await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k', dependsOn: [p1.id] }), now: T0 });
    const again = await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k', dependsOn: [p1.id] }), now: T0 });
    expect([first.created, again.created, again.job.id]).toEqual([true, false, first.job.id]);
    await expect(
      store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k', dependsOn: [p2.id] }), now: T0 }),
    ).rejects.toMatchObject({ code: 'ALREADY_EXISTS', message: expect.stringMatching(/different depends_on$/) });
    await expect(store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k' }), now: T0 })).rejects.toMatchObject({
      code: 'ALREADY_EXISTS',
    });
  });

  it('a graph replayed with keys returns the same jobs, and a new child of a replayed ref waits on it', async () => {
    const queue = queueName();
    const graph = (extra: JobSubmitInput[] = []) => [
      jobInput({ queue, ref: 'a', idempotencyKey: 'a' }),
      jobInput({ queue, ref: 'b', idempotencyKey: 'b', dependsOnRefs: ['a'] }),
      ...extra,
    ];
    const first = await store.jobSubmitMany({ jobs: graph(), now: T0 });
    const again = await store.jobSubmitMany({ jobs: graph([jobInput({ queue, dependsOnRefs: ['a'] })]), now: T0 });
    expect(again.map((r) => r.created)).toEqual([false, false, true]);
    expect(again[2]!.job.parentIds).toEqual([first[0]!.job.id]);
    expect(again[2]!.job.state).toBe('WAITING');
    const [aRun] = await claimAll(queue);
    await complete(aRun!, {});
    expect(await stateOf(again[2]!.job.id)).toBe('PENDING');
  });
});

describe('concurrency and repair', () => {
  it('a child submitted while its parent completes is never left WAITING (300 rounds)', async () => {
    const queue = queueName();
    for (let round = 0; round < 300; round++) {
      const parent = (await store.jobSubmit({ job: jobInput({ queue, payload: { round } }) })).job;
      const [run] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w' });
      expect(run?.id).toBe(parent.id);
      const [child] = await Promise.all([
        store.jobSubmit({ job: jobInput({ queue, type: 'child', dependsOn: [parent.id] }) }),
        store.jobCompleteMany({ completions: [{ id: run!.id, token: run!.leaseToken!, result: { round } }] }),
      ]);
      expect(await stateOf(child.job.id)).toBe('PENDING');
      // Clear the child so the next round's claim takes only the parent.
      await store.jobCancel({ id: child.job.id });
    }
  });

  /** Runs `fn` in a transaction of its own on the raw pool, committed when `commit` resolves. */
  async function heldTransaction(fn: (c: pg.PoolClient) => Promise<void>): Promise<{ commit: () => Promise<void> }> {
    const c = await sql.connect();
    await c.query('BEGIN');
    await fn(c);
    return {
      commit: async () => {
        await c.query('COMMIT');
        c.release();
      },
    };
  }

  /** Whether some other backend waits on a lock (the statement under test is blocked). */
  async function someoneWaits(): Promise<boolean> {
    const { rows } = await sql.query(`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted`);
    return rows[0].n > 0;
  }

  /**
   * Whether a store connection's last statement was a ROLLBACK: a dependency submit refused
   * by a parent another transaction holds (job-parents-lock.sql locks NOWAIT; the store
   * rolls back and tries again after a pause).
   */
  async function someSubmitRefused(): Promise<boolean> {
    const { rows } = await sql.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query = 'ROLLBACK'`,
    );
    return rows[0].n > 0;
  }

  it('a submit refused by a completing parent tries again and then sees it COMPLETED', async () => {
    const queue = queueName();
    const parent = (await store.jobSubmit({ job: jobInput({ queue }) })).job;
    await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w' });
    const completion = await heldTransaction(async (c) => {
      await c.query(`UPDATE evora.jobs SET state = 'COMPLETED', locked_until = NULL, finished_at = now() WHERE id = $1`, [parent.id]);
    });
    const child = store.jobSubmit({ job: jobInput({ queue, dependsOn: [parent.id] }) });
    await waitFor(someSubmitRefused, { what: 'the submit to be refused by the held parent' });
    await completion.commit();
    expect((await child).job.state).toBe('PENDING');
  });

  it('a completion that waits on a submit holding its parent releases the new child', async () => {
    const queue = queueName();
    const parent = (await store.jobSubmit({ job: jobInput({ queue }) })).job;
    const [run] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w' });
    const childId = '01900000-0000-7000-8000-0000000000aa';
    // What a dependency submit does, held open: lock and mark the parent, insert the child WAITING.
    const submit = await heldTransaction(async (c) => {
      await c.query(`UPDATE evora.jobs SET has_dependents = true WHERE id = $1`, [parent.id]);
      await c.query(
        `INSERT INTO evora.jobs (id, queue, type, max_attempts, state, parent_ids) VALUES ($1, $2, 'child', 3, 'WAITING', ARRAY[$3::uuid])`,
        [childId, queue, parent.id],
      );
    });
    const completed = store.jobCompleteMany({ completions: [{ id: run!.id, token: run!.leaseToken!, result: { ok: 1 } }] });
    await waitFor(someoneWaits, { what: 'the completion to wait on the parent' });
    await submit.commit();
    expect((await completed)[0]?.accepted).toBe(true);
    expect(await stateOf(childId)).toBe('PENDING');
  });

  it('two parents completing in concurrent transactions release their child once, never leaving it WAITING', async () => {
    const queue = queueName();
    const { b, c, d } = await diamond(queue, true);
    const [aRun] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w' });
    const [done] = await store.jobCompleteMany({ completions: [{ id: aRun!.id, token: aRun!.leaseToken!, result: {} }] });
    expect(done?.accepted).toBe(true);
    const runs = await store.jobClaim({ queues: [queue], limit: 2, workerId: 'w' });
    expect(runs.map((j) => j.id).sort()).toEqual([b.id, c.id].sort());
    // B completes in a transaction held open: its trigger locks D and finds C still RUNNING.
    const first = await heldTransaction(async (client) => {
      await client.query(`UPDATE evora.jobs SET state = 'COMPLETED', locked_until = NULL, finished_at = now() WHERE id = $1`, [b.id]);
    });
    expect(await stateOf(d.id)).toBe('WAITING');
    // C completes meanwhile: its trigger waits for D's lock, then sees B's commit.
    const cRun = runs.find((j) => j.id === c.id)!;
    const second = store.jobCompleteMany({ completions: [{ id: cRun.id, token: cRun.leaseToken!, result: {} }] });
    await waitFor(someoneWaits, { what: "C's completion to wait on D" });
    await first.commit();
    await second;
    expect(await stateOf(d.id)).toBe('PENDING');
  });

  it('the repair pass releases a WAITING job whose parents all completed', async () => {
    const queue = queueName();
    const parent = (await store.jobSubmit({ job: jobInput({ queue }), now: T0 })).job;
    const [run] = await claimAll(queue);
    await complete(run!, {});
    // A child made stuck by hand: WAITING behind a COMPLETED parent (the trigger never saw it).
    const child = (await store.jobSubmit({ job: jobInput({ queue, dependsOn: [parent.id] }), now: at(3) })).job;
    await store.jobCancel({ id: child.id, now: at(4) });
    await sql.query(`UPDATE evora.jobs SET state = 'WAITING', finished_at = NULL WHERE id = $1`, [child.id]);
    expect(await store.jobWaitingRepair({ limit: 10, now: at(5) })).toEqual([child.id]);
    expect(await stateOf(child.id)).toBe('PENDING');
    expect(await store.jobWaitingRepair({ limit: 10, now: at(6) })).toEqual([]);
  });

  it('an operator can cancel a WAITING job', async () => {
    const queue = queueName();
    const parent = (await store.jobSubmit({ job: jobInput({ queue }), now: T0 })).job;
    const child = (await store.jobSubmit({ job: jobInput({ queue, dependsOn: [parent.id] }), now: T0 })).job;
    expect((await store.jobCancel({ id: child.id, now: at(1) })).state).toBe('CANCELLED');
    // Retried while the parent still runs: WAITING again.
    expect((await store.jobRetry({ id: child.id, now: at(2) })).state).toBe('WAITING');
  });
});

import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { jobInput, queueName } from '../helpers/factories.js';
import { OUTBOX_EVENTS, storeSetup } from '../helpers/store-setup.js';

let store: Store;
let sql: pg.Pool;
beforeAll(async () => {
  ({ store, sql } = await storeSetup());
});

const T0 = new Date('2033-01-01T00:00:00Z');
const at = (s: number) => new Date(T0.getTime() + s * 1000);

/** A queue that exists (a hand-off needs its row: lease length, paused). */
async function queueCreate(paused = false): Promise<string> {
  const name = queueName();
  await store.queueUpsert({ name, leaseSeconds: 30 });
  if (paused) await store.queueSetPaused({ name, paused: true });
  return name;
}

async function events(jobId: string) {
  const { rows } = await sql.query<{ kind: string; from_state: string | null; to_state: string; attempt: number; worker_id: string | null }>(
    `SELECT kind::text, from_state::text, to_state::text, attempt, worker_id FROM ${OUTBOX_EVENTS} f WHERE job_id = $1 ORDER BY id`,
    [jobId],
  );
  return rows.map((e) => [e.kind, e.from_state, e.to_state, e.attempt, e.worker_id]);
}

describe('a submit hands its job to a named worker when a claim would pick it now', () => {
  it('leases the job in the submit statement and records both events, submitted then claimed', async () => {
    const queue = await queueCreate();
    const { job, created } = await store.jobSubmit({ job: jobInput({ queue }), now: T0, handoffWorkerId: 'w1' });
    expect(created).toBe(true);
    expect(job).toMatchObject({ state: 'RUNNING', attempt: 1, workerId: 'w1', startedAt: T0, lockedUntil: at(30) });
    expect(job.leaseToken).toMatch(/^[0-9a-f-]{36}$/);
    expect(await events(job.id)).toEqual([
      ['submitted', null, 'PENDING', 0, null],
      ['claimed', 'PENDING', 'RUNNING', 1, 'w1'],
    ]);
    // The lease is an ordinary one: the worker completes with it, nobody else can.
    const [done] = await store.jobCompleteMany({ completions: [{ id: job.id, token: job.leaseToken!, result: { ok: true } }], now: at(1) });
    expect(done?.accepted).toBe(true);
    expect(await store.jobClaim({ queues: [queue], limit: 10, workerId: 'w2', now: at(2) })).toEqual([]);
  });

  it('a keyed job handed off remembers what was submitted: a replay differing in a field is refused naming it', async () => {
    const queue = await queueCreate();
    const input = jobInput({ queue, idempotencyKey: 'h', priority: 4 });
    const { job } = await store.jobSubmit({ job: input, now: T0, handoffWorkerId: 'w1' });
    expect(job.state).toBe('RUNNING');
    expect(await store.jobSubmit({ job: input, now: at(1), handoffWorkerId: 'w1' })).toMatchObject({ created: false, job: { id: job.id } });
    await expect(store.jobSubmit({ job: { ...input, maxAttempts: 2 }, now: at(1), handoffWorkerId: 'w1' })).rejects.toThrow(
      /submitted with a different max_attempts$/,
    );
  });

  it('leaves the job PENDING when a claimable job waits in the queue, so it does not overtake it', async () => {
    const queue = await queueCreate();
    const { job: first } = await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
    const { job: second } = await store.jobSubmit({ job: jobInput({ queue, priority: -5 }), now: at(1), handoffWorkerId: 'w1' });
    expect(second).toMatchObject({ state: 'PENDING', attempt: 0, workerId: null, leaseToken: null });
    // A claim decides between them as always: the higher priority first.
    const claimed = await store.jobClaim({ queues: [queue], limit: 2, workerId: 'w2', now: at(2) });
    expect(claimed.map((j) => j.id)).toEqual([second.id, first.id]);
  });

  it('a job waiting for later in the queue does not stop a hand-off', async () => {
    const queue = await queueCreate();
    await store.jobSubmit({ job: jobInput({ queue, runAt: at(3600) }), now: T0 });
    const { job } = await store.jobSubmit({ job: jobInput({ queue }), now: at(1), handoffWorkerId: 'w1' });
    expect(job.state).toBe('RUNNING');
  });

  it('leaves the job PENDING in a paused queue, when it is due later, and in a queue the submit creates', async () => {
    const paused = await queueCreate(true);
    const inPaused = await store.jobSubmit({ job: jobInput({ queue: paused }), now: T0, handoffWorkerId: 'w1' });
    const later = await store.jobSubmit({ job: jobInput({ queue: await queueCreate(), runAt: at(60) }), now: T0, handoffWorkerId: 'w1' });
    const fresh = await store.jobSubmit({ job: jobInput({ queue: queueName() }), now: T0, handoffWorkerId: 'w1' });
    for (const { job } of [inPaused, later, fresh]) {
      expect(job).toMatchObject({ state: 'PENDING', attempt: 0, leaseToken: null });
      expect(await events(job.id)).toEqual([['submitted', null, 'PENDING', 0, null]]);
    }
  });

  it('an idempotent replay returns the existing job untouched and leases nothing, though a hand-off would be possible', async () => {
    const queue = await queueCreate();
    const first = await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k' }), now: T0 });
    const [claimed] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w0', now: at(1) });
    await store.jobCompleteMany({ completions: [{ id: first.job.id, token: claimed!.leaseToken!, result: {} }], now: at(2) });
    // Nothing claimable waits now: without the key this submit would be handed off.
    const replay = await store.jobSubmit({ job: jobInput({ queue, idempotencyKey: 'k' }), now: at(3), handoffWorkerId: 'w1' });
    expect(replay.created).toBe(false);
    expect(replay.job).toMatchObject({ id: first.job.id, state: 'COMPLETED', attempt: 1, workerId: 'w0' });
    expect((await events(first.job.id)).map((e) => e[0])).toEqual(['submitted', 'claimed', 'completed']);
  });

  it('the claimed event of a job due earlier carries its wait, as a claim would record it', async () => {
    const queue = await queueCreate();
    const { job } = await store.jobSubmit({ job: jobInput({ queue, runAt: new Date(T0.getTime() - 1500) }), now: T0, handoffWorkerId: 'w1' });
    expect(job.state).toBe('RUNNING');
    const { rows } = await sql.query<{ kind: string; wait_ms: number | null }>(
      `SELECT kind::text, wait_ms FROM ${OUTBOX_EVENTS} f WHERE job_id = $1 ORDER BY id`,
      [job.id],
    );
    expect(rows).toEqual([
      { kind: 'submitted', wait_ms: null },
      { kind: 'claimed', wait_ms: 1500 },
    ]);
  });

  it('the database refuses any creation but PENDING or RUNNING as a claim leaves it (first attempt, lease, worker, start)', async () => {
    const insert = (state: string, attempt: number, opts: { lease?: boolean; worker?: boolean; finished?: boolean } = {}) =>
      sql.query(
        `INSERT INTO evora.jobs (queue, type, state, attempt, max_attempts, lease_token, locked_until, worker_id, started_at, finished_at)
         VALUES ('x', 't', $1, $2, 3, ${opts.lease ? 'gen_random_uuid(), now()' : 'NULL, NULL'},
                 ${opts.worker ? "'w', now()" : 'NULL, NULL'}, ${opts.finished ? 'now()' : 'NULL'})`,
        [state, attempt],
      );
    await expect(insert('RUNNING', 2, { lease: true, worker: true })).rejects.toThrow(/must be created PENDING .*not RUNNING on attempt 2/);
    await expect(insert('RUNNING', 1, { worker: true })).rejects.toThrow(/jobs_running_has_lease/);
    await expect(insert('RUNNING', 1, { lease: true })).rejects.toThrow(/must be created PENDING/);
    await expect(insert('RUNNING', 1, { lease: true, worker: true, finished: true })).rejects.toThrow(/must be created PENDING/);
    await expect(insert('COMPLETED', 1)).rejects.toThrow(/must be created PENDING/);
    await expect(insert('DLQ', 0)).rejects.toThrow(/must be created PENDING/);
    await expect(insert('RUNNING', 1, { lease: true, worker: true })).resolves.toMatchObject({ rowCount: 1 });
  });
});

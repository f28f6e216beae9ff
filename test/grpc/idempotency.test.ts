import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EvoraApiError, EvoraClient, type SubmitJobInput } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';

// Strict idempotency (docs/api.md, "Idempotency"): a replay is identical to what the first
// submit SAID, or refused naming the first field that differs; through SubmitJob, SubmitJobs
// and evora.submit_job alike.

let client: EvoraClient;
let db: pg.Client;
beforeAll(async () => {
  const { address, databaseUrl } = await serverSetup();
  client = new EvoraClient({ address });
  db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
});
afterAll(async () => {
  client.close();
  await db.end();
});

/** The error a refused call gives (its status name and message). */
async function refusal(p: Promise<unknown>): Promise<EvoraApiError> {
  const err = await p.then(
    () => {
      throw new Error('expected a refusal, got success');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EvoraApiError);
  return err as EvoraApiError;
}

const RUN_AT = new Date('2030-01-01T00:00:00Z');

/** Each submitted field, and a replay that differs in it alone. */
const DIFFERENT: [string, Partial<SubmitJobInput>][] = [
  ['type', { type: 'other' }],
  ['payload', { payload: { v: 2 } }],
  ['priority', { priority: 7 }],
  ['run_at', { runAt: new Date(RUN_AT.getTime() + 1) }],
  ['max_attempts', { maxAttempts: 9 }],
];

describe('idempotent submits', () => {
  it('an identical replay is created=false with the first job; fields unset on both submits are identical', async () => {
    const queue = queueName();
    for (const input of [
      { queue, type: 't', idempotencyKey: 'unset' },
      { queue, type: 't', idempotencyKey: 'set', payload: { v: 1 }, priority: 3, runAt: RUN_AT, maxAttempts: 4 },
    ]) {
      const first = await client.submit(input);
      expect(first.created).toBe(true);
      const replay = await client.submit(input);
      expect(replay).toMatchObject({ created: false, job: { id: first.job.id } });
    }
  });

  it.each(DIFFERENT)('a replay with a different %s is ALREADY_EXISTS naming it; the first job is unchanged', async (field, change) => {
    const queue = queueName();
    const input = { queue, type: 't', idempotencyKey: 'k', payload: { v: 1 }, priority: 1, runAt: RUN_AT, maxAttempts: 3 };
    const first = await client.submit(input);
    const err = await refusal(client.submit({ ...input, ...change }));
    expect(err.codeName).toBe('ALREADY_EXISTS');
    expect(err.details).toBe(`idempotency key "k" in queue "${queue}" already names job ${first.job.id}, submitted with a different ${field}`);
    expect(await client.get(first.job.id)).toMatchObject({ type: 't', payload: { v: 1 }, priority: 1, maxAttempts: 3 });
  });

  it('compares what was submitted, not resolved defaults: unset vs the value it resolved to differs', async () => {
    const queue = queueName();
    const first = await client.submit({ queue, type: 't', idempotencyKey: 'k' });
    // The queue's default (5) is what the job got, but the first submit did not say 5.
    expect(first.job.maxAttempts).toBe(5);
    expect((await refusal(client.submit({ queue, type: 't', idempotencyKey: 'k', maxAttempts: 5 }))).details).toMatch(/different max_attempts$/);
    expect((await refusal(client.submit({ queue, type: 't', idempotencyKey: 'k', runAt: first.job.runAt! }))).details).toMatch(/different run_at$/);
    // Names the first differing field in the API's order.
    expect((await refusal(client.submit({ queue, type: 't', idempotencyKey: 'k', priority: 2, maxAttempts: 2 }))).details).toMatch(/different priority$/);
  });

  it('SubmitJobs: replays are created=false per item; one differing item refuses the whole batch, naming the item and field', async () => {
    const queue = queueName();
    const a = { queue, type: 't', idempotencyKey: 'a', priority: 2 };
    const [first] = await client.submitMany([a]);
    const ok = await client.submitMany([a, { queue, type: 't', idempotencyKey: 'b' }]);
    expect(ok.map((r) => r.created)).toEqual([false, true]);
    expect(ok[0]!.job.id).toBe(first!.job.id);
    const err = await refusal(client.submitMany([{ queue, type: 't', idempotencyKey: 'c' }, { ...a, priority: 3 }]));
    expect(err.codeName).toBe('ALREADY_EXISTS');
    expect(err.details).toMatch(/idempotency key "a" .* different priority$/);
    // All or nothing: the batch's new job "c" was not kept.
    const { rows } = await db.query('SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1', [queue]);
    expect(rows[0].n).toBe(2);
  });

  it('SubmitJobs naming one key twice: the first is created, the later is its replay (created=false, or ALREADY_EXISTS when it differs), with and without dependencies', async () => {
    const queue = queueName();
    const same = await client.submitMany([{ queue, type: 't', idempotencyKey: 'k' }, { queue, type: 't', idempotencyKey: 'k' }, { queue, type: 't', idempotencyKey: 'j' }]);
    expect(same.map((r) => r.created)).toEqual([true, false, true]);
    expect(same[1]!.job.id).toBe(same[0]!.job.id);
    const ids = await client.submitMany([{ queue, type: 't', idempotencyKey: 'i' }, { queue, type: 't', idempotencyKey: 'i' }], { idsOnly: true });
    expect(ids.created).toEqual([true, false]);
    expect(ids.ids[1]).toBe(ids.ids[0]);
    // In a graph: the repeat names the same job, and a child of its ref depends on that job.
    const graph = await client.submitMany([
      { queue, type: 't', idempotencyKey: 'p' },
      { queue, type: 't', idempotencyKey: 'c', ref: 'c', dependsOnRefs: [] },
      { queue, type: 't', idempotencyKey: 'c', ref: 'c2' },
      { queue, type: 'u', idempotencyKey: 'd', dependsOnRefs: ['c2'] },
    ]);
    expect(graph.map((r) => r.created)).toEqual([true, true, false, true]);
    expect(graph[2]!.job.id).toBe(graph[1]!.job.id);
    expect(graph[3]!.job.dependsOn).toEqual([graph[1]!.job.id]);
    const differs = await refusal(client.submitMany([{ queue, type: 't', idempotencyKey: 'x', priority: 1 }, { queue, type: 't', idempotencyKey: 'x', priority: 2 }]));
    expect(differs.codeName).toBe('ALREADY_EXISTS');
    expect(differs.details).toMatch(/^idempotency key "x" in queue "q_\w+" already names job [0-9a-f-]{36}, submitted with a different priority$/);
    const { rows } = await db.query(`SELECT idempotency_key AS k FROM evora.jobs WHERE queue = $1 ORDER BY 1`, [queue]);
    expect(rows.map((r) => r.k)).toEqual(['c', 'd', 'i', 'j', 'k', 'p']);
  });

  it('SubmitJobs naming one key three times or more: each replay is compared with the job on its own, so one that differs refuses the batch wherever it stands', async () => {
    const queue = queueName();
    for (const [n, priorities] of [[1, 2, 1], [1, 1, 2], [1, 1, 1, 2]].entries()) {
      // A new key: the first is created, each later one is compared with it.
      const fresh = await refusal(client.submitMany(priorities.map((priority) => ({ queue, type: 't', idempotencyKey: `n${n}`, priority }))));
      expect(fresh.codeName, `${priorities}`).toBe('ALREADY_EXISTS');
      expect(fresh.details).toMatch(/submitted with a different priority$/);
      // A key an earlier submit took (priority 1): each item is compared with its job.
      await client.submit({ queue, type: 't', idempotencyKey: `e${n}`, priority: 1 });
      const existing = await refusal(client.submitMany(priorities.slice(1).map((priority) => ({ queue, type: 't', idempotencyKey: `e${n}`, priority }))));
      expect(existing.codeName, `existing ${priorities.slice(1)}`).toBe('ALREADY_EXISTS');
      // The same in a batch with dependencies (its replays are looked up first, its repeats last).
      const graph = await refusal(
        client.submitMany([
          ...priorities.map((priority, i) => ({ queue, type: 't', idempotencyKey: `g${n}`, priority, ref: `r${i}` })),
          { queue, type: 'u', dependsOnRefs: ['r0'] },
        ]),
      );
      expect(graph.codeName, `graph ${priorities}`).toBe('ALREADY_EXISTS');
    }
    const { rows } = await db.query(`SELECT idempotency_key AS k FROM evora.jobs WHERE queue = $1 ORDER BY 1`, [queue]);
    expect(rows.map((r) => r.k)).toEqual(['e0', 'e1', 'e2']);
  });

  it('a job created before strict idempotency (no record of its submit) accepts a replay that only matches type and payload', async () => {
    const queue = queueName();
    const first = await client.submit({ queue, type: 't', idempotencyKey: 'old', priority: 1 });
    await db.query('UPDATE evora.jobs SET submitted = NULL WHERE id = $1', [first.job.id]);
    expect(await client.submit({ queue, type: 't', idempotencyKey: 'old', priority: 9 })).toMatchObject({ created: false, job: { id: first.job.id } });
    expect((await refusal(client.submit({ queue, type: 'u', idempotencyKey: 'old' }))).details).toMatch(/different type$/);
  });
});

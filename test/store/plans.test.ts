import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { SQL_JOB_CLAIM_FOR_EXPLAIN, SQL_JOB_COMPLETE_FOR_EXPLAIN, SQL_JOB_INSERT_HANDOFF_FOR_EXPLAIN, type Store } from '../../src/store/store.js';
import { jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';

let store: Store;
beforeAll(async () => {
  ({ store } = await storeSetup());
});

/** Runs `fn` on one connection inside a transaction that is rolled back (PREPAREs and SET LOCALs included). */
async function inRolledBackTransaction(fn: (client: pg.PoolClient) => Promise<void>): Promise<void> {
  const client = await store.pool.connect();
  try {
    await client.query('BEGIN');
    await fn(client);
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

/** The plan PostgreSQL would run for `statement` (an EXPLAIN's lines, joined). */
async function planOf(client: pg.PoolClient, statement: string): Promise<string> {
  const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${statement}`);
  return rows.map((r) => r['QUERY PLAN']).join('\n');
}

describe('plans that must not depend on fresh statistics', () => {
  it('a completion finds its jobs by primary key, even when statistics say no job is running', async () => {
    const queue = queueName();
    for (let i = 0; i < 3; i++) await store.jobSubmitMany({ jobs: jobInputs(queue, 1000) });
    await store.pool.query('ANALYZE evora.jobs'); // taken while nothing runs
    const claimed = await store.jobClaim({ queues: [queue], limit: 1000, workerId: 'w' });
    await store.jobClaim({ queues: [queue], limit: 1000, workerId: 'w' });
    await inRolledBackTransaction(async (client) => {
      // Prepared like the store's named statements: the generic plan (what a prepared
      // statement may settle on after five runs) and a custom one.
      await client.query(`PREPARE complete_plan(uuid[], uuid[], jsonb[], timestamptz) AS ${SQL_JOB_COMPLETE_FOR_EXPLAIN}`);
      const ids = `ARRAY[${claimed.slice(0, 5).map((j) => `'${j.id}'::uuid`).join(',')}]`;
      const tokens = `ARRAY[${claimed.slice(0, 5).map((j) => `'${j.leaseToken}'::uuid`).join(',')}]`;
      for (const mode of ['force_generic_plan', 'force_custom_plan']) {
        await client.query(`SET LOCAL plan_cache_mode = ${mode}`);
        const plan = await planOf(client, `EXECUTE complete_plan(${ids}, ${tokens}, array_fill(NULL::jsonb, ARRAY[5]), NULL)`);
        expect(plan, mode).toContain('jobs_pkey');
        expect(plan, mode).not.toContain('jobs_running_lease_idx');
      }
    });
  });

  it('a hand-off submit probes its own queue through the claimable index, however many jobs wait in other queues', async () => {
    const busy = queueName();
    const idle = queueName();
    await store.queueUpsert({ name: idle });
    for (let i = 0; i < 5; i++) await store.jobSubmitMany({ jobs: jobInputs(busy, 1000) });
    await store.pool.query('ANALYZE evora.jobs');
    await inRolledBackTransaction(async (client) => {
      await client.query(`PREPARE handoff_plan AS ${SQL_JOB_INSERT_HANDOFF_FOR_EXPLAIN}`);
      for (const mode of ['force_generic_plan', 'force_custom_plan']) {
        await client.query(`SET LOCAL plan_cache_mode = ${mode}`);
        const plan = await planOf(client, `EXECUTE handoff_plan(gen_random_uuid(), '${idle}', 'noop', '{}', 0, NULL, NULL, NULL, NULL, 'w')`);
        expect(plan, mode).toContain('jobs_claimable_idx');
        expect(plan, mode).not.toMatch(/Seq Scan on jobs/);
      }
    });
  });

  it('the hand-off submit settles on a generic plan instead of being planned at every submit', async () => {
    const queue = queueName();
    await store.queueUpsert({ name: queue });
    await inRolledBackTransaction(async (client) => {
      await client.query(`PREPARE handoff_cached AS ${SQL_JOB_INSERT_HANDOFF_FOR_EXPLAIN}`);
      // The plan cache plans the first five runs for their values, then compares costs.
      for (let i = 0; i < 8; i++) {
        await client.query(`EXECUTE handoff_cached(gen_random_uuid(), '${queue}', 'noop', '{"n": ${i}}', 0, NULL, NULL, NULL, NULL, 'w')`);
      }
      const { rows } = await client.query<{ generic_plans: string; custom_plans: string }>(
        `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'handoff_cached'`,
      );
      expect(Number(rows[0]!.generic_plans)).toBe(3);
    });
  });

  it('a claim updates its jobs found by primary key, not by a scan of the table', async () => {
    const queue = queueName();
    for (let i = 0; i < 20; i++) await store.jobSubmitMany({ jobs: jobInputs(queue, 1000) });
    await store.pool.query('ANALYZE evora.jobs');
    await inRolledBackTransaction(async (client) => {
      await client.query(`PREPARE claim_plan(text[], int, text[], timestamptz, int[]) AS ${SQL_JOB_CLAIM_FOR_EXPLAIN}`);
      await client.query('SET LOCAL plan_cache_mode = force_custom_plan'); // what the store's claims run
      for (const size of [1, 100, 1000]) {
        const plan = await planOf(client, `EXECUTE claim_plan('{${queue}}', ${size}, '{w}', NULL, array_fill(1, ARRAY[${size}]))`);
        expect(plan, `claim of ${size}`).toContain('jobs_pkey');
        expect(plan, `claim of ${size}`).not.toMatch(/Seq Scan on jobs/);
      }
    });
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { SQL_JOB_COMPLETE_FOR_EXPLAIN, type Store } from '../../src/store/store.js';
import { jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';

let store: Store;
beforeAll(async () => {
  ({ store } = await storeSetup());
});

describe('plans that must not depend on fresh statistics', () => {
  it('a completion finds its jobs by primary key, even when statistics say no job is running', async () => {
    const queue = queueName();
    for (let i = 0; i < 3; i++) await store.jobSubmitMany({ jobs: jobInputs(queue, 1000) });
    await store.pool.query('ANALYZE evora.jobs'); // taken while nothing runs
    const claimed = await store.jobClaim({ queues: [queue], limit: 1000, workerId: 'w' });
    await store.jobClaim({ queues: [queue], limit: 1000, workerId: 'w' });
    const client = await store.pool.connect();
    try {
      await client.query('BEGIN');
      // Prepared like the store's named statements: the generic plan (what a prepared
      // statement may settle on after five runs) and a custom one.
      await client.query(`PREPARE complete_plan(uuid[], uuid[], jsonb[], timestamptz) AS ${SQL_JOB_COMPLETE_FOR_EXPLAIN}`);
      const ids = `ARRAY[${claimed.slice(0, 5).map((j) => `'${j.id}'::uuid`).join(',')}]`;
      const tokens = `ARRAY[${claimed.slice(0, 5).map((j) => `'${j.leaseToken}'::uuid`).join(',')}]`;
      for (const mode of ['force_generic_plan', 'force_custom_plan']) {
        await client.query(`SET LOCAL plan_cache_mode = ${mode}`);
        const { rows } = await client.query<{ 'QUERY PLAN': string }>(
          `EXPLAIN EXECUTE complete_plan(${ids}, ${tokens}, array_fill(NULL::jsonb, ARRAY[5]), NULL)`,
        );
        const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
        expect(plan, mode).toContain('jobs_pkey');
        expect(plan, mode).not.toContain('jobs_running_lease_idx');
      }
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });
});

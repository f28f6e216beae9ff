import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { statementNamed } from '../../src/store/catalog.js';
import type { Store } from '../../src/store/store.js';
import { jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';

let store: Store;
let sql: pg.Pool;
beforeAll(async () => {
  ({ store, sql } = await storeSetup());
});

/**
 * PREPAREs the store's statement `name` (its text as the loader sends it) as `as`, and
 * returns how to EXECUTE it: the arguments are SQL expressions by parameter name.
 */
async function prepare(client: pg.PoolClient, name: string, as: string): Promise<(args: Record<string, string>) => string> {
  const s = statementNamed(name);
  await client.query(`PREPARE ${as} AS ${s.text}`);
  return (args) => {
    const missing = s.paramNames.filter((p) => !(p in args));
    if (missing.length > 0) throw new Error(`${name}: no argument for ${missing.join(', ')}`);
    return `EXECUTE ${as}(${s.paramNames.map((p) => args[p]).join(', ')})`;
  };
}

/** Runs `fn` on one connection inside a transaction that is rolled back (PREPAREs and SET LOCALs included). */
async function inRolledBackTransaction(fn: (client: pg.PoolClient) => Promise<void>): Promise<void> {
  const client = await sql.connect();
  try {
    await client.query('BEGIN');
    await fn(client);
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

/**
 * The plan PostgreSQL would run for `statement` (an EXPLAIN's lines, joined); with `analyze`,
 * the plan it ran, with each node's rows and loops (the statement runs: roll it back).
 */
async function planOf(client: pg.PoolClient, statement: string, opts: { analyze?: boolean } = {}): Promise<string> {
  const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${opts.analyze ? '(ANALYZE) ' : ''}${statement}`);
  return rows.map((r) => r['QUERY PLAN']).join('\n');
}

/** A hand-off submit of one job to worker w, as EXECUTE arguments. */
function handoffArgs(queue: string, payload: string): Record<string, string> {
  return {
    id: 'gen_random_uuid()',
    queue: `'${queue}'`,
    type: "'noop'",
    payload: `'${payload}'`,
    priority: '0',
    runAt: 'NULL',
    idempotencyKey: 'NULL',
    maxAttempts: 'NULL',
    policy: 'NULL',
    now: 'NULL',
    handoffWorkerId: "'w'",
  };
}

describe('plans that must not depend on fresh statistics', () => {
  it('a completion finds its jobs by primary key, even when statistics say no job is running', async () => {
    const queue = queueName();
    for (let i = 0; i < 3; i++) await store.jobSubmitMany({ jobs: jobInputs(queue, 1000) });
    await sql.query('ANALYZE evora.jobs'); // taken while nothing runs
    const claimed = await store.jobClaim({ queues: [queue], limit: 1000, workerId: 'w' });
    await store.jobClaim({ queues: [queue], limit: 1000, workerId: 'w' });
    await inRolledBackTransaction(async (client) => {
      // Prepared like the store's named statements: the generic plan (what a prepared
      // statement may settle on after five runs) and a custom one.
      const execute = await prepare(client, 'jobCompleteMany', 'complete_plan');
      const ids = `ARRAY[${claimed.slice(0, 5).map((j) => `'${j.id}'::uuid`).join(',')}]`;
      const tokens = `ARRAY[${claimed.slice(0, 5).map((j) => `'${j.leaseToken}'::uuid`).join(',')}]`;
      for (const mode of ['force_generic_plan', 'force_custom_plan']) {
        await client.query(`SET LOCAL plan_cache_mode = ${mode}`);
        const plan = await planOf(client, execute({ ids, tokens, results: 'array_fill(NULL::jsonb, ARRAY[5])', now: 'NULL' }));
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
    await sql.query('ANALYZE evora.jobs');
    await inRolledBackTransaction(async (client) => {
      const execute = await prepare(client, 'jobInsertHandoff', 'handoff_plan');
      for (const mode of ['force_generic_plan', 'force_custom_plan']) {
        await client.query(`SET LOCAL plan_cache_mode = ${mode}`);
        const plan = await planOf(client, execute(handoffArgs(idle, '{}')));
        expect(plan, mode).toContain('jobs_claimable_idx');
        expect(plan, mode).not.toMatch(/Seq Scan on jobs/);
      }
    });
  });

  it('the hand-off submit settles on a generic plan instead of being planned at every submit', async () => {
    const queue = queueName();
    await store.queueUpsert({ name: queue });
    await inRolledBackTransaction(async (client) => {
      const execute = await prepare(client, 'jobInsertHandoff', 'handoff_cached');
      // The plan cache plans the first five runs for their values, then compares costs.
      for (let i = 0; i < 8; i++) await client.query(execute(handoffArgs(queue, `{"n": ${i}}`)));
      const { rows } = await client.query<{ generic_plans: string; custom_plans: string }>(
        `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'handoff_cached'`,
      );
      expect(Number(rows[0]!.generic_plans)).toBe(3);
    });
  });

  it('a claim updates its jobs found by primary key, not by a scan of the table', async () => {
    const queue = queueName();
    // The same plan for the limited queues' statement (a queue with max_concurrency).
    const limitedQueue = queueName();
    await store.queueUpsert({ name: limitedQueue, maxConcurrency: 100_000 });
    for (let i = 0; i < 20; i++) await store.jobSubmitMany({ jobs: jobInputs(queue, 1000) });
    for (let i = 0; i < 5; i++) await store.jobSubmitMany({ jobs: jobInputs(limitedQueue, 1000) });
    await sql.query('ANALYZE evora.jobs');
    for (const [name, q] of [['jobClaim', queue], ['jobClaimLimited', limitedQueue]] as const) {
      await inRolledBackTransaction(async (client) => {
        const execute = await prepare(client, name, `plan_${name}`);
        await client.query('SET LOCAL plan_cache_mode = force_custom_plan'); // what the store's claims run
        // types NULL (any type) and a job-type filter (job-type routing): the same plan.
        for (const types of ['NULL', "'{t}'"]) {
          for (const size of [1, 100, 1000]) {
            const plan = await planOf(
              client,
              execute({ queues: `'{${q}}'`, limit: String(size), workerIds: "'{w}'", now: 'NULL', types, slotWorkers: `array_fill(1, ARRAY[${size}])` }),
            );
            const what = `${name}: claim of ${size}, types ${types}`;
            expect(plan, what).toContain('jobs_pkey');
            expect(plan, what).toContain('jobs_claimable_idx');
            expect(plan, what).not.toMatch(/Seq Scan on jobs/);
          }
        }
      });
    }
  });
});

describe('a claim in a queue of delayed jobs', () => {
  // Found by running a queue with many delayed jobs: its statistics (taken while they were
  // all in the future) said next to no job is due, so the planner, expecting a claim of one
  // job, joined the UPDATE's rows to the numbered picks by a nested loop that numbered the
  // picks again for every job: a claim of 1,000 compared 1,000,000 rows and took 0.4–1.7 s
  // (500,000 delayed jobs, PostgreSQL 18), where a queue without them took milliseconds.
  it('joins its picks to the jobs it updates once, whatever the statistics say is due', async () => {
    const queue = queueName('delayed');
    const limitedQueue = queueName('delayed-limited');
    await store.queueUpsert({ name: limitedQueue, maxConcurrency: 100_000 });
    const later = new Date(Date.now() + 86_400_000);
    for (const q of [queue, limitedQueue]) {
      for (let i = 0; i < 10; i++) await store.jobSubmitMany({ jobs: jobInputs(q, 1000).map((j) => ({ ...j, runAt: later })) });
    }
    await sql.query('ANALYZE evora.jobs');
    // Due, after the statistics were taken. The claim runs at a time before any job the
    // statistics saw (other tests leave due jobs in the table), with jobs due by then.
    const claimAt = new Date('2001-01-01T00:00:00Z');
    const dueAt = new Date(claimAt.getTime() - 60_000);
    for (const q of [queue, limitedQueue]) await store.jobSubmitMany({ jobs: jobInputs(q, 1000).map((j) => ({ ...j, runAt: dueAt })) });
    for (const [name, q] of [['jobClaim', queue], ['jobClaimLimited', limitedQueue]] as const) {
      await inRolledBackTransaction(async (client) => {
        // PREPARE outlives the rollback (on the pooled connection): a name of this test's own.
        const execute = await prepare(client, name, `delayed_${name}`);
        await client.query('SET LOCAL plan_cache_mode = force_custom_plan'); // what the store's claims run
        const size = 1000;
        const plan = await planOf(
          client,
          execute({ queues: `'{${q}}'`, limit: String(size), workerIds: "'{w}'", now: `'${claimAt.toISOString()}'`, types: 'NULL', slotWorkers: `array_fill(1, ARRAY[${size}])` }),
          { analyze: true },
        );
        expect(plan, name).toMatch(new RegExp(`Update on jobs .*rows=${size}\\b`));
        const removed = [...plan.matchAll(/Rows Removed by Join Filter: (\d+)/g)].map((m) => Number(m[1]));
        expect(Math.max(0, ...removed), `${name}: rows compared and dropped by join filters`).toBeLessThan(10 * size);
        expect(plan, name).not.toMatch(/Seq Scan on jobs/);
      });
    }
  });
});

describe('the outbox by time', () => {
  it("retention, a purge and its dry-run count find the oldest outbox event by job_events_at_idx, not by reading the outbox", async () => {
    await inRolledBackTransaction(async (client) => {
      // A backed-up outbox (the telemetry store away): 20,000 statements' rows.
      await client.query(`INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
        SELECT now() - interval '1 day' + g * interval '1 s', 1, ARRAY[gen_random_uuid()], ARRAY['q'], ARRAY['noop'], ARRAY['completed'::evora.job_event_kind],
               ARRAY['RUNNING'::evora.job_state], ARRAY['COMPLETED'::evora.job_state], ARRAY[1], ARRAY['w'], ARRAY[NULL::float8], ARRAY[5::float8]
        FROM generate_series(1, 20000) g`);
      await client.query('ANALYZE evora.job_events');
      const filter = { states: "'{COMPLETED}'", queue: "'q'", type: 'NULL', errorGroup: 'NULL', finishedBefore: 'NULL', ids: 'NULL' };
      const actor = { actorKind: "'anonymous'", actorTokenId: 'NULL', actorName: "''", auditTarget: "'q'", auditChange: "'{}'" };
      const statements: [string, Record<string, string>][] = [
        ['jobPrune', { now: 'NULL', limit: '1000' }],
        ['jobPurgeMany', { ...filter, cutoff: 'NULL', limit: '1000', now: 'NULL', ...actor }],
        ['jobCountMany', { ...filter, projectedOnly: 'true', retryOnly: 'false', cancelOnly: 'false' }],
      ];
      for (const [name, args] of statements) {
        const execute = await prepare(client, name, `plan_${name}`);
        const plan = await planOf(client, execute(args));
        expect(plan, name).toContain('job_events_at_idx');
        expect(plan, name).not.toMatch(/Seq Scan on job_events/);
      }
    });
  });
});

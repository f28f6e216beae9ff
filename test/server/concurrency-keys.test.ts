import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Concurrency keys, fairly (migration 0009): with max_concurrency_per_key 1, a key whose jobs
 * arrive behind another key's backlog is not starved by it, and RUNNING per key never exceeds
 * the limit. Two servers on one database, four SDK workers of many slots; the fallback poll is
 * a minute, so the jobs only finish in time if a freed key slot wakes the claimers. The order
 * is read from started_at in PostgreSQL.
 */
let a: { address: string };
let b: { address: string };
let sql: pg.Client;

beforeAll(async () => {
  const first = await serverSetup({ pollIntervalMs: '60000' });
  a = first;
  b = await serverSetup({ databaseUrl: first.databaseUrl, pollIntervalMs: '60000' });
  sql = new pg.Client({ connectionString: first.databaseUrl });
  await sql.connect();
});
afterAll(async () => {
  await sql.end();
});

describe('concurrency keys across two servers', () => {
  it("a key with 10 jobs submitted behind another key's 200 has them all started long before that backlog ends; RUNNING per key stays <= 1", async () => {
    const queue = queueName('tenants');
    const big = 200;
    const small = 10;
    const client = new EvoraClient({ address: a.address });
    const clientB = new EvoraClient({ address: b.address });
    await client.upsertQueue(queue, { maxConcurrencyPerKey: 1 });
    await client.submitMany(Array.from({ length: big }, (_, n) => ({ queue, type: 'work', payload: { n }, concurrencyKey: 'big' })));

    const workers: EvoraWorker[] = [];
    for (const [address, name] of [
      [a.address, 'a1'],
      [a.address, 'a2'],
      [b.address, 'b1'],
      [b.address, 'b2'],
    ] as const) {
      const w = new EvoraWorker({ address, workerId: name, queues: [queue], slots: 4 });
      w.handle('work', async () => {
        // A little work, so jobs would overlap if the server let them.
        await new Promise((r) => setTimeout(r, 5));
        return {};
      });
      workers.push(w);
    }

    const samples: { key: string; n: number }[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await sql.query<{ key: string; n: number }>(
          `SELECT concurrency_key AS key, count(*)::int AS n FROM evora.jobs
           WHERE state = 'RUNNING' AND queue = $1 GROUP BY concurrency_key`,
          [queue],
        );
        samples.push(...rows);
      }
    })();

    let bigStartedBeforeSmall = 0;
    try {
      await Promise.all(workers.map((w) => w.start()));
      // The backlog is under way; then the small key's jobs arrive, through both servers.
      await waitFor(
        async () => {
          const { rows } = await sql.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1 AND state = 'COMPLETED'`,
            [queue],
          );
          bigStartedBeforeSmall = rows[0]!.n;
          return rows[0]!.n >= 10;
        },
        { timeoutMs: 30_000, what: 'the backlog to be under way' },
      );
      for (let i = 0; i < small; i++) {
        await (i % 2 === 0 ? client : clientB).submit({ queue, type: 'work', payload: { i }, concurrencyKey: 'small' });
      }
      await waitFor(
        async () => {
          const { rows } = await sql.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1 AND state = 'COMPLETED'`,
            [queue],
          );
          return rows[0]!.n === big + small;
        },
        { timeoutMs: 120_000, what: 'every job completed' },
      );
    } finally {
      sampling = false;
      await sampler;
      await Promise.all(workers.map((w) => w.stop({ timeoutMs: 5_000 })));
      client.close();
      clientB.close();
    }

    // Per key, never more than one RUNNING (sampled throughout), and both keys were seen running.
    expect(samples.some((s) => s.key === 'big')).toBe(true);
    expect(Math.max(...samples.map((s) => s.n))).toBeLessThanOrEqual(1);
    // Every job ran once, so started_at is each job's one start.
    const { rows: attempts } = await sql.query<{ n: number; max_attempt: number }>(
      `SELECT count(*)::int AS n, max(attempt) AS max_attempt FROM evora.jobs WHERE queue = $1`,
      [queue],
    );
    expect(attempts).toEqual([{ n: big + small, max_attempt: 1 }]);
    // The big key's starts before the small key's last start: the ones before the small jobs
    // arrived, plus about one per small job (the two keys alternate). First in, first out
    // would have started the whole backlog (200) first.
    const { rows } = await sql.query<{ before: number }>(
      `SELECT count(*)::int AS before FROM evora.jobs
       WHERE queue = $1 AND concurrency_key = 'big'
         AND started_at < (SELECT max(started_at) FROM evora.jobs WHERE queue = $1 AND concurrency_key = 'small')`,
      [queue],
    );
    const before = rows[0]!.before;
    expect(before).toBeLessThan(bigStartedBeforeSmall + 3 * small);
    expect(before).toBeLessThan(big / 2);
  }, 180_000);
});

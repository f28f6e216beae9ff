/**
 * pg-boss: worker processes call `work()` (bench/workers/pgboss.ts); producers use `send`
 * and `insert` from the harness process. pg-boss 10 keeps completed jobs in its job table
 * (partitioned by queue) until they are archived (archiveCompletedAfterSeconds, 12 h by
 * default), so the flat-cost scenario seeds completed rows into the queue's partition.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import PgBoss from 'pg-boss';
import pg from 'pg';
import { configWith, type OpenContext, type SystemDriver, type SystemInstance } from './types.js';

const require = createRequire(import.meta.url);

/** Its best on this machine (docs/benchmarks.md, "How each configuration was chosen"). */
export const PGBOSS_DEFAULTS = {
  processes: 2,
  /** work() loops per process (each fetches batchSize at a time). */
  workPerProcess: 1,
  batchSize: 1000,
  /** The minimum pg-boss allows. */
  pollingIntervalSeconds: 0.5,
  maxPoolSize: 10,
};

function version(): string {
  const p = require.resolve('pg-boss/package.json');
  return (JSON.parse(readFileSync(p, 'utf8')) as { version: string }).version;
}

export function pgBossDriver(overrides: Record<string, string>): SystemDriver {
  const config = configWith(PGBOSS_DEFAULTS, overrides);
  const processes = Number(config.processes);
  return {
    name: 'pg-boss',
    unavailable: null,
    version: version(),
    processes,
    config,
    describe: () =>
      `${processes} process${processes > 1 ? 'es' : ''} × ${config.workPerProcess} work() with batchSize ${config.batchSize}, ` +
      `pollingIntervalSeconds ${config.pollingIntervalSeconds}, pool ${config.maxPoolSize}, supervise/schedule off in workers; ` +
      `enqueue with send / insert of 1000`,
    open: (ctx) => openPgBoss(ctx),
  };
}

async function openPgBoss(ctx: OpenContext): Promise<SystemInstance> {
  const boss = new PgBoss({ connectionString: ctx.databaseUrl, max: 4, supervise: false, schedule: false });
  let closing = false;
  boss.on('error', (err) => {
    if (!closing) process.stderr.write(`pg-boss error: ${String(err)}\n`);
  });
  await boss.start();
  const queue = 'bench';
  await boss.createQueue(queue);
  const db = new pg.Pool({ connectionString: ctx.databaseUrl, max: 2 });
  db.on('error', () => undefined);
  return {
    queue,
    target: { databaseUrl: ctx.databaseUrl },
    serverPid: null,
    submitOne: async (payload) => {
      await boss.send(queue, payload);
    },
    submitBatch: async (payloads) => {
      await boss.insert(payloads.map((data) => ({ name: queue, data })));
    },
    seedFinished: async (n) => {
      await db.query(
        `INSERT INTO pgboss.job (name, data, state, created_on, started_on, completed_on, output)
         SELECT $1, '{}'::jsonb, 'completed', now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour', NULL
         FROM generate_series(1, $2)`,
        [queue, n],
      );
      await db.query('VACUUM ANALYZE pgboss.job');
      return `${n.toLocaleString('en-US')} completed rows in pgboss.job (the queue's partition; archived only after 12 h by default)`;
    },
    analyze: async () => {
      await db.query('ANALYZE pgboss.job');
    },
    remaining: async () =>
      Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM pgboss.job WHERE name = $1 AND state < 'completed'`, [queue])).rows[0]!.n),
    close: async () => {
      closing = true;
      await boss.stop({ graceful: false, wait: true, timeout: 2000 });
      await db.end();
    },
  };
}

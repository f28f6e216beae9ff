/**
 * graphile-worker: worker processes call `run()` (bench/workers/graphile.ts); producers use
 * WorkerUtils (`addJob`, `addJobs`) from the harness process.
 *
 * It deletes a job when it completes, so "1,000,000 finished jobs" cannot exist in its
 * table by design. What can stay there are permanently failed jobs (attempts used up),
 * which is what the flat-cost scenario seeds instead.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { makeWorkerUtils } from 'graphile-worker';
import pg from 'pg';
import { configWith, type OpenContext, type SystemDriver, type SystemInstance } from './types.js';

const require = createRequire(import.meta.url);

/** Its best on this machine within the local queue range (docs/benchmarks.md, "How each configuration was chosen"). */
export const GRAPHILE_DEFAULTS = {
  processes: 2,
  concurrency: 16,
  /** Jobs locked and pulled down per fetch (0.17's localQueue; -1 disables it). */
  localQueueSize: 1000,
  completeJobBatchDelay: 10,
  failJobBatchDelay: 10,
  pollInterval: 2000,
  maxPoolSize: 10,
  preparedStatements: true,
};

function version(): string {
  const p = require.resolve('graphile-worker/package.json');
  return (JSON.parse(readFileSync(p, 'utf8')) as { version: string }).version;
}

export function graphileDriver(overrides: Record<string, string>): SystemDriver {
  const config = configWith(GRAPHILE_DEFAULTS, overrides);
  const processes = Number(config.processes);
  return {
    name: 'graphile-worker',
    unavailable: null,
    version: version(),
    processes,
    config,
    describe: () =>
      `${processes} process${processes > 1 ? 'es' : ''} × run({ concurrency: ${config.concurrency} }), ` +
      `localQueue.size ${config.localQueueSize}, completeJobBatchDelay ${config.completeJobBatchDelay}, ` +
      `failJobBatchDelay ${config.failJobBatchDelay}, preparedStatements ${config.preparedStatements}, maxPoolSize ${config.maxPoolSize}, ` +
      `LISTEN/NOTIFY (pollInterval ${config.pollInterval} ms as fallback); enqueue with WorkerUtils addJob / addJobs of 1000`,
    open: (ctx) => openGraphile(ctx),
  };
}

async function openGraphile(ctx: OpenContext): Promise<SystemInstance> {
  // Our own pools, with error handlers: dropping the database ends their connections.
  const utilsPool = new pg.Pool({ connectionString: ctx.databaseUrl, max: 10 });
  utilsPool.on('error', () => undefined);
  utilsPool.on('connect', (client) => client.on('error', () => undefined));
  const utils = await makeWorkerUtils({ pgPool: utilsPool });
  await utils.migrate();
  const db = new pg.Pool({ connectionString: ctx.databaseUrl, max: 2 });
  db.on('error', () => undefined);
  return {
    queue: 'noop',
    target: { databaseUrl: ctx.databaseUrl },
    serverPid: null,
    submitOne: async (payload) => {
      await utils.addJob('noop', payload);
    },
    submitBatch: async (payloads) => {
      await utils.addJobs(payloads.map((payload) => ({ identifier: 'noop', payload })));
    },
    seedFinished: async (n) => {
      // Permanently failed jobs (attempts = max_attempts) of another task: they stay in the
      // table, and graphile-worker must step over them. Completed jobs would be deleted.
      await db.query(`INSERT INTO graphile_worker._private_tasks (identifier) VALUES ('seeded') ON CONFLICT DO NOTHING`);
      await db.query(
        `INSERT INTO graphile_worker._private_jobs (task_id, payload, priority, run_at, attempts, max_attempts, last_error, created_at, updated_at)
         SELECT (SELECT id FROM graphile_worker._private_tasks WHERE identifier = 'seeded'), '{}'::json, 0,
                now() - interval '1 hour', 25, 25, 'seeded: permanently failed', now() - interval '1 hour', now() - interval '1 hour'
         FROM generate_series(1, $1)`,
        [n],
      );
      await db.query('VACUUM ANALYZE graphile_worker._private_jobs');
      return `${n.toLocaleString('en-US')} permanently failed jobs (attempts = max_attempts) in graphile_worker._private_jobs: completed jobs are deleted by design`;
    },
    analyze: async () => {
      await db.query('ANALYZE graphile_worker._private_jobs');
    },
    remaining: async () =>
      Number(
        (
          await db.query<{ n: string }>(
            `SELECT count(*) AS n FROM graphile_worker._private_jobs j JOIN graphile_worker._private_tasks t ON t.id = j.task_id
             WHERE t.identifier = 'noop' AND j.attempts < j.max_attempts`,
          )
        ).rows[0]!.n,
      ),
    close: async () => {
      await utils.release();
      await utilsPool.end();
      await db.end();
    },
  };
}

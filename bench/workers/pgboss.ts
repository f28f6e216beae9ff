/**
 * pg-boss worker process: `work()` with batchSize and the shortest polling interval, on a
 * database adapter that counts the rows of its completeJobs statement when it returns
 * (pg-boss completes each fetched batch in one statement, without awaiting it).
 */
import PgBoss from 'pg-boss';
import pg from 'pg';
import type { SystemWorker, WorkerHooks, WorkerInit } from '../lib/protocol.js';

export function pgBossWorker(init: WorkerInit, hooks: WorkerHooks): SystemWorker {
  const c = init.config;
  const pool = new pg.Pool({ connectionString: init.target.databaseUrl!, max: Number(c.maxPoolSize ?? 10) });
  pool.on('error', () => undefined);
  const db = {
    async executeSql(text: string, values?: unknown[]) {
      const result = await pool.query(text, values).catch((err: unknown) => {
        if (process.env.BENCH_DEBUG) process.stderr.write(`pg-boss query failed: ${String(err)}: ${text.slice(0, 80)}\n`);
        throw err;
      });
      if (text.includes("state = 'completed'") && text.includes('SELECT COUNT(*) FROM results')) {
        hooks.done(Number((result.rows[0] as { count: string } | undefined)?.count ?? 0));
      }
      return result;
    },
  };
  const boss = new PgBoss({ db, supervise: false, schedule: false, migrate: false });
  let closing = false;
  boss.on('error', (err) => {
    if (!closing) process.stderr.write(`pg-boss worker error: ${String(err)}\n`);
  });
  const workers = Number(c.workPerProcess ?? 1);
  return {
    prepare: async () => {
      await boss.start();
    },
    go: async () => {
      for (let i = 0; i < workers; i++) {
        await boss.work(
          init.queue,
          { batchSize: Number(c.batchSize ?? 500), pollingIntervalSeconds: Number(c.pollingIntervalSeconds ?? 0.5) },
          async (jobs) => {
            for (const job of jobs) hooks.started(job.data);
          },
        );
      }
    },
    stop: async () => {
      closing = true;
      await boss.stop({ graceful: true, wait: true, timeout: 5000 });
      await pool.end();
    },
  };
}

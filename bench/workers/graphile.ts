/**
 * graphile-worker process: `run()` with a no-op task. graphile-worker deletes a job when it
 * completes (in batches with completeJobBatchDelay), so a completion counts when its
 * DELETE has returned: the pool we hand it taps every client's queries for that statement.
 */
import { Logger, run, type Runner } from 'graphile-worker';
import pg from 'pg';
import type { SystemWorker, WorkerHooks, WorkerInit } from '../lib/protocol.js';

const COMPLETE_SQL = /^\s*(with j as \(\s*)?delete from "?graphile_worker"?\._private_jobs/i;

type QueryFn = (...args: unknown[]) => unknown;

export function graphileWorker(init: WorkerInit, hooks: WorkerHooks): SystemWorker {
  const c = init.config;
  const maxPoolSize = Number(c.maxPoolSize ?? 10);
  const pgPool = new pg.Pool({ connectionString: init.target.databaseUrl!, max: maxPoolSize });
  pgPool.on('error', () => undefined);
  pgPool.on('connect', (client) => {
    client.on('error', () => undefined);
    const query = client.query.bind(client) as QueryFn;
    (client as unknown as { query: QueryFn }).query = (...args: unknown[]) => {
      const first = args[0] as string | { text?: string } | undefined;
      const text = typeof first === 'string' ? first : first?.text ?? '';
      const result = query(...args);
      if (COMPLETE_SQL.test(text) && result && typeof (result as Promise<unknown>).then === 'function') {
        void (result as Promise<{ rowCount: number | null }>).then(
          (r) => hooks.done(r.rowCount ?? 0),
          () => undefined,
        );
      }
      return result;
    };
  });
  let runner: Runner | null = null;
  const localQueueSize = Number(c.localQueueSize ?? -1);
  return {
    prepare: async () => undefined,
    go: async () => {
      runner = await run({
        pgPool,
        concurrency: Number(c.concurrency ?? 10),
        noHandleSignals: true,
        pollInterval: Number(c.pollInterval ?? 2000),
        // Errors only: its per-job INFO lines would cost it throughput.
        logger: new Logger(() => (level, message) => {
          if (level === 'error') process.stderr.write(`graphile-worker: ${message}\n`);
        }),
        taskList: {
          noop: async (payload) => {
            hooks.started(payload);
          },
        },
        preset: {
          worker: {
            preparedStatements: c.preparedStatements !== false,
            ...(localQueueSize > 1 ? { localQueue: { size: localQueueSize } } : {}),
            completeJobBatchDelay: Number(c.completeJobBatchDelay ?? -1),
            failJobBatchDelay: Number(c.failJobBatchDelay ?? -1),
          },
        },
      });
    },
    stop: async () => {
      await runner?.stop();
      await pgPool.end();
    },
  };
}

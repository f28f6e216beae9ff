/**
 * BullMQ on Redis: worker processes run a Worker (bench/workers/bullmq.ts); producers use
 * Queue.add / addBulk from the harness process. Skipped, with the reason, when no
 * redis-server is on PATH. Each scenario starts from an empty Redis (FLUSHALL).
 * Completed jobs are kept (BullMQ's default, removeOnComplete off), as the PostgreSQL
 * systems keep theirs; the flat-cost scenario seeds completed job hashes and the completed
 * sorted set with a server-side script.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Queue } from 'bullmq';
import { Redis as IORedis } from 'ioredis';
import type { Redis } from '../lib/infra.js';
import { configWith, type OpenContext, type SystemDriver, type SystemInstance } from './types.js';

const require = createRequire(import.meta.url);

/** Its best on this machine (docs/benchmarks.md, "How each configuration was chosen"). */
export const BULLMQ_DEFAULTS = {
  processes: 1,
  concurrency: 100,
  /** false: keep completed jobs (BullMQ's default); true: remove them at once. */
  removeOnComplete: false,
};

function version(): string {
  const p = require.resolve('bullmq/package.json');
  return (JSON.parse(readFileSync(p, 'utf8')) as { version: string }).version;
}

const SEED = `
local prefix = KEYS[1]
local from = tonumber(ARGV[1])
local to = tonumber(ARGV[2])
local ts = ARGV[3]
for i = from, to do
  local id = 's' .. i
  redis.call('HSET', prefix .. id, 'name', 'noop', 'data', '{}', 'opts', '{"attempts":0}', 'timestamp', ts, 'delay', '0',
    'priority', '0', 'processedOn', ts, 'finishedOn', ts, 'returnvalue', 'null', 'atm', '1', 'ats', '1')
  redis.call('ZADD', prefix .. 'completed', ts, id)
end
return to - from + 1
`;

export function bullmqDriver(overrides: Record<string, string>, redis: Redis | null, redisMissing: string | null): SystemDriver {
  const config = configWith(BULLMQ_DEFAULTS, overrides);
  const processes = Number(config.processes);
  return {
    name: 'bullmq',
    unavailable: redis ? null : redisMissing ?? 'no Redis',
    version: version(),
    processes,
    config,
    describe: () =>
      `${processes} process${processes > 1 ? 'es' : ''} × Worker concurrency ${config.concurrency}, ` +
      `${config.removeOnComplete ? 'removeOnComplete' : 'completed jobs kept (default)'}; ` +
      `Redis ${redis?.version ?? '?'} (${redis ? redis.flags.join(' ') : ''}); enqueue with add / addBulk of 1000`,
    open: (ctx) => openBullmq(ctx),
  };
}

async function openBullmq(ctx: OpenContext): Promise<SystemInstance> {
  const r = ctx.redis!;
  const conn = new IORedis({ host: r.host, port: r.port, maxRetriesPerRequest: null });
  await conn.flushall();
  const queueName = 'bench';
  const queue = new Queue(queueName, { connection: { host: r.host, port: r.port } });
  await queue.waitUntilReady();
  return {
    queue: queueName,
    target: { redis: { host: r.host, port: r.port } },
    serverPid: null,
    submitOne: async (payload) => {
      await queue.add('noop', payload);
    },
    submitBatch: async (payloads) => {
      await queue.addBulk(payloads.map((data) => ({ name: 'noop', data })));
    },
    seedFinished: async (n) => {
      const ts = String(Date.now() - 3_600_000);
      for (let from = 1; from <= n; from += 50_000) {
        await conn.eval(SEED, 1, `bull:${queueName}:`, from, Math.min(n, from + 49_999), ts);
      }
      return `${n.toLocaleString('en-US')} completed job hashes and the completed sorted set in Redis`;
    },
    analyze: async () => undefined,
    remaining: async () => {
      const c = await queue.getJobCounts('wait', 'active', 'delayed', 'prioritized', 'paused', 'waiting-children');
      return Object.values(c).reduce((a, b) => a + b, 0);
    },
    close: async () => {
      await queue.close();
      await conn.flushall();
      conn.disconnect();
    },
  };
}

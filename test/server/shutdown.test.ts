import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { configLoad } from '../../src/server/config.js';
import { freePort } from '../../src/server/embedded-postgres.js';
import { JobState } from '../../src/gen/evora/v1/job.js';
import { silentLogger } from '../../src/logger.js';
import { serverStart } from '../../src/server/server.js';
import { testDatabaseCreate, type TestDatabase } from '../helpers/db.js';
import { queueName } from '../helpers/factories.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { call, clientsFor } from '../helpers/server-setup.js';
import { DrainReason } from '../../src/gen/evora/v1/worker.js';
import { waitFor } from '../helpers/wait.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabaseCreate();
});
afterAll(async () => {
  await db.drop();
});

describe('graceful shutdown', () => {
  it('tells workers to drain, waits for their in-flight completions to commit, then stops', async () => {
    const config = configLoad({ databaseUrl: db.url, host: '127.0.0.1', port: '0', httpPort: '0', shutdownTimeoutMs: '10000' }, {});
    const server = await serverStart(config, silentLogger());
    const clients = clientsFor(server.address);
    const w = new RawWorker(clients);
    let stopped: Promise<void> | null = null;
    try {
      const queue = queueName();
      const { job } = await call(clients.jobs, 'submitJob', { queue, type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
      await w.hello('busy', [queue], 2);
      await w.until(() => w.jobs.length === 1);

      stopped = server.stop();
      await w.until(() => w.received.some((r) => r.msg?.$case === 'drain'));
      // The drain says why in a code a worker in any language can act on.
      expect(w.messages('drain')[0]?.code).toBe(DrainReason.DRAIN_REASON_SERVER_SHUTDOWN);
      // A job submitted now is not pushed to the draining worker.
      await call(clients.jobs, 'submitJob', { queue, type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) }).catch(() => undefined);
      w.complete(w.jobs[0]!, { finished: 'during shutdown' });
      await w.until(() => w.acks(job!.id).length === 1);
      expect(w.acks(job!.id)[0]?.accepted).toBe(true);
      await stopped;
      expect(w.jobs).toHaveLength(1);

      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      const { rows } = await client.query(`SELECT state, result FROM evora.jobs WHERE id = $1`, [job!.id]);
      const running = await client.query(`SELECT count(*)::int AS n FROM evora.jobs WHERE state = 'RUNNING' AND locked_until IS NULL`);
      await client.end();
      expect(rows[0]).toEqual({ state: 'COMPLETED', result: { finished: 'during shutdown' } });
      expect(running.rows[0].n).toBe(0);
    } finally {
      // Whatever failed above, the server stops and the clients close.
      w.close();
      clients.close();
      await (stopped ?? server.stop());
    }
  });

  it('`evora serve` logs where it listens, and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', String(port)], {
      env: { ...process.env, DATABASE_URL: db.url, EVORA_LOG_PRETTY: '0', EVORA_HTTP_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await waitFor(() => out.includes(`Evora listening on 127.0.0.1:${port}`), { timeoutMs: 30_000, what: 'the listen line' });
      const clients = clientsFor(`127.0.0.1:${port}`);
      const res = await call(clients.jobs, 'submitJob', { queue: queueName(), type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
      expect(res.job?.state).toBe(JobState.JOB_STATE_PENDING);
      clients.close();
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(out).toMatch(/"msg":"stopped"/);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

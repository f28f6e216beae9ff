import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logger.js';
import { configLoad } from '../../src/server/config.js';
import { embeddedPostgresStart, freePort, type EmbeddedPostgresHandle } from '../../src/server/embedded-postgres.js';
import { serverStart, type EvoraServer } from '../../src/server/server.js';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A worker comes back within a few seconds of the server after a PostgreSQL outage and a
 * server restart, however long the outage let its reconnect backoff grow: the backoff is
 * capped low (2 s by default), and while the server cannot be reached the worker also
 * reconnects as soon as its channel finds the server again (a new stream fails at once
 * while the channel is in TRANSIENT_FAILURE: waiting out both backoffs would add them up).
 *
 * The server runs on a PostgreSQL of this file's own (a private data folder and port), so
 * stopping it disturbs no other test file. No timing is asserted; the recovery time is
 * printed for the record.
 */

let dataDir: string;
let pg: EmbeddedPostgresHandle;
let pgPort: number;
beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'evora-outage-pg-'));
  pgPort = await freePort();
  pg = await embeddedPostgresStart({ dataDir, port: pgPort, postgresFlags: ['-c', 'fsync=off'] });
});
afterAll(async () => {
  await pg.stop();
  await rm(dataDir, { recursive: true, force: true });
});

describe('EvoraWorker after a PostgreSQL outage and a server restart', () => {
  it('takes new work again soon after the server is back, with the default reconnect settings', async () => {
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    const { migrate } = await import('../../src/store/migrate.js');
    await migrate(pg.url);
    const config = configLoad({ databaseUrl: pg.url, host: '127.0.0.1', port: String(port), httpPort: '0', pollIntervalMs: '200', electionIntervalMs: '200' }, {});
    let server: EvoraServer | null = await serverStart(config, silentLogger());
    const queue = queueName('outage');
    const client = new EvoraClient({ address, deadlineMs: 5_000 });
    const worker = new EvoraWorker({ address, queues: [queue], slots: 2 });
    const done: string[] = [];
    worker.handle('t', (job) => {
      done.push(job.id);
      return {};
    });
    const delays: number[] = [];
    worker.on('disconnected', ({ retryInMs }) => delays.push(retryInMs));
    try {
      await worker.start();
      const first = await client.submit({ queue, type: 't', payload: {} });
      await waitFor(() => done.includes(first.job.id), { what: 'the first job' });

      // The outage: the server stops, then PostgreSQL.
      await server.stop();
      server = null;
      await pg.stop();
      // Long enough for the backoff to reach its cap (200 ms doubling to 2 s).
      await waitFor(() => delays.length >= 7, { timeoutMs: 60_000, what: 'reconnect attempts to fail for a while' });
      expect(Math.max(...delays)).toBeGreaterThan(1_000);

      pg = await embeddedPostgresStart({ dataDir, port: pgPort, postgresFlags: ['-c', 'fsync=off'] });
      server = await serverStart(config, silentLogger());
      const back = Date.now();
      const second = await client.submit({ queue, type: 't', payload: {} });
      await waitFor(() => done.includes(second.job.id), { timeoutMs: 60_000, what: 'a new job done after the restart' });
      console.log(`[measure] worker took a new job ${Date.now() - back} ms after the server was back (backoff had reached ${Math.max(...delays)} ms)`);
      await waitFor(() => worker.stats().held === 0, { what: "the new job's ack" });
      expect(worker.stats()).toMatchObject({ connected: true, held: 0, awaitingAck: 0 });
    } finally {
      await worker.stop({ timeoutMs: 1_000, graceMs: 1_000 });
      client.close();
      await server?.stop();
    }
  });
});

import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logger.js';
import { configLoad } from '../../src/server/config.js';
import { freePort } from '../../src/server/embedded-postgres.js';
import { serverStart, type EvoraServer } from '../../src/server/server.js';
import { EvoraClient } from '../../src/sdk/index.js';
import { testDatabaseCreate, type TestDatabase } from '../helpers/db.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

/**
 * An EvoraClient is back soon after its server, however long the outage let its channel's
 * reconnect backoff grow: the SDK caps it at 2 s (grpc-js's own default grows to 120 s, and
 * a client stayed UNAVAILABLE for up to two minutes after the server was back).
 *
 * The outage: the server stops, and a listener on its port takes each connection and
 * closes it, counting them, so the test waits for the channel's sixth reconnect attempt (a
 * condition) rather than a time: by then grpc-js's default backoff is ~17 s, the SDK's 2 s.
 * Then the server starts again on the same port. No timing is asserted beyond waitFor's bound.
 */

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabaseCreate();
});
afterAll(async () => {
  await db.drop();
});

/** A listener on `port` that closes every connection at once, counting them. */
async function refuser(port: number): Promise<{ attempts: () => number; close: () => Promise<void> }> {
  let attempts = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    attempts++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.destroy();
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
  return {
    attempts: () => attempts,
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

describe('EvoraClient after its server was away', () => {
  it('reaches the restarted server within about 2 s, however long the outage grew its reconnect backoff', async () => {
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    const config = configLoad({ databaseUrl: db.url, host: '127.0.0.1', port: String(port), httpPort: '0', pollIntervalMs: '200', electionIntervalMs: '200' }, {});
    let server: EvoraServer | null = await serverStart(config, silentLogger());
    const client = new EvoraClient({ address, deadlineMs: 1_000 });
    let away: Awaited<ReturnType<typeof refuser>> | null = null;
    try {
      const queue = queueName('back');
      await client.submit({ queue, type: 't' });

      await server.stop();
      server = null;
      away = await refuser(port);
      // Calls keep the channel trying; each fails at once while it waits out its backoff.
      await waitFor(
        async () => {
          await client.listQueues().catch(() => undefined);
          return away!.attempts() >= 6;
        },
        { timeoutMs: 60_000, what: "the channel's sixth reconnect attempt" },
      );
      await away.close();
      away = null;

      server = await serverStart(config, silentLogger());
      const back = Date.now();
      const { created } = await waitFor(() => client.submit({ queue, type: 't' }), { timeoutMs: 8_000, what: 'a submit to succeed after the restart' });
      expect(created).toBe(true);
      console.log(`[measure] the client reached the server again ${Date.now() - back} ms after it was back`);
    } finally {
      client.close();
      await away?.close();
      await server?.stop();
    }
  });
});

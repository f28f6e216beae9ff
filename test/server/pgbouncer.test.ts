import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { poolerDecide, poolerDetect, storeClientClass } from '../../src/store/connections.js';
import { migrate } from '../../src/store/migrate.js';
import { Store } from '../../src/store/store.js';
import { testClusterUrl, testDatabaseCreate, type TestDatabase } from '../helpers/db.js';
import { queueName } from '../helpers/factories.js';
import { findPgbouncer, pgbouncerStart, type Pgbouncer } from '../helpers/pgbouncer.js';
import { serverSetup, serverSetupRoute } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';
import { expectGivenUpStatementCancelled } from '../helpers/lock-waits.js';
import { pino } from 'pino';
import { configLoad } from '../../src/server/config.js';
import { serverStart } from '../../src/server/server.js';
import { assertTools, skipUnless, titled } from '../interop/toolchain.js';

/**
 * Evora through a real pgbouncer in transaction mode (issue 15, point 6): DATABASE_URL is
 * pgbouncer (POOL_SIZE server connections per database, shared by every client), the direct
 * URL is PostgreSQL. The API tests (test/grpc/api.test.ts) and the SDK worker tests
 * (test/sdk/worker.test.ts) run here again, unchanged, on servers routed through
 * pgbouncer, whose databases default to a time zone other than UTC; the tests below check
 * what makes that work, and that without it the pooler breaks the store.
 */

/**
 * Server connections per database. Small, so that a server's 10 pool connections really
 * share them; not 3: the API test that holds the outbox's lock while a claim waits for it
 * also blocks the leader's sweeper and projector, and its next call needs a fourth
 * connection (with 3, it waits for pgbouncer's query_wait_timeout).
 */
const POOL_SIZE = 5;

const tool = findPgbouncer();
const skip = skipUnless('the pgbouncer tests', tool);

if (skip) {
  it.skip(titled('Evora through pgbouncer in transaction mode', tool), () => undefined);
} else {
  let bouncer: Pgbouncer | null = null;
  const adminUrl = testClusterUrl();
  /** Started on first use (by a server's route or a test), stopped after the file. */
  const bouncerUp = async (): Promise<Pgbouncer> => {
    assertTools(tool);
    bouncer ??= await pgbouncerStart({
      path: (tool as { path: string }).path,
      upstreamUrl: adminUrl,
      defaultPoolSize: POOL_SIZE,
      databases: oneConnectionAliases,
    });
    return bouncer;
  };
  /** Aliases with a single server connection, added before pgbouncer starts (the repro test's). */
  const oneConnectionAliases: Record<string, { dbname: string; poolSize: number }> = {};
  // A database of the file's own for the store-level tests, made before pgbouncer starts
  // so that its one-connection alias is in the ini.
  let db: TestDatabase;
  beforeAll(async () => {
    db = await testDatabaseCreate();
    const name = new URL(db.url).pathname.slice(1);
    oneConnectionAliases[`${name}_one`] = { dbname: name, poolSize: 1 };
    await nonUtcDefault(db.url);
  });
  afterAll(async () => {
    serverSetupRoute(null);
    await db?.drop();
  });
  // Registered first, so it runs last (after hooks run in reverse): after every server stops.
  afterAll(async () => bouncer?.stop());

  serverSetupRoute(async (databaseUrl) => {
    await nonUtcDefault(databaseUrl);
    return { databaseUrl: (await bouncerUp()).through(databaseUrl), directDatabaseUrl: databaseUrl };
  });
  await import('../grpc/api.test.js');
  await import('../sdk/worker.test.js');

  describe(`through pgbouncer (transaction mode, ${POOL_SIZE} server connections)`, () => {
    it('auto detects the pooler; without a direct URL too', async () => {
      const b = await bouncerUp();
      expect(await poolerDetect(db.url)).toBe(false);
      expect(await poolerDetect(b.through(db.url))).toBe(true);
      expect(await poolerDecide({ pooler: 'auto', connectionString: b.through(db.url) })).toMatchObject({ pooled: true });
      expect(await poolerDecide({ pooler: 'auto', connectionString: db.url })).toMatchObject({ pooled: false });
      expect(await poolerDecide({ pooler: 'auto', connectionString: db.url, directConnectionString: db.url })).toMatchObject({ pooled: false });
    });

    it('without it, named prepared statements collide on a shared server connection; with it, the same calls succeed', async () => {
      const b = await bouncerUp();
      const one = b.through(db.url, { database: `${new URL(db.url).pathname.slice(1)}_one` });
      const queue = queueName();
      // Two store connections, one server connection: the second Parse of evora_job_claim
      // lands where the first one left it.
      const named = new Store({ connectionString: one, maxConnections: 2, pooled: false });
      try {
        const claims = await Promise.allSettled([0, 1].map(() => named.jobClaim({ queues: [queue], limit: 1, workerId: 'w' })));
        const errors = claims.flatMap((c) => (c.status === 'rejected' ? [(c.reason as Error).message] : []));
        expect(errors).toEqual([expect.stringMatching(/prepared statement "evora_job_claim" already exists/)]);
      } finally {
        await named.close();
      }
      const { store: unnamed, decision } = await Store.open({ connectionString: one, maxConnections: 2 });
      try {
        expect(decision.pooled).toBe(true);
        for (let round = 0; round < 3; round++) {
          const claims = await Promise.all([0, 1].map(() => unnamed.jobClaim({ queues: [queue], limit: 1, workerId: 'w' })));
          expect(claims).toEqual([[], []]);
        }
      } finally {
        await unnamed.close();
      }
    });

    it('the store sessions run in UTC whatever the database default, as pgbouncer sets TimeZone, a parameter it tracks', async () => {
      const b = await bouncerUp();
      const Client = storeClientClass({ namedStatements: false });
      for (const url of [db.url, b.through(db.url)]) {
        const store = new Client({ connectionString: url });
        const plain = new pg.Client({ connectionString: url });
        await Promise.all([store.connect(), plain.connect()]);
        try {
          // Interleaved, so that through pgbouncer both use the same few server connections.
          for (let i = 0; i < 3; i++) {
            expect((await store.query<{ TimeZone: string }>('SHOW TimeZone')).rows[0]!.TimeZone).toBe('UTC');
            expect((await plain.query<{ TimeZone: string }>('SHOW TimeZone')).rows[0]!.TimeZone).toBe('America/New_York');
          }
        } finally {
          await Promise.all([store.end(), plain.end()]);
        }
      }
    });

    it('a server whose DATABASE_URL is the pooler, with no direct URL, is refused at start in one line', async () => {
      // Before, it started: LISTEN and the leader's session lock went through pgbouncer, and
      // four servers on one database were all elected leader at once.
      const b = await bouncerUp();
      for (const pooler of ['auto', 'transaction']) {
        const config = configLoad({ host: '127.0.0.1', port: '0', httpPort: '0', databaseUrl: b.through(db.url), dbPooler: pooler }, {});
        const start = serverStart(config, pino({ level: 'silent' }), { signal: AbortSignal.timeout(30_000) });
        await expect(start, pooler).rejects.toThrow(/^a pooler sits on DATABASE_URL \(.*\) and EVORA_DIRECT_DATABASE_URL is not set: LISTEN and the leader's lock cannot go through a transaction pooler/);
      }
    });

    it('asynchronous claim commits are refused with a pooler (a session setting pgbouncer does not keep)', async () => {
      const b = await bouncerUp();
      await expect(Store.open({ connectionString: b.through(db.url), claimAsyncCommit: true })).rejects.toThrow(
        /asynchronous claim commits .* a transaction pooler does not keep/,
      );
    });

    // The store gives a statement up after EVORA_DB_QUERY_TIMEOUT_MS and asks PostgreSQL to
    // cancel it (connections.ts). It closed the connection at once, before the cancel request
    // got to pgbouncer, which then had no such client and dropped it: behind a LOCK TABLE
    // every statement given up stayed waiting in PostgreSQL, one more per timeout.
    it('a statement the store gives up is cancelled in PostgreSQL through it too, not left waiting for the lock', async () => {
      const b = await bouncerUp();
      const store = new Store({ connectionString: b.through(db.url), pooled: true, maxConnections: 1, queryTimeoutMs: 300 });
      try {
        await expectGivenUpStatementCancelled(store, db.url);
      } finally {
        await store.close();
      }
    });

    it('migrations run through it too (one transaction, a transaction-level lock)', async () => {
      const b = await bouncerUp();
      const empty = await testDatabaseCreate({ empty: true });
      try {
        const applied = await migrate(b.through(empty.url));
        expect(applied.length).toBeGreaterThan(0);
        expect(await migrate(b.through(empty.url))).toEqual([]);
      } finally {
        await empty.drop();
      }
    });

    it('an SDK worker drains 300 jobs through a server whose 12 pool connections share a few; LISTEN and the leader lock go direct', async () => {
      const { server, address, databaseUrl } = await serverSetup({ dbPoolSize: '12' });
      expect(server.store.options.pooled).toBe(true);
      const client = new EvoraClient({ address });
      const queue = queueName();
      const worker = new EvoraWorker({ address, workerId: 'drainer', queues: [queue], slots: 16 });
      let failures = 0;
      worker.on('jobFinished', (o) => {
        if (o.outcome !== 'completed') failures++;
      });
      worker.handle('n', (job) => ({ n: (job.payload as { n: number }).n }));
      try {
        for (let i = 0; i < 300; i += 50) {
          await client.submitMany(Array.from({ length: 50 }, (_, k) => ({ queue, type: 'n', payload: { n: i + k } })));
        }
        await worker.start();
        await waitFor(async () => (await client.queueStats(queue)).counts.COMPLETED === 300, { timeoutMs: 60_000, what: '300 jobs completed (as telemetry counts them)' });
        expect(failures).toBe(0);
        const done = await client.list({ queue, states: ['COMPLETED'], pageSize: 500 });
        expect(done.jobs).toHaveLength(300);

        const b = await bouncerUp();
        const name = new URL(databaseUrl).pathname.slice(1);
        const pools = await b.admin<{ database: string; sv_active: string; sv_idle: string; sv_used: string }>('SHOW POOLS');
        const pool = pools.find((p) => p.database === name)!;
        expect(Number(pool.sv_active) + Number(pool.sv_idle) + Number(pool.sv_used)).toBeLessThanOrEqual(POOL_SIZE);
        const clients = await b.admin<{ database: string; application_name: string }>('SHOW CLIENTS');
        const names = new Set(clients.filter((c) => c.database === name).map((c) => c.application_name));
        expect([...names]).toEqual(['evora']);
        // The listener and the leader hold their sessions on PostgreSQL itself.
        const direct = new pg.Client({ connectionString: databaseUrl });
        await direct.connect();
        try {
          const { rows } = await direct.query<{ application_name: string }>(
            `SELECT application_name FROM pg_stat_activity WHERE datname = current_database() AND application_name IN ('evora-listener', 'evora-leader')`,
          );
          expect(rows.map((r) => r.application_name).sort()).toEqual(['evora-leader', 'evora-listener']);
        } finally {
          await direct.end();
        }
      } finally {
        await worker.stop({ timeoutMs: 5_000 });
        client.close();
      }
    });
  });
}

/** Gives a database a default time zone other than UTC (new sessions start with it). */
async function nonUtcDefault(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(`ALTER DATABASE ${pg.escapeIdentifier(new URL(databaseUrl).pathname.slice(1))} SET TimeZone = 'America/New_York'`);
  } finally {
    await client.end();
  }
}

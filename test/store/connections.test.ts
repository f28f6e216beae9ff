import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { poolerDecide, storeClientClass } from '../../src/store/connections.js';
import { Store } from '../../src/store/store.js';
import { queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';
import { expectGivenUpStatementCancelled } from '../helpers/lock-waits.js';

/**
 * The store's connections straight to PostgreSQL (test/server/pgbouncer.test.ts has them
 * through pgbouncer): the session settings they start with, and what running statements
 * unnamed leaves on a connection.
 */

let url: string;
let sql: pg.Pool;
beforeAll(async () => {
  ({ url, sql } = await storeSetup());
  // Defaults other than the store's, so that what the store sets is seen.
  const name = pg.escapeIdentifier(new URL(url).pathname.slice(1));
  await sql.query(`ALTER DATABASE ${name} SET TimeZone = 'America/New_York'`);
  await sql.query(`ALTER DATABASE ${name} SET synchronous_commit = on`);
  await sql.query(`ALTER DATABASE ${name} SET default_transaction_isolation = 'repeatable read'`);
  // A DateStyle the driver cannot read: before the store sent its own, every timestamp came back null.
  await sql.query(`ALTER DATABASE ${name} SET DateStyle = 'SQL, DMY'`);
});

async function show(client: pg.Client, setting: string): Promise<string> {
  return Object.values((await client.query(`SHOW ${setting}`)).rows[0] as Record<string, string>)[0]!;
}

describe('store connections', () => {
  it('start in UTC with ISO dates, and with synchronous_commit off only when asked for (startup parameters, not options)', async () => {
    for (const [Client, syncCommit] of [
      [storeClientClass({ namedStatements: true }), 'on'],
      [storeClientClass({ namedStatements: false }), 'on'],
      [storeClientClass({ namedStatements: true, startupParameters: { synchronous_commit: 'off' } }), 'off'],
    ] as const) {
      const client = new Client({ connectionString: url });
      await client.connect();
      try {
        expect(await show(client, 'TimeZone')).toBe('UTC');
        expect(await show(client, 'DateStyle')).toMatch(/^ISO,/);
        expect(await show(client, 'synchronous_commit')).toBe(syncCommit);
      } finally {
        await client.end();
      }
    }
    const plain = new pg.Client({ connectionString: url });
    await plain.connect();
    expect(await show(plain, 'TimeZone')).toBe('America/New_York');
    expect(await show(plain, 'DateStyle')).toBe('SQL, DMY');
    await plain.end();
  });

  it('without named statements, a declared prepared statement leaves nothing prepared on the connection', async () => {
    for (const [namedStatements, prepared] of [[true, ['evora_x']], [false, []]] as const) {
      const client = new (storeClientClass({ namedStatements }))({ connectionString: url });
      await client.connect();
      try {
        for (let i = 0; i < 2; i++) {
          expect((await client.query({ name: 'evora_x', text: 'SELECT $1::int + 1 AS v', values: [i] })).rows).toEqual([{ v: i + 1 }]);
        }
        const { rows } = await client.query<{ name: string }>('SELECT name FROM pg_prepared_statements ORDER BY name');
        expect(rows.map((r) => r.name)).toEqual(prepared);
      } finally {
        await client.end();
      }
    }
  });

  it('auto finds PostgreSQL itself; a direct URL other than the database URL means a pooler; none and transaction are taken as said', async () => {
    expect(await poolerDecide({ pooler: 'auto', connectionString: url })).toMatchObject({ pooled: false });
    expect(await poolerDecide({ pooler: 'auto', connectionString: url, directConnectionString: url })).toMatchObject({ pooled: false });
    const other = new URL(url);
    other.hostname = 'localhost';
    expect(await poolerDecide({ pooler: 'auto', connectionString: url, directConnectionString: other.toString() })).toMatchObject({ pooled: true });
    expect(await poolerDecide({ pooler: 'transaction', connectionString: url })).toMatchObject({ pooled: true });
    expect(await poolerDecide({ pooler: 'none', connectionString: 'postgres://nowhere.invalid/x' })).toMatchObject({ pooled: false });
  });

  it('a pooled store works on PostgreSQL itself (every statement unnamed)', async () => {
    const store = new Store({ connectionString: url, pooled: true, maxConnections: 2 });
    try {
      const queue = queueName();
      await store.jobSubmitMany({ jobs: [{ queue, type: 't', payload: {} }] });
      const [job] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w' });
      const [done] = await store.jobCompleteMany({ completions: [{ id: job!.id, token: job!.leaseToken!, result: { ok: true } }] });
      expect(done).toMatchObject({ accepted: true });
      const completed = await store.jobGet({ id: job!.id });
      expect(completed.state).toBe('COMPLETED');
      expect(completed.finishedAt).toBeInstanceOf(Date);
    } finally {
      await store.close();
    }
  });
});

describe('a store straight to PostgreSQL on a database whose default isolation is not READ COMMITTED', () => {
  // Three servers on a database with default_transaction_isolation serializable answered
  // submits INTERNAL and logged every failed claim and worker write with a stack. Here: a
  // claim of a limited queue waits for the queue's lock, then updates the queue's row that
  // the claim before it changed; in a snapshot older than the lock (REPEATABLE READ) that
  // failed "could not serialize access due to concurrent update".
  it("runs READ COMMITTED: a claim that waited for a limited queue's lock takes its job", async () => {
    const { store, decision } = await Store.open({ connectionString: url, maxConnections: 2 });
    expect(decision).toEqual({ pooled: false, reason: 'detected: PostgreSQL itself', postgresItself: true });
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    try {
      const queue = queueName();
      await store.queueUpsert({ name: queue, rateLimit: { perSecond: 100, burst: 10 } });
      await store.jobSubmitMany({ jobs: [{ queue, type: 't', payload: {} }] });
      // The claim before it: holds the queue's lock and has changed the queue's row.
      await other.query('BEGIN');
      await other.query("SELECT pg_advisory_xact_lock(hashtext('evora.queue_room:' || $1::text))", [queue]);
      await other.query('UPDATE evora.queues SET rate_tokens = rate_tokens WHERE name = $1', [queue]);
      const claim = store.jobClaim({ queues: [queue], limit: 1, workerId: 'w' });
      await waitFor(
        async () => (await sql.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'advisory'")).rowCount === 1,
        { what: 'the claim waiting for the lock' },
      );
      await other.query('COMMIT');
      expect(await claim).toHaveLength(1);
    } finally {
      await other.end();
      await store.close();
    }
  });
});

describe('a store connection whose backend ends', () => {
  it('does not kill the process when nothing else listens; its next query fails instead', async () => {
    const Client = storeClientClass({ namedStatements: true });
    const client = new Client({ connectionString: url });
    await client.connect();
    const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
    const ended = new Promise((resolve) => client.once('end', resolve));
    // The backend sends FATAL 57P01 while no query runs: pg emits 'error' on the client.
    await sql.query('SELECT pg_terminate_backend($1)', [pid]);
    await ended;
    await expect(client.query('SELECT 1')).rejects.toThrow();
    expect(client.listenerCount('error')).toBe(1);
  });
});

describe('a statement the store gives up (its query timeout)', () => {
  // Closing the connection alone left the backend waiting for the lock, holding its slot,
  // while the pool opened another for the next statement: a long LOCK TABLE filled
  // max_connections. The store now cancels the statement it gave up.
  it('is cancelled in PostgreSQL, not left waiting for the lock', async () => {
    const store = new Store({ connectionString: url, maxConnections: 1, queryTimeoutMs: 300 });
    try {
      await expectGivenUpStatementCancelled(store, url);
    } finally {
      await store.close();
    }
  });
});

describe('a table altered under the named prepared statements (ALTER TABLE evora.jobs ADD COLUMN)', () => {
  // Every submit on a connection that had prepared its statement before the column came
  // failed INTERNAL ("cached plan must not change result type"), for as long as the column
  // stayed, since the connection was given back to the pool.
  it('fails one call UNAVAILABLE and replaces the connection: the next call works', async () => {
    const store = new Store({ connectionString: url, maxConnections: 1 });
    const queue = queueName();
    try {
      await store.jobSubmitMany({ jobs: [{ queue, type: 't', payload: {}, idempotencyKey: 'a' }, { queue, type: 't', payload: {}, idempotencyKey: 'b' }] });
      await sql.query('ALTER TABLE evora.jobs ADD COLUMN dba_note text');
      await expect(store.jobSubmitMany({ jobs: [{ queue, type: 't', payload: {}, idempotencyKey: 'c' }, { queue, type: 't', payload: {}, idempotencyKey: 'd' }] })).rejects.toThrow(
        /^database schema changed: cached plan must not change result type \(a table this server reads was altered; the connection is replaced: try again\)$/,
      );
      const results = await store.jobSubmitMany({ jobs: [{ queue, type: 't', payload: {}, idempotencyKey: 'c' }, { queue, type: 't', payload: {}, idempotencyKey: 'd' }] });
      expect(results.map((r) => r.created)).toEqual([true, true]);
    } finally {
      await sql.query('ALTER TABLE evora.jobs DROP COLUMN IF EXISTS dba_note');
      await store.close();
    }
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import type * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Statements the database refuses while it stays reachable: a statement_timeout or a
 * lock_timeout an operator set on the database (met while a table or row is locked), and a
 * read-only database (a standby, default_transaction_read_only). Each is answered
 * UNAVAILABLE with one line, not INTERNAL, writes nothing, leaves reads working, and the
 * server goes on once the cause is gone.
 */

let clients: Clients;
let databaseUrl: string;
beforeAll(async () => {
  ({ clients, databaseUrl } = await serverSetup());
});

function submitRequest(queue: string, idempotencyKey: string) {
  return { queue, type: 't', payload: {}, priority: 0, idempotencyKey, maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) };
}

/** Sets (value) or resets (null) a setting on the test database, and cuts the server's connections so that new ones get it. */
async function databaseSet(admin: pg.Client, setting: string, value: string | null): Promise<void> {
  const change = value === null ? `RESET ${setting}` : `SET ${setting} = ${value}`;
  await admin.query(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I ${change}', current_database()); END $$`);
  await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
}

/**
 * The first error of `attempt` whose details start with `prefix`, trying again while it
 * succeeds or fails otherwise (the first calls may meet the server's cut connections).
 */
function firstRefusal(attempt: () => Promise<unknown>, prefix: string): Promise<grpc.ServiceError> {
  return waitFor(
    async () => {
      const e = await attempt().then(
        () => null,
        (x: unknown) => x as grpc.ServiceError,
      );
      return e && e.details.startsWith(prefix) ? e : null;
    },
    { what: `a call answered "${prefix}"` },
  ) as Promise<grpc.ServiceError>;
}

describe('a statement timeout', () => {
  it('is UNAVAILABLE "database busy", changes nothing, and the next submit works', async () => {
    const queue = queueName('st');
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    try {
      await databaseSet(admin, 'statement_timeout', '300');
      await admin.query('BEGIN');
      await admin.query('LOCK TABLE evora.jobs IN ACCESS EXCLUSIVE MODE');
      const err = await firstRefusal(() => call(clients.jobs, 'submitJob', submitRequest(queue, 'k')), 'database busy');
      expect(err.code).toBe(14); // UNAVAILABLE
      expect(err.details).toBe('database busy: canceling statement due to statement timeout');
      await admin.query('ROLLBACK');
      const { rows } = await admin.query('SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1', [queue]);
      expect(rows[0].n).toBe(0);
      await databaseSet(admin, 'statement_timeout', null);
      const ok = await waitFor(async () => call(clients.jobs, 'submitJob', submitRequest(queue, 'k')).catch(() => null), {
        what: 'a submit once the timeout is gone',
      });
      expect(ok!.created).toBe(true);
    } finally {
      await admin.end();
    }
  });
});

describe('a lock timeout', () => {
  it('is UNAVAILABLE "database busy", changes nothing, and the cancel works once the row is free', async () => {
    const queue = queueName('lt');
    const { job } = await call(clients.jobs, 'submitJob', submitRequest(queue, 'k'));
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    try {
      await databaseSet(admin, 'lock_timeout', '300');
      await admin.query('BEGIN');
      await admin.query('SELECT id FROM evora.jobs WHERE id = $1 FOR UPDATE', [job!.id]);
      const err = await firstRefusal(() => call(clients.jobs, 'cancelJob', { id: job!.id }), 'database busy');
      expect(err.code).toBe(14); // UNAVAILABLE
      expect(err.details).toBe('database busy: canceling statement due to lock timeout');
      await admin.query('ROLLBACK');
      const { rows } = await admin.query('SELECT state, cancel_requested_at FROM evora.jobs WHERE id = $1', [job!.id]);
      expect(rows[0]).toEqual({ state: 'PENDING', cancel_requested_at: null });
      await databaseSet(admin, 'lock_timeout', null);
      const cancelled = await waitFor(async () => (await call(clients.jobs, 'cancelJob', { id: job!.id }).catch(() => null))?.job ?? null, {
        what: 'the cancel once the row is free',
      });
      expect(cancelled!.state).toBe(5); // CANCELLED
    } finally {
      await admin.end();
    }
  });
});

describe('a read-only database', () => {
  it('refuses writes UNAVAILABLE "database read-only" while reads go on, and writes work again when it is writable', async () => {
    const queue = queueName('ro');
    const { job } = await call(clients.jobs, 'submitJob', submitRequest(queue, 'before'));
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    try {
      await databaseSet(admin, 'default_transaction_read_only', 'on');
      const err = await firstRefusal(() => call(clients.jobs, 'submitJob', submitRequest(queue, 'during')), 'database read-only');
      expect(err.code).toBe(14); // UNAVAILABLE
      // The submit is one statement (a WITH of inserts), named by its outer verb.
      expect(err.details).toMatch(/^database read-only: cannot execute [A-Z]+ in a read-only transaction$/);
      // Reads are answered meanwhile.
      expect((await call(clients.jobs, 'getJob', { id: job!.id })).job!.id).toBe(job!.id);
      const { rows } = await admin.query('SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1', [queue]);
      expect(rows[0].n).toBe(1);
      await databaseSet(admin, 'default_transaction_read_only', null);
      const ok = await waitFor(async () => call(clients.jobs, 'submitJob', submitRequest(queue, 'during')).catch(() => null), {
        what: 'a submit once the database is writable',
      });
      expect(ok!.created).toBe(true);
    } finally {
      await admin.query(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET default_transaction_read_only', current_database()); END $$`);
      await admin.end();
    }
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import type * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A statement the database gives up on (a statement_timeout an operator set on the
 * database, met while a table is locked) is answered UNAVAILABLE with one line, not
 * INTERNAL, writes nothing, and the server goes on once the lock is gone.
 */

let clients: Clients;
let databaseUrl: string;
beforeAll(async () => {
  ({ clients, databaseUrl } = await serverSetup());
});

function submitRequest(queue: string, idempotencyKey: string) {
  return { queue, type: 't', payload: {}, priority: 0, idempotencyKey, maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) };
}

describe('a statement timeout', () => {
  it('is UNAVAILABLE "database busy", changes nothing, and the next submit works', async () => {
    const queue = queueName('st');
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    try {
      // New connections get the timeout; the server's open ones are cut so that it reconnects.
      await admin.query(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET statement_timeout = 300', current_database()); END $$`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
      await admin.query('BEGIN');
      await admin.query('LOCK TABLE evora.jobs IN ACCESS EXCLUSIVE MODE');
      // The first submits may meet the cut connections (an outage); wait for the timeout's answer.
      const err = await waitFor(
        async () => {
          const e = (await call(clients.jobs, 'submitJob', submitRequest(queue, 'k')).then(
            () => null,
            (x: unknown) => x as grpc.ServiceError,
          ))!;
          return e && e.details.startsWith('database busy') ? e : null;
        },
        { what: 'a submit answered for the statement timeout' },
      );
      expect(err!.code).toBe(14); // UNAVAILABLE
      expect(err!.details).toBe('database busy: canceling statement due to statement timeout');
      await admin.query('ROLLBACK');
      await admin.query(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET statement_timeout', current_database()); END $$`);
      const { rows } = await admin.query('SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1', [queue]);
      expect(rows[0].n).toBe(0);
      const ok = await call(clients.jobs, 'submitJob', submitRequest(queue, 'k'));
      expect(ok.created).toBe(true);
    } finally {
      await admin.end();
    }
  });
});

import { expect } from 'vitest';
import pg from 'pg';
import type { Store } from '../../src/store/store.js';
import { waitFor } from './wait.js';

/** What lockWaits reads through: a pool or a client. */
interface Queryable {
  query<R extends pg.QueryResultRow>(text: string): Promise<pg.QueryResult<R>>;
}

/** How many backends of the current database wait for a lock (pg_stat_activity), read through `db`. */
export async function lockWaits(db: Queryable): Promise<number> {
  return (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")).rows[0]!.n;
}

/**
 * Holds evora.jobs locked (ACCESS EXCLUSIVE, on a connection of its own to `url`: PostgreSQL
 * itself), lets `store` (a query timeout well under 10 s) give a read up, and waits until no
 * backend waits for the lock while it is still held: the statement given up was cancelled in
 * PostgreSQL, not left waiting, holding its connection slot (src/store/connections.ts).
 */
export async function expectGivenUpStatementCancelled(store: Store, url: string): Promise<void> {
  const locker = new pg.Client({ connectionString: url });
  const reader = new pg.Client({ connectionString: url });
  await Promise.all([locker.connect(), reader.connect()]);
  try {
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE evora.jobs IN ACCESS EXCLUSIVE MODE');
    await expect(store.jobGet({ id: '01900000-0000-7000-8000-000000000000' })).rejects.toThrow(/database unavailable: Query read timeout/);
    await waitFor(async () => (await lockWaits(reader)) === 0, { what: 'no backend waiting for the lock while it is still held' });
  } finally {
    await Promise.all([locker.end(), reader.end()]);
  }
}

import { teardownAdd } from './teardown.js';
import pg from 'pg';
import { Store } from '../../src/store/store.js';
import { testDatabaseCreate } from './db.js';

/** The test-only pool of each store made by storeSetup (see sqlFor). */
const sqlPools = new WeakMap<Store, pg.Pool>();

/**
 * One test file's store on a database of its own, and `sql`: a pool of the tests' own on
 * the same database, for raw checks and setups the store has no operation for (the store's
 * pool is private). Registers its cleanup (teardownAdd), so a file leaves no pool or
 * database behind.
 */
export async function storeSetup(opts: { maxConnections?: number } = {}) {
  const db = await testDatabaseCreate();
  const store = new Store({ connectionString: db.url, maxConnections: opts.maxConnections ?? 10 });
  const sql = new pg.Pool({ connectionString: db.url, max: 4 });
  sql.on('error', () => undefined);
  sqlPools.set(store, sql);
  teardownAdd(async () => {
    await store.close();
    await sql.end();
    await db.drop();
  });
  return { store, url: db.url, sql };
}

/** The raw-SQL pool on the database of a store made by storeSetup (for helpers handed only the store). */
export function sqlFor(store: Store): pg.Pool {
  const sql = sqlPools.get(store);
  if (!sql) throw new Error('sqlFor: this store was not made by storeSetup');
  return sql;
}

/**
 * The outbox as one row per event, for tests to read what a statement recorded: a
 * subquery over the packed evora.job_events (element i of every array is one event), used
 * as `FROM ${OUTBOX_EVENTS} e`. An event's id is its row's id * 2^20 + its position (from
 * 1), as the projector numbers it (src/domain/events.ts).
 */
export const OUTBOX_EVENTS = `(
  SELECT e.id * 1048576 + u.ord AS id, e.id AS outbox_id, e.xid,
         u.job_id, u.queue, u.type, u.kind, u.from_state, u.to_state, u.attempt, u.worker_id,
         e.at, u.wait_ms, u.run_ms
  FROM evora.job_events e
  CROSS JOIN LATERAL unnest(e.job_ids, e.queues, e.types, e.kinds, e.from_states, e.to_states, e.attempts,
                            e.worker_ids, e.wait_ms, e.run_ms)
      WITH ORDINALITY AS u(job_id, queue, type, kind, from_state, to_state, attempt, worker_id, wait_ms, run_ms, ord)
)`;

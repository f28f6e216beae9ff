import pg from 'pg';
import type { DatabaseAvailability } from './availability.js';
import type { Queryable } from './statements.js';

/**
 * The store's door to a pg.Pool: every statement the store runs goes through here, so no
 * call site can forget the two things a lost connection needs.
 *
 * 1. A client checked out of the pool (`withClient`, for a transaction) has an 'error'
 *    listener for as long as it is out. pg.Pool listens only to its idle clients; a
 *    checked-out client whose backend dies (pg_terminate_backend, a crash, a restart)
 *    emits 'error', and an 'error' with no listener kills the process. A client that
 *    failed so is released with the error, so the pool destroys it instead of handing a
 *    dead connection to the next caller.
 * 2. Failures are classified once (DatabaseAvailability): "the database is unreachable or
 *    restarting" becomes an UNAVAILABLE domain error (logged once per outage, by the
 *    tracker), and a success after an outage ends it. Other errors pass through unchanged.
 *
 * The pool's own 'error' (an idle client's connection lost) is expected and harmless: the
 * pool has already dropped that client and replaces it on the next checkout.
 */
export class StorePool implements Queryable {
  constructor(
    private readonly pool: pg.Pool,
    readonly availability: DatabaseAvailability,
  ) {
    pool.on('error', () => undefined);
  }

  /** Runs one statement on any pooled connection. */
  async query(config: pg.QueryConfig): Promise<pg.QueryResult> {
    const started = this.availability.mark();
    try {
      const result = await this.pool.query(config);
      this.availability.success(started);
      return result;
    } catch (err) {
      throw this.availability.failure(err, started) ?? err;
    }
  }

  /**
   * Runs `fn` with one connection of its own (a transaction's), guarded as the class comment
   * says, and returns it to the pool after; a broken connection is destroyed, not returned.
   */
  async withClient<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const started = this.availability.mark();
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw this.availability.failure(err, started) ?? err;
    }
    let broken: Error | undefined;
    const onError = (err: Error) => {
      broken ??= err;
    };
    client.on('error', onError);
    try {
      const out = await fn(client);
      this.availability.success(started);
      return out;
    } catch (err) {
      const outage = this.availability.failure(err, started);
      // A connection that failed under the statement is not given back to the pool.
      if (outage) broken ??= err instanceof Error ? err : outage;
      throw outage ?? err;
    } finally {
      client.removeListener('error', onError);
      client.release(broken);
    }
  }

  /** Ends the pool (its idle connections, and each checked-out one when it comes back). */
  end(): Promise<void> {
    return this.pool.end();
  }
}

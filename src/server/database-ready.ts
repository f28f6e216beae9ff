import { setTimeout as delay } from 'node:timers/promises';
import { migrate } from '../store/migrate.js';
import type { Store } from '../store/store.js';

/** The first wait between attempts to reach the database at startup. */
const FIRST_RETRY_MS = 100;
/** The longest wait between attempts (the backoff doubles up to it). */
const MAX_RETRY_MS = 2_000;

/**
 * Waits until the database answers, then applies the migrations; returns the versions
 * applied. A server started while PostgreSQL is down (or still starting, or restarting)
 * keeps trying with capped exponential backoff instead of exiting, so it comes up by
 * itself once the database does, without a supervisor.
 *
 * What must stay true: only outages are retried (the store's classifier decides: refused,
 * reset, terminated, starting up, in recovery...); anything else (a wrong password, an
 * unknown database, a schema from another version) fails the start at once. The waiting is
 * logged once at warn and the arrival once at info, by the store's availability tracker.
 * When `signal` aborts, the wait ends at once (rejecting).
 */
export async function databaseReady(opts: { store: Store; databaseUrl: string; signal: AbortSignal }): Promise<number[]> {
  const { store, signal } = opts;
  for (let wait = FIRST_RETRY_MS; ; wait = Math.min(wait * 2, MAX_RETRY_MS)) {
    signal.throwIfAborted();
    try {
      await store.healthCheck();
      return await migrate(opts.databaseUrl);
    } catch (err) {
      // healthCheck has told the tracker already; a migration cut short by an outage has not.
      if (signal.aborted || !store.availability.failure(err)) throw err;
    }
    // ±20% so that servers started together do not retry in lockstep.
    await delay(wait * (0.8 + Math.random() * 0.4), undefined, { signal });
  }
}

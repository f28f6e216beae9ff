import { setTimeout as delay } from 'node:timers/promises';
import type { DatabaseAvailability } from '../store/availability.js';

/** The first wait between attempts to reach the database at startup. */
const FIRST_RETRY_MS = 100;
/** The longest wait between attempts (the backoff doubles up to it). */
const MAX_RETRY_MS = 2_000;

/**
 * Runs `attempt` (what the start needs of the database: whether a pooler sits on its URL,
 * the migrations) until it succeeds, and returns its result. A server started while
 * PostgreSQL is down (or still starting, or restarting) keeps trying with capped exponential
 * backoff instead of exiting, so it comes up by itself once the database does, without a
 * supervisor.
 *
 * What must stay true: only outages are retried (the store's classifier, through
 * `availability`, decides: refused, reset, terminated, starting up, in recovery...); anything
 * else (a wrong password, an unknown database, a schema from another version) fails the
 * start at once, and so does the database refusing the server's role once it has been
 * reached (a missing grant: `availability.startRefusal`), with a line that says what to
 * do. The waiting is logged once at warn and the arrival once at info, by the availability
 * tracker. When `signal` aborts, the wait ends at once (rejecting).
 */
export async function databaseReady<T>(opts: { availability: DatabaseAvailability; signal: AbortSignal; attempt: () => Promise<T> }): Promise<T> {
  const { availability, signal } = opts;
  for (let wait = FIRST_RETRY_MS; ; wait = Math.min(wait * 2, MAX_RETRY_MS)) {
    signal.throwIfAborted();
    const started = availability.mark();
    try {
      const result = await opts.attempt();
      availability.success(started);
      return result;
    } catch (err) {
      if (signal.aborted) throw err;
      const refused = availability.startRefusal(err);
      if (refused) throw new Error(refused, { cause: err });
      if (!availability.failure(err, started)) throw err;
    }
    // ±20% so that servers started together do not retry in lockstep.
    await delay(wait * (0.8 + Math.random() * 0.4), undefined, { signal });
  }
}

import type { Logger } from '../logger.js';

/** Below this, the two clocks are taken to agree (hosts kept by NTP differ by far less). */
export const CLOCK_SKEW_IGNORED_MS = 1_000;

/** How long an estimate counts: the offset is the best of the last one to two windows. */
const WINDOW_MS = 30_000;

/** At most one warning about the skew per this long. */
const WARN_EVERY_MS = 600_000;

/**
 * This process's reading of PostgreSQL's clock. The times the dispatcher judges are the
 * database's: a lease ends at its `locked_until`, a rate limit's next token is due at
 * `next_token_at`. Judged by this process's own clock, a server whose clock ran 40 s ahead
 * of the database's found every 30 s lease expired at its first check (each worker told
 * lease_lost, each job run again until the DLQ), and a rate-limited queue's wake-up for its
 * next token came at once, in a loop, until the database's clock got there.
 *
 * Each claim that takes a job says the database's time of its statement (the jobs'
 * `started_at`, its now()), which fell between this process's asking (before the wait
 * for a pool connection) and the answer: the offset lies between that time less the
 * answer's time (the lower bound) and that time less the asking's (the upper bound). The
 * lower bound errs by the statement's time and the trip back, always towards a database
 * clock that is behind, so the largest lower bound of the last 30–60 s is taken: leases
 * then end here a little later than there, the safe side (the database's sweeper decides,
 * fencing refuses late reports). But a loaded server (claims waiting seconds for a pool
 * connection or a busy event loop, every one of them for a whole window) has only slow
 * answers: their lower bounds are seconds behind though both clocks agree, so while the
 * smallest upper bound of the same windows says the clocks may agree (the two bounds
 * reach within CLOCK_SKEW_IGNORED_MS of 0) the offset is 0 and nothing is warned about.
 *
 * Must stay true: an offset under CLOCK_SKEW_IGNORED_MS counts as 0, so clocks in sync (the
 * normal case, and every test that passes `now`) are judged by Date.now() exactly, however
 * long claims take; and until the first claim takes a job the offset is 0 (a rate-limited
 * queue's first wake-ups may then come early: each claims nothing and sets the next).
 */
export class DatabaseClock {
  #offsetMs = 0;
  /** The largest lower bound of the current window and of the one before. */
  #current = -Infinity;
  #previous = -Infinity;
  /** The smallest upper bound of the current window and of the one before. */
  #currentUpper = Infinity;
  #previousUpper = Infinity;
  #windowStart = -Infinity;
  #warnedAt = -Infinity;

  constructor(
    private readonly logger: Logger,
    private readonly localNow: () => number = Date.now,
  ) {}

  /** This process's time now (ms since the epoch): the clock the offset is taken against. */
  local(): number {
    return this.localNow();
  }

  /** The database's time now, as this process reckons it (ms since the epoch). */
  now(): number {
    return this.toDatabase(this.localNow());
  }

  /** This process's time `localMs` on the database's clock (ms since the epoch). */
  toDatabase(localMs: number): number {
    return localMs + this.#offsetMs;
  }

  /** The database's time `databaseMs` on this process's clock (ms since the epoch). */
  toLocal(databaseMs: number): number {
    return databaseMs - this.#offsetMs;
  }

  /** How far the database's clock is ahead of this process's (negative: behind), as used. */
  get offsetMs(): number {
    return this.#offsetMs;
  }

  /**
   * A claim statement that ran at `databaseTime` (its now()) answered just now; it was
   * asked for at `askedAt` (this process's clock: local(), taken before the store call).
   */
  observe(databaseTime: Date, askedAt: number): void {
    const receivedAt = this.localNow();
    const lower = databaseTime.getTime() - receivedAt;
    const upper = databaseTime.getTime() - askedAt;
    if (receivedAt - this.#windowStart >= WINDOW_MS) {
      const stale = receivedAt - this.#windowStart >= 2 * WINDOW_MS;
      this.#previous = stale ? -Infinity : this.#current;
      this.#previousUpper = stale ? Infinity : this.#currentUpper;
      this.#current = -Infinity;
      this.#currentUpper = Infinity;
      this.#windowStart = receivedAt;
    }
    if (lower > this.#current) this.#current = lower;
    if (upper < this.#currentUpper) this.#currentUpper = upper;
    const best = Math.max(this.#current, this.#previous);
    const bestUpper = Math.min(this.#currentUpper, this.#previousUpper);
    const mayAgree = best < CLOCK_SKEW_IGNORED_MS && bestUpper > -CLOCK_SKEW_IGNORED_MS;
    this.#offsetMs = mayAgree ? 0 : best;
    if (this.#offsetMs !== 0 && receivedAt - this.#warnedAt >= WARN_EVERY_MS) {
      this.#warnedAt = receivedAt;
      const seconds = (Math.abs(this.#offsetMs) / 1000).toFixed(1);
      this.logger.warn(
        { database_clock_offset_ms: this.#offsetMs },
        `this server's clock is about ${seconds} s ${this.#offsetMs < 0 ? 'ahead of' : 'behind'} PostgreSQL's: leases and rate-limit tokens are judged on PostgreSQL's clock as estimated from each claim, but synchronize the clocks (NTP)`,
      );
    }
  }
}

/**
 * PostgreSQL aborting a statement to break a deadlock (SQLSTATE 40P01 deadlock_detected).
 * Cancels cascade through dependents (the trigger of 0018_dependency_cascade_loop.sql) and
 * lock the descendants as they reach them, so two cancels at once deadlock when each holds a
 * job of the other's chain: a bulk batch holding p and d of p -> c -> d while a CancelJob
 * holds c. (Two bulk runs no longer meet so: their batches take turns, sql/job-bulk-lock.sql.)
 * The statement PostgreSQL aborts changed nothing, and succeeds when run again once the
 * other has committed; before, the call failed INTERNAL.
 */
const PG_DEADLOCK = '40P01';

/** How many times one statement is run again after PostgreSQL aborted it to break a deadlock. */
export const DEADLOCK_RETRIES = 3;

/**
 * Runs `statement` (one autocommit statement, or one whole transaction: a deadlock aborts all
 * of it) and runs it again, at most DEADLOCK_RETRIES times, when PostgreSQL aborted it to
 * break a deadlock; any other error, or a deadlock past the retries, is thrown as it is.
 * Must stay true: `statement` is safe to run again after an abort (the abort rolled back
 * everything it did), so nothing here may wrap a transaction that spans other work.
 */
export async function deadlockRetried<T>(statement: () => Promise<T>): Promise<T> {
  for (let retries = 0; ; retries++) {
    try {
      return await statement();
    } catch (err) {
      const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
      if (code !== PG_DEADLOCK || retries >= DEADLOCK_RETRIES) throw err;
    }
  }
}

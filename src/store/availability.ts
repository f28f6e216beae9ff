import { performance } from 'node:perf_hooks';
import { EvoraError, unavailable } from '../domain/errors.js';
import { checkTransition, type Transitions } from '../domain/state-machine.js';
import type { Logger } from '../logger.js';

/**
 * Whether the database is reachable, as one server process sees it, and the one place that
 * decides which failures mean "the database is unreachable or restarting" (an outage: the
 * caller retries later) rather than a bug.
 *
 * What must stay true: an outage is logged once, at warn, when it begins ("database
 * unavailable: <reason>") and once, at info, when a statement succeeds again ("database
 * available again after 2.3 s"); every failure during it is answered UNAVAILABLE, with no
 * error-level log and no stack. Genuinely unexpected errors are not classified here and keep
 * their error-level path (src/grpc/status.ts answers them INTERNAL).
 */

/** SQLSTATEs that mean the database is going away, restarting or refusing connections for now. */
const UNAVAILABLE_SQLSTATES = new Set([
  '57P01', // admin_shutdown: terminating connection due to administrator command (also pg_terminate_backend)
  '57P02', // crash_shutdown: another backend crashed, the postmaster restarts them all
  '57P03', // cannot_connect_now: the database system is starting up / shutting down / in recovery
  '53300', // too_many_connections (the tracker takes it as a refusal: REFUSAL_SQLSTATES)
  '53100', // disk_full: nothing can be written until space is freed (the tracker takes it as a refusal)
  '53200', // out_of_memory (the tracker takes it as a refusal)
  '57P05', // idle_session_timeout: the server ended an idle connection
  '25P03', // idle_in_transaction_session_timeout: likewise, inside a transaction
]);

/**
 * SQLSTATEs of a statement the database refused while it stays reachable, by why: answered
 * UNAVAILABLE (the caller retries later; nothing was written) but not an outage, since
 * other statements (reads, or the same one later) still succeed. Counting them as outages
 * made the tracker flap, a warn and an info line for each refusal: a read-only database or
 * one whose disk is full fails every write and passes every read, a statement out of memory
 * fails alone (test/server/db-connections-full.test.ts provokes a real one), and one out of
 * connection slots refuses every new connection (the LISTEN connection's reconnects, the
 * pool growing) while the connections already open go on answering.
 */
const REFUSAL_SQLSTATES: ReadonlyMap<string, DatabaseRefusal> = new Map([
  ['57014', 'busy'], // query_canceled: a statement_timeout set on the role or database, or pg_cancel_backend
  ['55P03', 'busy'], // lock_not_available: a lock_timeout set on the role or database
  ['25006', 'read-only'], // read_only_sql_transaction: the URL reaches a standby (during a failover), or default_transaction_read_only
  ['53300', 'out of connections'], // too_many_connections: max_connections (or a role's or database's CONNECTION LIMIT) reached by other clients
  ['53100', 'out of disk space'], // disk_full: writes that need new space fail until it is freed; reads go on
  // out_of_memory: one statement's backend could not allocate memory ("out of memory"), or the
  // shared lock table is full ("out of shared memory": a transaction holding too many locks;
  // writes, which lock their transaction id there, fail until it ends, while reads go on).
  // The backend stays, and other statements run.
  ['53200', 'out of memory'],
]);

/**
 * SQLSTATEs of the database refusing this server's role: refusals (as REFUSAL_SQLSTATES) once
 * the database has been reached, but not before, so that a start with a wrong password, a
 * role that may not log in or a pending migration the application role may not run still
 * ends with its one line (database-ready.ts: "a permission error ends the start"). While the
 * server runs they are what a DBA did to it (the role's password changed, a REVOKE): every
 * call that needed a new connection, or the revoked right, was answered INTERNAL and logged
 * at error with a stack, once per call, while the connections already open went on working.
 * Answered UNAVAILABLE now, logged as a refusal; the server needs no restart once the DBA
 * mends it.
 */
const ROLE_REFUSAL_SQLSTATES: ReadonlyMap<string, DatabaseRefusal> = new Map([
  ['28P01', 'login refused'], // invalid_password: the role's password was changed
  ['28000', 'login refused'], // invalid_authorization_specification: pg_hba.conf rejects it, the role may not log in (NOLOGIN)
  ['42501', 'permission denied'], // insufficient_privilege: a REVOKE on the schema or its tables, CONNECT revoked on the database
]);

/**
 * PostgreSQL refusing to run a named prepared statement whose result columns changed since
 * it was prepared (SQLSTATE 0A000 with this message): a table the statement returns `*` of
 * gained or lost a column (an `ALTER TABLE evora.jobs ADD COLUMN` by a DBA, or a newer
 * release's migration while this one runs). The statement ran nothing. Every later call on
 * that connection fails the same way, so it is a refusal: answered UNAVAILABLE and its
 * connection destroyed (pool.ts), the next call preparing it afresh. Before, the
 * connections a transaction had used were given back and every submit on them failed
 * INTERNAL, logged at error, for as long as the column stayed (280 in 25 s on two servers).
 */
const STALE_PLAN = /^cached plan must not change result type$/;

/**
 * Why the database refused a statement while staying reachable (REFUSAL_SQLSTATES,
 * ROLE_REFUSAL_SQLSTATES, STALE_PLAN), or 'connections busy': the statement never reached it, because
 * every connection of this server's pool stayed checked out while the database answered
 * others (POOL_WAIT_TIMEOUT).
 */
export type DatabaseRefusal =
  | 'busy'
  | 'read-only'
  | 'out of connections'
  | 'out of disk space'
  | 'out of memory'
  | 'login refused'
  | 'permission denied'
  | 'schema changed'
  | 'connections busy';

/**
 * pg-pool's error for a checkout that waited in the pool's queue longer than its connect
 * timeout: every connection of the pool was checked out all that time (a new connection
 * that cannot be made in time fails as 'Connection terminated due to connection timeout').
 * When the database answered other statements during that wait, the pool is too small for
 * the load, not the database away: a refusal ('connections busy'), not an outage. Counted as
 * an outage, a burst of calls on a server with a small pool logged a warn and an info line
 * per burst ("database unavailable: timeout exceeded when trying to connect", "available
 * again after 0.8 s") and sent the operator to a database that was fine.
 */
const POOL_WAIT_TIMEOUT = /^timeout exceeded when trying to connect$/;

/**
 * pg's error for a statement that got no answer within the pool's query_timeout
 * (EVORA_DB_QUERY_TIMEOUT_MS). When the database answered other statements of this server
 * meanwhile, it was not away: the statement waited on a lock another session held (a DBA's
 * `LOCK`, a long `ALTER TABLE`, an open transaction that updated the row) or ran long. A
 * refusal ('busy'), not an outage: counted as one, a 40-second `LOCK evora.jobs` in psql
 * was answered "database unavailable: Query read timeout" and logged as an outage of 0.1 s,
 * which sent the operator to a database that was up.
 */
const QUERY_TIMEOUT = /^Query read timeout$/;

/** How often a kind of refusal is logged at warn at most; the ones between are counted. */
export const REFUSAL_LOG_INTERVAL_MS = 30_000;

/** Socket errors of a connection that cannot be made or was cut. */
const UNAVAILABLE_ERRNOS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ECONNABORTED: 'connection aborted',
  EPIPE: 'connection closed',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EHOSTDOWN: 'host down',
  EAI_AGAIN: 'name lookup failed (temporary)',
};

/** pg's own messages for a connection that broke or could not be made in time. */
const UNAVAILABLE_MESSAGES = [
  /^Connection terminated/, // "…unexpectedly", "…due to connection timeout"
  POOL_WAIT_TIMEOUT, // a wait for a pooled connection; a refusal when the database answered meanwhile
  /is not queryable$/, // a client whose connection already failed
  /^Connection timed out$/,
  /^timeout expired$/, // a pg.Client's own connectionTimeoutMillis (the LISTEN connection's)
  QUERY_TIMEOUT, // the pool's query_timeout (EVORA_DB_QUERY_TIMEOUT_MS): no answer in time; a refusal when the database answered meanwhile
];

/**
 * Why the database is unavailable, if `err` (or an error in its `cause` chain) says it is;
 * null for any other error. The reason is one readable line, e.g. "connection refused
 * (127.0.0.1:5432)" or "terminating connection due to administrator command".
 */
export function databaseUnavailableReason(err: unknown): string | null {
  for (const e of causeChain(err)) {
    if (e instanceof EvoraError) {
      if (e.code !== 'UNAVAILABLE') return null;
      // An UNAVAILABLE made from a driver error (failure() below) has the reason in its cause.
      if (e.cause instanceof Error && reasonOf(e.cause)) continue;
      return e.message;
    }
    const reason = reasonOf(e);
    if (reason) return reason;
  }
  return null;
}

/**
 * Why the database refused a statement while staying reachable (REFUSAL_SQLSTATES: a
 * statement or lock timeout, a cancel, a read-only database), if `err` (or an error in its
 * `cause` chain) says so; null otherwise. Such a failure is answered UNAVAILABLE but is not
 * an outage.
 */
export function databaseRefusal(err: unknown): { kind: DatabaseRefusal; reason: string } | null {
  for (const e of causeChain(err)) {
    if (e instanceof EvoraError) return null;
    const code = (e as Error & { code?: unknown }).code;
    const kind = typeof code === 'string' ? REFUSAL_SQLSTATES.get(code) : undefined;
    if (kind) return { kind, reason: oneLine(e.message) || (code as string) };
    if (code === '0A000' && STALE_PLAN.test(e.message)) {
      return { kind: 'schema changed', reason: `${e.message} (a table this server reads was altered; the connection is replaced: try again)` };
    }
  }
  return null;
}

/**
 * Whether `err` (or an error in its `cause` chain) is PostgreSQL refusing a value that a
 * statement carries (SQLSTATE class 22, data exception: a character it cannot store, a
 * number or interval out of range). In a batch statement that is one item's fault, not
 * the batch's: the items can be written one by one (src/dispatcher/batcher.ts).
 */
export function isValueRefused(err: unknown): boolean {
  for (const e of causeChain(err)) {
    const code = (e as Error & { code?: unknown }).code;
    if (typeof code === 'string' && code.length === 5 && code.startsWith('22')) return true;
  }
  return false;
}

/** `err` and the errors of its `cause` chain, five at most (a chain is never longer here). */
function* causeChain(err: unknown): Generator<Error> {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) yield e;
}

function reasonOf(e: Error): string | null {
  const { code, address, port } = e as Error & { code?: unknown; address?: unknown; port?: unknown };
  if (typeof code === 'string') {
    if (UNAVAILABLE_SQLSTATES.has(code) || code.startsWith('08')) return oneLine(e.message) || code;
    const errno = UNAVAILABLE_ERRNOS[code];
    if (errno) {
      // Node reports a failed dual-stack connect as an AggregateError without a message.
      const where = typeof address === 'string' ? ` (${address}${typeof port === 'number' ? `:${port}` : ''})` : '';
      return `${errno}${where}`;
    }
  }
  if (UNAVAILABLE_MESSAGES.some((m) => m.test(e.message))) return oneLine(e.message);
  return null;
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}

/**
 * The states of the database as this process sees it:
 *   connecting   not reached yet (the server is starting)
 *   waiting      not reached yet, and an attempt failed (startup waits with backoff)
 *   available    the last statement that ended reached it
 *   unavailable  an outage: a statement failed for want of the database, none succeeded since
 */
export type AvailabilityState = 'connecting' | 'waiting' | 'available' | 'unavailable';

const TRANSITIONS: Transitions<AvailabilityState> = {
  connecting: ['waiting', 'available'],
  waiting: ['available'],
  available: ['unavailable'],
  unavailable: ['available'],
};

/**
 * The outage tracker of one server process, fed by the store (every statement, the LISTEN
 * connection, the startup wait). Operations take a `started` mark (`mark()`) so that a
 * straggler does not flap the state: a success of an operation that began before the
 * outage does not end it, and a failure of one that began before the recovery does not
 * start a new one (it is still answered UNAVAILABLE).
 */
export class DatabaseAvailability {
  #state: AvailabilityState = 'connecting';
  /** performance.now() when the current state began. */
  #since = performance.now();
  /** Per kind of refusal: when it was last logged at warn, and how many came since. */
  readonly #refusals = new Map<DatabaseRefusal, { loggedAt: number; since: number }>();
  /** performance.now() when a statement last reached the database (POOL_WAIT_TIMEOUT). */
  #answeredAt = -Infinity;

  /** `clock`: milliseconds, monotonic (tests pass their own). */
  constructor(
    private readonly logger: Logger,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  get state(): AvailabilityState {
    return this.#state;
  }

  /** The mark an operation takes when it begins (to pass to success/failure). */
  mark(): number {
    return performance.now();
  }

  /** A statement (or connection) that began at `started` reached the database. */
  success(started: number = performance.now()): void {
    this.#answeredAt = performance.now();
    const state = this.#state;
    if (state === 'available') return;
    if (state === 'unavailable' && started < this.#since) return; // began before the outage
    const downSeconds = (performance.now() - this.#since) / 1000;
    this.#to('available');
    if (state === 'unavailable') {
      this.logger.info({ down_seconds: round1(downSeconds) }, `database available again after ${round1(downSeconds)} s`);
    } else if (state === 'waiting') {
      this.logger.info({ waited_seconds: round1(downSeconds) }, `database reached after ${round1(downSeconds)} s`);
    }
  }

  /**
   * A statement (or connection) that began at `started` failed with `err`. When `err` says
   * the database is unavailable, the outage is recorded (and logged if it is new) and the
   * UNAVAILABLE domain error to throw instead is returned; otherwise null (the caller
   * rethrows `err` as it is). A refusal (REFUSAL_SQLSTATES, or a pool wait that timed out
   * while the database answered: POOL_WAIT_TIMEOUT) is answered UNAVAILABLE too but
   * leaves the state as it is once the database has been reached; before that it is one
   * more reason to wait, logged as the waiting (startup's attempts run one at a time, so
   * nothing flaps there).
   */
  failure(err: unknown, started: number = performance.now()): EvoraError | null {
    const refusal = databaseRefusal(err) ?? this.#roleRefusal(err) ?? this.#poolBusy(err, started) ?? this.#queryBusy(err, started);
    const reason = refusal?.reason ?? databaseUnavailableReason(err);
    if (reason === null) return null;
    const message = refusal ? `database ${refusal.kind}: ${reason}` : `database unavailable: ${reason}`;
    switch (this.#state) {
      case 'connecting':
        this.#to('waiting');
        this.logger.warn({ reason }, `waiting for the database: ${reason}`);
        break;
      case 'waiting':
        this.logger.debug({ reason }, 'database still unavailable');
        break;
      case 'available':
      case 'unavailable':
        if (refusal) {
          // One statement refused; the database is there, so the state does not change.
          this.#logRefusal(refusal.kind, reason, message);
        } else if (this.#state === 'unavailable') {
          this.logger.debug({ reason }, 'database still unavailable');
        } else if (started >= this.#since) {
          // (One that began before the last recovery is a straggler of that outage.)
          this.#to('unavailable');
          this.logger.warn({ reason }, message);
        }
        break;
    }
    return err instanceof EvoraError ? err : unavailable(message, { cause: err });
  }

  /**
   * The database refusing this server's role (ROLE_REFUSAL_SQLSTATES), once it has been
   * reached; null before (the start fails on it) and for any other error.
   */
  #roleRefusal(err: unknown): { kind: DatabaseRefusal; reason: string } | null {
    if (this.#state === 'connecting' || this.#state === 'waiting') return null;
    for (const e of causeChain(err)) {
      if (e instanceof EvoraError) return null;
      const code = (e as Error & { code?: unknown }).code;
      const kind = typeof code === 'string' ? ROLE_REFUSAL_SQLSTATES.get(code) : undefined;
      if (kind) return { kind, reason: oneLine(e.message) || (code as string) };
    }
    return null;
  }

  /**
   * The line a start ends with when `err` is the database refusing this server's role
   * (ROLE_REFUSAL_SQLSTATES: a missing grant, a password or pg_hba.conf refusal) after it has
   * been reached, anywhere in `err`'s cause chain, the store's UNAVAILABLE wrapping included;
   * null otherwise. A running server answers such refusals UNAVAILABLE and goes on once the
   * DBA mends them; a start (databaseReady) does not wait for one: retried, it left the
   * server "starting: waiting for the database" for ever behind one warn line, the rest at
   * debug, while what the operator must do (grant the role its rights) was nowhere said.
   * Before the database is reached the start already ends on these errors, with the
   * migrations' own lines (this returns null then).
   */
  startRefusal(err: unknown): string | null {
    if (this.#state === 'connecting' || this.#state === 'waiting') return null;
    for (const e of causeChain(err)) {
      const code = (e as Error & { code?: unknown }).code;
      const kind = typeof code === 'string' ? ROLE_REFUSAL_SQLSTATES.get(code) : undefined;
      if (!kind) continue;
      const hint =
        kind === 'permission denied'
          ? 'the role lacks the rights of Evora\'s application role: run `evora db create-role --name <this role>` as a superuser or the schema\'s owner, or grant them: docs/security.md, "Database role"'
          : 'check the role, its password in the database URL and pg_hba.conf';
      return `the database refuses this server's role: ${oneLine(e.message) || code} (${hint})`;
    }
    return null;
  }

  /**
   * 'connections busy' when `err` is a wait for a pooled connection that timed out
   * (POOL_WAIT_TIMEOUT) and a statement reached the database after the wait began; null
   * otherwise (a pool whose connections hang on a database that stopped answering: an outage).
   */
  #poolBusy(err: unknown, started: number): { kind: DatabaseRefusal; reason: string } | null {
    if (this.#answeredAt < started) return null;
    for (const e of causeChain(err)) {
      if (e instanceof EvoraError) return null;
      if (POOL_WAIT_TIMEOUT.test(e.message)) {
        return { kind: 'connections busy', reason: "no connection of this server's pool came free in time while the database answered others (raise EVORA_DB_POOL_SIZE)" };
      }
    }
    return null;
  }

  /**
   * 'busy' when `err` is a statement that got no answer within the query timeout
   * (QUERY_TIMEOUT) while the database answered another statement of this server after it
   * began; null otherwise (no answer from anything meanwhile: an outage).
   */
  #queryBusy(err: unknown, started: number): { kind: DatabaseRefusal; reason: string } | null {
    if (this.#answeredAt < started) return null;
    for (const e of causeChain(err)) {
      if (e instanceof EvoraError) return null;
      if (QUERY_TIMEOUT.test(e.message)) {
        return {
          kind: 'busy',
          reason:
            'a statement got no answer within EVORA_DB_QUERY_TIMEOUT_MS while the database answered others: it waited on a lock another session holds, or ran long (pg_stat_activity shows which)',
        };
      }
    }
    return null;
  }

  /**
   * A refusal at warn, at most once per REFUSAL_LOG_INTERVAL_MS per kind (a read-only
   * database refuses every write of every loop); the ones in between at debug, counted in
   * the next warn line.
   */
  #logRefusal(kind: DatabaseRefusal, reason: string, message: string): void {
    const now = this.clock();
    const last = this.#refusals.get(kind);
    if (last && now - last.loggedAt < REFUSAL_LOG_INTERVAL_MS) {
      last.since++;
      this.logger.debug({ reason }, message);
      return;
    }
    const more = last?.since ?? 0;
    this.#refusals.set(kind, { loggedAt: now, since: 0 });
    this.logger.warn({ reason, ...(more > 0 ? { more_since_last_line: more } : {}) }, more > 0 ? `${message} (and ${more} more since the last line)` : message);
  }

  #to(next: AvailabilityState): void {
    this.#state = checkTransition('database availability', TRANSITIONS, this.#state, next);
    this.#since = performance.now();
  }
}

function round1(n: number): number {
  return Math.round(n * 10) / 10;
}

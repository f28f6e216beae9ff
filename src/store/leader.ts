import { abortRace } from '../domain/abort.js';
import pg from 'pg';
import { healthCheck } from './health.js';
import { rowOf, statement } from './statements.js';

/** Advisory lock class id for leader elections (the object id is the election's name hash). */
const LEADER_LOCK_CLASS = 7_301_846;

/**
 * How long connecting the lock's connection, or releasing the lock, may take. Without a
 * bound, a database that does not answer (a host that drops packets) holds an attempt for
 * the TCP connect timeout, ~2 minutes.
 */
const LEADER_CONNECT_TIMEOUT_MS = 10_000;

const leaderLockTrySql = statement<{ lockClass: number; name: string }, { ok: boolean }>(
  'leader-lock-try',
  { lockClass: 'int4', name: 'text' },
  { ok: 'bool' },
);
const leaderSessionIdleTimeoutSql = statement<{ timeoutMs: number }, { value: string }>(
  'leader-session-idle-timeout',
  { timeoutMs: 'int4' },
  { value: 'text' },
);
const leaderLockReleaseSql = statement<{ lockClass: number; name: string }, { released: boolean }>(
  'leader-lock-release',
  { lockClass: 'int4', name: 'text' },
  { released: 'bool' },
);

/**
 * A leadership claim held as a session-level advisory lock on a dedicated connection:
 * exactly one process on the database holds it, and it is released by Postgres itself if
 * that process dies or its connection drops, so a new leader can take over.
 *
 * What must stay true: the moment the connection that holds the lock fails or ends, this
 * process no longer counts as holding it and `onLost` is told (once per time it was held),
 * so the leader's work stops at once rather than at the next attempt.
 */
export class AdvisoryLeaderLock {
  /**
   * Where the lock stands: `none` (no connection), `connected` (a connection that does not
   * hold the lock) or `held` (the connection holds it). Held without a connection cannot be
   * written down.
   */
  private lock: { state: 'none' } | { state: 'connected' | 'held'; client: pg.Client } = { state: 'none' };

  constructor(
    private readonly connectionString: string,
    /** The election's name, e.g. "maintenance". */
    readonly name: string,
    /** Told when the connection holding the lock fails or ends (not after leaderResign). */
    private readonly onLost: () => void = () => undefined,
    /**
     * How long the lock's session may sit idle before PostgreSQL ends it (and releases the
     * lock): well above the interval at which the holder confirms it, so only a frozen
     * process (SIGSTOP) loses it. Null: no timeout.
     */
    private readonly idleTimeoutMs: number | null = null,
  ) {}

  /**
   * Tries to become (or confirms being) the leader. Returns true while this process holds
   * the lock. A dropped connection means leadership is lost; the next call reconnects and
   * tries again. When `signal` aborts, the attempt ends at once (its connection is closed)
   * and returns false.
   */
  async leaderAttemptElect(signal?: AbortSignal): Promise<boolean> {
    try {
      const client = await abortRace(this.connection(), signal, abortedError);
      if (this.lock.state === 'held') {
        // Still connected means still holding; a connection that does not answer in time
        // (half-open: the database may have ended the session and released the lock) is
        // given up, and the loss told, rather than waited on while another process leads.
        await abortRace(abortRace(healthCheck(client), AbortSignal.timeout(LEADER_STATEMENT_TIMEOUT_MS), noAnswerError), signal, abortedError);
        return true;
      }
      const row = await abortRace(
        abortRace(rowOf(client, leaderLockTrySql, { lockClass: LEADER_LOCK_CLASS, name: this.name }), AbortSignal.timeout(LEADER_STATEMENT_TIMEOUT_MS), noAnswerError),
        signal,
        abortedError,
      );
      // The connection may have gone while the statement ran (connectionGone let it go).
      if (row?.ok !== true || this.lock.state === 'none' || this.lock.client !== client) return false;
      this.lock = { state: 'held', client };
      return true;
    } catch {
      // Failed, timed out or aborted: whatever state the connection is in, it goes (and a
      // held lock is told lost).
      this.abandon();
      return false;
    }
  }

  /**
   * Gives up leadership (if held) and closes the connection. Safe to call twice. The release
   * and the goodbye are each waited for at most LEADER_CONNECT_TIMEOUT_MS, then the
   * connection is cut: closing it releases the lock too, so a database that does not answer
   * does not hold up shutdown.
   */
  async leaderResign(): Promise<void> {
    const lock = this.lock;
    if (lock.state === 'none') return;
    // From here on, the connection's end is not a loss.
    this.lock = { state: 'none' };
    if (lock.state === 'held') {
      await settledWithin(rowOf(lock.client, leaderLockReleaseSql, { lockClass: LEADER_LOCK_CLASS, name: this.name }), LEADER_CONNECT_TIMEOUT_MS);
    }
    if (!(await settledWithin(lock.client.end(), LEADER_CONNECT_TIMEOUT_MS))) lock.client.connection.stream.destroy();
  }

  /** The lock's connection; made (and recorded, so abandon() can end it) on first use. */
  private async connection(): Promise<pg.Client> {
    if (this.lock.state !== 'none') return this.lock.client;
    const client = new pg.Client({
      connectionString: this.connectionString,
      application_name: 'evora-leader',
      connectionTimeoutMillis: LEADER_CONNECT_TIMEOUT_MS,
      keepAlive: true,
    });
    // A connection that fails or ends (the database went away, an operator terminated the
    // backend) takes the lock with it.
    const gone = () => this.connectionGone(client);
    client.on('error', gone);
    client.on('end', gone);
    this.lock = { state: 'connected', client };
    await client.connect();
    if (this.idleTimeoutMs !== null) {
      // Best effort: PostgreSQL before 14 has no idle_session_timeout (the lock works without it).
      await abortRace(rowOf(client, leaderSessionIdleTimeoutSql, { timeoutMs: this.idleTimeoutMs }), AbortSignal.timeout(LEADER_STATEMENT_TIMEOUT_MS), noAnswerError).catch(
        () => undefined,
      );
    }
    return client;
  }

  private connectionGone(client: pg.Client): void {
    const lock = this.lock;
    if (lock.state === 'none' || lock.client !== client) return; // an old connection, already let go
    this.lock = { state: 'none' };
    client.connection.stream.destroy();
    if (lock.state === 'held') this.onLost();
  }

  /**
   * Lets go of the connection at once, without a goodbye: a graceful end waits for the
   * database to answer, which a database that does not answer never does.
   */
  private abandon(): void {
    const lock = this.lock;
    this.lock = { state: 'none' };
    if (lock.state !== 'none') lock.client.connection.stream.destroy();
    if (lock.state === 'held') this.onLost();
  }
}

/** How long the lock's health check or lock attempt may take before its connection is given up. */
const LEADER_STATEMENT_TIMEOUT_MS = 5_000;

/** Whether `work` settled (either way) within `ms`. */
async function settledWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(resolve, ms, false)));
  try {
    return await Promise.race([work.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** What a statement on the lock connection that did not answer in time rejects with. */
const noAnswerError = () => new Error(`no answer within ${LEADER_STATEMENT_TIMEOUT_MS} ms`);

/** What an aborted wait of the leader rejects with (the elector's loop ends on its signal, not on this error). */
const abortedError = () => new Error('aborted');

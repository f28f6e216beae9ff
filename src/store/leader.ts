import pg from 'pg';
import { healthCheck } from './health.js';
import { rowOf, statement } from './statements.js';

/** Advisory lock class id for leader elections (the object id is the election's name hash). */
const LEADER_LOCK_CLASS = 7_301_846;

const leaderLockTrySql = statement<{ lockClass: number; name: string }, { ok: boolean }>(
  'leader-lock-try',
  { lockClass: 'int4', name: 'text' },
  { ok: 'bool' },
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
 */
export class AdvisoryLeaderLock {
  private client: pg.Client | null = null;
  private held = false;

  constructor(
    private readonly connectionString: string,
    /** The election's name, e.g. "maintenance". */
    readonly name: string,
  ) {}

  /** True while this process believes it holds the lock (verified by leaderAttemptElect). */
  get isHeld(): boolean {
    return this.held;
  }

  /**
   * Tries to become (or confirms being) the leader. Returns true while this process holds
   * the lock. A dropped connection means leadership is lost; the next call reconnects and
   * tries again.
   */
  async leaderAttemptElect(): Promise<boolean> {
    try {
      const client = await this.connection();
      if (this.held) {
        await healthCheck(client); // still connected means still holding
        return true;
      }
      const row = await rowOf(client, leaderLockTrySql, { lockClass: LEADER_LOCK_CLASS, name: this.name });
      this.held = row?.ok === true;
      return this.held;
    } catch {
      await this.drop();
      return false;
    }
  }

  /** Gives up leadership (if held) and closes the connection. Safe to call twice. */
  async leaderResign(): Promise<void> {
    const client = this.client;
    if (client && this.held) {
      await rowOf(client, leaderLockReleaseSql, { lockClass: LEADER_LOCK_CLASS, name: this.name }).catch(() => undefined);
    }
    await this.drop();
  }

  private async connection(): Promise<pg.Client> {
    if (this.client) return this.client;
    const client = new pg.Client({ connectionString: this.connectionString, application_name: 'evora-leader' });
    client.on('error', () => {
      this.held = false;
    });
    await client.connect();
    this.client = client;
    return client;
  }

  private async drop(): Promise<void> {
    this.held = false;
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }
}

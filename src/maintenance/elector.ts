import type { Logger } from '../logger.js';
import { AdvisoryLeaderLock } from '../store/leader.js';
import { PeriodicService } from './periodic.js';

/**
 * Told when this process gains (`true`) or loses (`false`) leadership. The elector waits
 * for it before its next attempt, so gains and losses never overlap; on resign it waits
 * for it before releasing the lock, so the leader's services have stopped by then.
 */
export type LeadershipListener = (leader: boolean) => Promise<void>;

/**
 * Leader election among all server processes on one database. Leadership is a session-
 * level advisory lock held on a dedicated connection (AdvisoryLeaderLock in the store), so
 * a dead leader's lock is released by the database and another process takes over at its
 * next attempt. Every `intervalMs` the elector tries to take the lock (or confirms it still
 * holds it) and tells its listener, the maintainer, when the answer changes.
 *
 * A lost connection is noticed at the next attempt: until then the old leader's services
 * may still be finishing a tick while a new leader starts its own, so leader-only work must
 * stay safe to run twice at once (the sweeper's SKIP LOCKED, the projector's batches).
 */
export class Elector extends PeriodicService {
  private readonly lock: AdvisoryLeaderLock;
  private leader = false;
  private listener: LeadershipListener = async () => undefined;
  private campaignEnd: AbortSignal | null = null;

  constructor(opts: {
    connectionString: string;
    /** The election's name: processes with the same name on one database elect one leader. */
    name?: string;
    intervalMs?: number;
    logger: Logger;
  }) {
    // No start jitter: the first attempt is at once, so a lone process leads from the start.
    super('elector', { intervalMs: opts.intervalMs ?? 5000, startJitterMaxMs: 0 }, opts.logger.child({ component: 'elector' }));
    this.lock = new AdvisoryLeaderLock(opts.connectionString, opts.name ?? 'maintenance');
  }

  /** Whether this process leads, as last told to the listener. */
  get isLeader(): boolean {
    return this.leader;
  }

  /** Sets who is told about changes of leadership (the maintainer). */
  listen(listener: LeadershipListener): void {
    this.listener = listener;
  }

  /**
   * Once `signal` aborts (the process is shutting down), a follower stops trying to become
   * the leader; a leader keeps leading until the elector is stopped.
   */
  campaignUntil(signal: AbortSignal): void {
    this.campaignEnd = signal;
  }

  /** Attempts election (or confirms leadership) once, and tells the listener of a change. */
  async runOnce(_signal?: AbortSignal): Promise<boolean> {
    if (!this.leader && this.campaignEnd?.aborted) return false;
    let leader = await this.lock.leaderAttemptElect();
    if (leader && !this.leader && this.campaignEnd?.aborted) {
      // An attempt that began before shutdown and won after it: hand the lock back.
      await this.lock.leaderResign();
      leader = false;
    }
    if (leader !== this.leader) {
      this.leader = leader;
      this.logger.info({ leader }, leader ? 'elected leader' : 'lost leadership');
      await this.listener(leader);
    }
    return leader;
  }

  /** Tells the listener leadership ends, then releases the lock and its connection. */
  protected override async onStop(): Promise<void> {
    if (this.leader) {
      this.logger.info('resigning leadership');
      this.leader = false;
      await this.listener(false);
    }
    await this.lock.leaderResign();
  }
}

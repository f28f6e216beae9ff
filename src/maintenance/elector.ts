import type { Logger } from '../logger.js';
import { AdvisoryLeaderLock } from '../store/leader.js';
import { PeriodicService } from './periodic.js';

/**
 * Told when this process gains (`true`) or loses (`false`) leadership. The elector waits
 * for it before its next attempt, so gains and losses never overlap; on resign it waits
 * for it before releasing the lock, so the leader's services have stopped by then.
 */
export type LeadershipListener = (leader: boolean) => Promise<void>;

/** The shortest idle_session_timeout of the lock's session (see the Elector constructor). */
const LEADER_IDLE_TIMEOUT_MIN_MS = 10_000;

/**
 * Leader election among all server processes on one database. Leadership is a session-
 * level advisory lock held on a dedicated connection (AdvisoryLeaderLock in the store), so
 * a dead leader's lock is released by the database and another process takes over at its
 * next attempt. Every `intervalMs` the elector tries to take the lock (or confirms it still
 * holds it) and tells its listener, the maintainer, when the answer changes.
 *
 * A lost lock connection is noticed at once: the lock tells the elector, which tells its
 * listener that leadership is lost (the maintainer stops the services) and then attempts
 * again right away. Attempts, losses and the resignation run one at a time, in order.
 *
 * Two leaders may still overlap briefly: the old leader's services finish the tick in
 * progress while stopping, and a new leader may start its own meanwhile. Leader-only work
 * must stay safe to run twice at once: the sweeper's statement skips rows another holds
 * (SKIP LOCKED), and at most one projector batch is open at a time (a unique index on
 * evora.projector_batches), so two projectors apply the same batch, which a sink applies
 * once.
 */
export class Elector extends PeriodicService {
  private readonly lock: AdvisoryLeaderLock;
  private leader = false;
  private listener: LeadershipListener = async () => undefined;
  private campaignEnd: AbortSignal | null = null;
  /** The end of the last attempt, loss or resignation queued: the next one waits for it. */
  private turns: Promise<unknown> = Promise.resolve();

  constructor(opts: {
    connectionString: string;
    /** The election's name: processes with the same name on one database elect one leader. */
    name?: string;
    intervalMs?: number;
    logger: Logger;
  }) {
    // No start jitter: the first attempt is at once, so a lone process leads from the start.
    super('elector', { intervalMs: opts.intervalMs ?? 5000, startJitterMaxMs: 0 }, opts.logger.child({ component: 'elector' }));
    // A frozen leader (SIGSTOP) loses the lock after three missed confirmations (at least
    // 10 s, so a busy event loop does not make leadership flap): the database ends its idle session.
    const idleTimeoutMs = Math.min(Math.max(3 * (opts.intervalMs ?? 5000), LEADER_IDLE_TIMEOUT_MIN_MS), 2_147_483_647);
    this.lock = new AdvisoryLeaderLock(opts.connectionString, opts.name ?? 'maintenance', () => this.lockLost(), idleTimeoutMs);
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

  /**
   * Attempts election (or confirms leadership) once, and tells the listener of a change.
   * When `signal` aborts, an attempt in progress ends (unreachable database or not) and
   * counts as not elected.
   */
  runOnce(signal?: AbortSignal): Promise<boolean> {
    return this.inTurn(() => this.attempt(signal));
  }

  private async attempt(signal?: AbortSignal): Promise<boolean> {
    if (!this.leader && this.campaignEnd?.aborted) return false;
    let leader = await this.lock.leaderAttemptElect(signal);
    if (leader && !this.leader && this.campaignEnd?.aborted) {
      // An attempt that began before shutdown and won after it: hand the lock back.
      await this.lock.leaderResign();
      leader = false;
    }
    await this.tell(leader);
    return leader;
  }

  /**
   * The lock's connection failed or ended while it held the lock: leadership is lost now.
   * The listener is told at once, then (while the elector runs) an attempt follows at once.
   */
  private lockLost(): void {
    void this.inTurn(async () => {
      await this.tell(false);
      const signal = this.loopSignal;
      if (signal && !signal.aborted) await this.attempt(signal);
    }).catch((err: unknown) => this.logger.error({ err }, 'elector: handling the lost lock failed'));
  }

  /** Tells the listener when leadership changed. */
  private async tell(leader: boolean): Promise<void> {
    if (leader === this.leader) return;
    this.leader = leader;
    this.logger.info({ leader }, leader ? 'elected leader' : 'lost leadership');
    await this.listener(leader);
  }

  /** Runs `work` after everything queued before it has ended. */
  private inTurn<T>(work: () => Promise<T>): Promise<T> {
    const run = this.turns.then(work);
    this.turns = run.catch(() => undefined);
    return run;
  }

  /** Tells the listener leadership ends, then releases the lock and its connection. */
  protected override onStop(): Promise<void> {
    return this.inTurn(async () => {
      if (this.leader) {
        this.logger.info('resigning leadership');
        this.leader = false;
        await this.listener(false);
      }
      await this.lock.leaderResign();
    });
  }
}

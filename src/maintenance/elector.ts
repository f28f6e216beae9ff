import type { Logger } from '../logger.js';
import { AdvisoryLeaderLock } from '../store/leader.js';
import { PeriodicService } from './periodic.js';

/**
 * Leader election among all server processes on one database. Maintenance (the sweeper,
 * later the projector and scheduler) runs only where `isLeader` is true. Leadership is a
 * Postgres advisory lock on a dedicated connection, so a dead leader's lock is released by
 * the database and another process takes over at its next attempt.
 */
export class Elector extends PeriodicService {
  private readonly lock: AdvisoryLeaderLock;
  private leader = false;

  constructor(opts: { connectionString: string; name?: string; intervalMs?: number; logger: Logger }) {
    super('elector', opts.intervalMs ?? 5000, opts.logger.child({ component: 'elector' }));
    this.lock = new AdvisoryLeaderLock(opts.connectionString, opts.name ?? 'maintenance');
  }

  /** Whether this process led at the last attempt. */
  get isLeader(): boolean {
    return this.leader && this.lock.isHeld;
  }

  /** Attempts election (or confirms leadership) once. */
  async runOnce(): Promise<boolean> {
    const was = this.leader;
    this.leader = await this.lock.leaderAttemptElect();
    if (this.leader !== was) this.logger.info({ leader: this.leader }, this.leader ? 'elected leader' : 'lost leadership');
    return this.leader;
  }

  protected override async onStop(): Promise<void> {
    if (this.leader) this.logger.info('resigning leadership');
    this.leader = false;
    await this.lock.leaderResign();
  }
}

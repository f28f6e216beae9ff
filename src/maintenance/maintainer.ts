import type { Logger } from '../logger.js';
import { Elector } from './elector.js';
import { Lifecycle, type LifecycleState } from './lifecycle.js';
import type { PeriodicService } from './periodic.js';

/**
 * Runs the leader-only background services (the sweeper, the projector, the pruner, and
 * later the scheduler) on exactly one process per database, like River's
 * QueueMaintainer: its elector holds the leadership lock, and the maintainer **starts** the
 * services when this process is elected and **stops** them when it loses leadership
 * (each stop aborts the tick in progress and waits for it to return). The services know
 * nothing about leadership.
 *
 * What must stay true:
 * - a service runs here only between an election and the next loss (or the stop);
 * - gains and losses are handled one at a time, in order (the elector waits for each);
 * - `stop()` stops the services first, then the elector releases the lock, so a new leader
 *   elected after that never overlaps with services still running here;
 * - `start()`/`stop()` are safe to call twice; the lifecycle states are checked.
 */
export class Maintainer<Services extends Record<string, PeriodicService>> {
  /** The election this maintainer campaigns in (exposed for tests and metrics). */
  readonly elector: Elector;
  /** The leader-only services, by name. */
  readonly services: Services;
  private readonly lifecycle = new Lifecycle('maintainer');
  private readonly logger: Logger;
  private stopping: Promise<void> | null = null;

  constructor(opts: {
    /** The database whose leader runs the services. */
    connectionString: string;
    /** Processes with the same election name on one database elect one leader. */
    electionName?: string;
    /** How often the elector tries to become, or confirms being, the leader. */
    electionIntervalMs?: number;
    services: Services;
    logger: Logger;
  }) {
    this.logger = opts.logger.child({ component: 'maintainer' });
    this.services = opts.services;
    this.elector = new Elector({
      connectionString: opts.connectionString,
      name: opts.electionName,
      intervalMs: opts.electionIntervalMs,
      logger: opts.logger,
    });
    this.elector.listen((leader) => this.leadershipChanged(leader));
  }

  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /** Whether this process leads now (its services are started, or about to be). */
  get isLeader(): boolean {
    return this.elector.isLeader;
  }

  /**
   * Starts campaigning for leadership. `shutdown`, when given, is the process's "shutting
   * down" signal: once it aborts this process no longer tries to become the leader (if it
   * leads, it goes on until `stop()`). A no-op while running.
   */
  start(shutdown?: AbortSignal): void {
    if (this.lifecycle.state === 'starting' || this.lifecycle.state === 'running') return;
    this.lifecycle.to('starting');
    if (shutdown) this.elector.campaignUntil(shutdown);
    this.elector.start();
    this.lifecycle.to('running');
  }

  /**
   * Stops the leader services (each waits for its tick in progress), then the elector
   * releases the lock and closes its connection. Safe to call twice, and also when the
   * maintainer was never started (it then only releases what a test's `runOnce()` took).
   */
  stop(): Promise<void> {
    const state = this.lifecycle.state;
    if (state === 'stopping') return this.stopping!;
    if (state === 'stopped') return this.elector.stop().then(() => this.servicesStop());
    this.lifecycle.to('stopping');
    this.stopping = (async () => {
      try {
        // The elector's stop waits for an election in progress, tells us leadership ends
        // (the services stop), then unlocks.
        await this.elector.stop();
        await this.servicesStop();
      } finally {
        this.stopping = null;
        this.lifecycle.to('stopped');
      }
    })();
    return this.stopping;
  }

  private async leadershipChanged(leader: boolean): Promise<void> {
    if (leader) {
      this.logger.info({ services: Object.keys(this.services) }, 'leader: starting the maintenance services');
      for (const service of Object.values(this.services)) service.start();
    } else {
      this.logger.info('not the leader: stopping the maintenance services');
      await this.servicesStop();
    }
  }

  private async servicesStop(): Promise<void> {
    await Promise.all(Object.values(this.services).map((service) => service.stop()));
  }
}

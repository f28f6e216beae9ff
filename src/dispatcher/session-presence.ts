import { isUnavailable } from '../domain/errors.js';
import { checkTransition, type Transitions } from '../domain/state-machine.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import type { WorkerSessionWrite } from '../store/worker-sessions.js';
import type { WorkerSession } from './session.js';

/** How this server's sessions are recorded in the shared worker-session table. */
export interface SessionPresenceOptions {
  /** This server process (a UUID made at its start). */
  serverId: string;
  /** Its gRPC address (host:port), shown with its sessions. */
  serverAddress: string;
  /** Time between syncs; default 5,000 ms. Must stay well under the 30 s staleness bound. */
  intervalMs?: number;
}

/** A presence's lifecycle: made, syncing (its loop runs), stopped for good. */
type PresenceState = 'new' | 'running' | 'stopped';

const PRESENCE_TRANSITIONS: Transitions<PresenceState> = {
  new: ['running', 'stopped'],
  running: ['stopped'],
  stopped: [],
};

/** The default time between two syncs of a server's sessions. */
export const SESSION_SYNC_INTERVAL_MS = 5_000;

/**
 * Keeps this server's rows of evora.worker_sessions (0014_worker_sessions.sql) equal to its
 * open Work-stream sessions, so every server's ListWorkers and stats see the workers of the
 * whole cluster. Not leader-only: every server runs its own. One loop: a sync (one batched
 * statement: upsert the open sessions with last_seen_at = now, delete this server's other
 * rows) every intervalMs, and soon after a session opens (`kick`); a closed session's row is
 * deleted at once (`closed`). A database outage does not end the loop (it syncs again at the
 * next tick); it is logged at debug, as the store's availability tracker logs the outage.
 * `stop` ends the loop and deletes this server's rows (a server that dies instead leaves
 * rows that go stale after 30 s: reads ignore them, the leader's pruner deletes them).
 */
export class SessionPresence {
  private state: PresenceState = 'new';
  private readonly controller = new AbortController();
  /** The sync loop (while running, and after stop until it has ended). */
  private loop: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private kicked = false;
  private failing = false;

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    private readonly opts: SessionPresenceOptions,
    /** The sessions to record, read at each sync. */
    private readonly sessions: () => Iterable<WorkerSession>,
  ) {}

  /** Starts the loop; a no-op once started or stopped. */
  start(): void {
    if (this.state !== 'new') return;
    this.to('running');
    this.loop = this.run(this.controller.signal);
  }

  /** Syncs soon (a session opened): its row appears without waiting for the next interval. */
  kick(): void {
    this.kicked = true;
    this.wake?.();
  }

  /** Forgets a closed session's row now; a failure is left to the next sync. */
  closed(session: WorkerSession): void {
    if (this.state !== 'running') return;
    this.store.workerSessionDelete({ sessionIds: [session.id] }).catch((err: unknown) => this.failed(err));
  }

  /** Ends the loop, then deletes this server's rows. Safe to call twice. */
  async stop(): Promise<void> {
    if (this.state === 'stopped') return;
    const started = this.state === 'running';
    this.to('stopped');
    this.controller.abort();
    this.wake?.();
    await this.loop;
    if (!started) return;
    try {
      await this.store.workerSessionSync({ serverId: this.opts.serverId, serverAddress: this.opts.serverAddress, sessions: [] });
    } catch (err) {
      const level = isUnavailable(err) ? 'debug' : 'warn';
      this.logger[level]({ err }, "could not delete this server's worker sessions; they go stale in 30 s");
    }
  }

  private to(next: PresenceState): void {
    this.state = checkTransition('worker session presence', PRESENCE_TRANSITIONS, this.state, next);
  }

  /** One sync now (the loop's step; tests call it). */
  async syncOnce(): Promise<void> {
    const sessions: WorkerSessionWrite[] = [];
    for (const s of this.sessions()) {
      if (s.closed) continue;
      sessions.push({
        sessionId: s.id,
        workerId: s.workerId,
        queues: s.queues,
        jobTypes: s.types ?? [],
        slots: s.slots,
        heldJobs: s.held.size,
        freeSlots: s.free,
        connectedAt: s.connectedAt,
      });
    }
    await this.store.workerSessionSync({ serverId: this.opts.serverId, serverAddress: this.opts.serverAddress, sessions });
  }

  private async run(signal: AbortSignal): Promise<void> {
    const intervalMs = this.opts.intervalMs ?? SESSION_SYNC_INTERVAL_MS;
    while (!signal.aborted) {
      this.kicked = false;
      try {
        await this.syncOnce();
        if (this.failing) this.logger.info('worker sessions recorded again');
        this.failing = false;
      } catch (err) {
        this.failed(err);
      }
      if (signal.aborted || this.kicked) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, intervalMs);
        timer.unref();
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.wake = done;
      });
      this.wake = null;
    }
  }

  /**
   * A database outage is logged at debug (the store's availability tracker says it once for
   * the whole server); any other failure at warn, once until a sync succeeds again.
   */
  private failed(err: unknown): void {
    if (this.failing || isUnavailable(err)) {
      this.logger.debug({ err }, 'worker sessions not recorded');
      return;
    }
    this.failing = true;
    this.logger.warn({ err }, 'worker sessions not recorded (other servers do not see them); retrying every few seconds');
  }
}

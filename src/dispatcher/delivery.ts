import type { Job, LeaseRef } from '../domain/job.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import { heldLease, type HeldLease, type WorkerSession } from './session.js';
import { isUnavailable } from '../domain/errors.js';

/**
 * Pushing leased jobs to the sessions they were dealt to, and knowing which session of this
 * server holds which job (the slot it occupies, and where an operator's cancel goes). What
 * must stay true: every job a claim or hand-off leased is either pushed (and then held by its
 * session until a write, a lost heartbeat or its expiry frees it) or released at once, so no
 * lease is left to expire for a worker that never got the job.
 */
export class JobDelivery {
  /** Which session holds a job, for routing cancels. */
  private readonly holders = new Map<string, WorkerSession>();
  /** Told whenever a held job is dropped or a session goes (drainAll waits on them). */
  private readonly watchers = new Set<() => void>();

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    /** Told of each job pushed. */
    private readonly pushed: ((session: WorkerSession, job: Job) => void) | undefined,
    /** Once true, nothing more is pushed: every job dealt is released. */
    private readonly stopped: () => boolean,
  ) {}

  /** The session of this server that holds the job, if any. */
  holderOf(jobId: string): WorkerSession | undefined {
    return this.holders.get(jobId);
  }

  /** Records a lease the session holds (pushed, or named in its hello and still current). */
  hold(session: WorkerSession, jobId: string, lease: HeldLease): void {
    session.hold(jobId, lease);
    this.holders.set(jobId, session);
  }

  /**
   * Forgets that the session holds the job (its slot and the cancel route); returns whether
   * it did. With `token`, only that lease (see WorkerSession.drop).
   */
  drop(session: WorkerSession, jobId: string, token?: string): boolean {
    if (!session.drop(jobId, token)) return false;
    if (this.holders.get(jobId) === session) this.holders.delete(jobId);
    this.changed();
    return true;
  }

  /**
   * Forgets the session's leases that expired before `cutoff` (ms since the epoch; see
   * WorkerSession.dropExpired) and returns them.
   */
  dropExpired(session: WorkerSession, cutoff: number): LeaseRef[] {
    const expired = session.dropExpired(cutoff);
    if (expired.length === 0) return expired;
    for (const { id } of expired) if (this.holders.get(id) === session) this.holders.delete(id);
    this.changed();
    return expired;
  }

  /** The session closed: cancels for its jobs go nowhere here any more (its leases run on). */
  sessionGone(session: WorkerSession): void {
    for (const jobId of session.held.keys()) {
      if (this.holders.get(jobId) === session) this.holders.delete(jobId);
    }
    this.changed();
  }

  /**
   * Pushes each session the jobs leased to it. Jobs that cannot be pushed (the session closed
   * or drains, the dispatcher stopped, or the gRPC layer could not encode or write them) are
   * released at once.
   */
  async push(dealt: Map<WorkerSession, Job[]>): Promise<void> {
    const undeliverable: Job[] = [];
    for (const [session, list] of dealt) {
      if (!session.deliverable || this.stopped()) {
        undeliverable.push(...list);
        continue;
      }
      try {
        this.send(session, list);
      } catch (err) {
        this.logger.error({ err, jobs: list.length, worker_id: session.workerId }, 'could not push jobs; releasing them');
        for (const job of list) this.drop(session, job.id);
        undeliverable.push(...list);
      }
    }
    if (undeliverable.length > 0) await this.release(undeliverable);
  }

  /**
   * Resolves when `held()` (the jobs held by open sessions) is 0, or after timeoutMs. Checked
   * on every drop and every closed session; its timer goes with it.
   */
  untilNoneHeld(held: () => number, timeoutMs: number): Promise<void> {
    if (held() === 0 || timeoutMs <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => {
        if (held() === 0) done();
      };
      const done = () => {
        clearTimeout(timer);
        this.watchers.delete(check);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.watchers.add(check);
    });
  }

  private send(session: WorkerSession, jobs: Job[]): void {
    for (const job of jobs) {
      // The database keeps a RUNNING job's locked_until set; hold() throws without one (a
      // bug), and push() then drops and releases the whole list.
      const expiresAt = job.lockedUntil?.getTime() ?? Number.NaN;
      session.hold(job.id, heldLease(job.leaseToken ?? '', expiresAt, expiresAt - (job.startedAt?.getTime() ?? expiresAt)));
      this.holders.set(job.id, session);
    }
    session.send({ kind: 'jobs', jobs });
    if (this.pushed) for (const job of jobs) this.pushed(session, job);
  }

  /** Gives claimed jobs back at once (their worker went away between claim and push). */
  private async release(jobs: Job[]): Promise<void> {
    try {
      await this.store.jobSnoozeMany({
        snoozes: jobs.map((j) => ({ id: j.id, token: j.leaseToken ?? '', runAt: j.runAt })),
      });
    } catch (err) {
      this.logger[isUnavailable(err) ? 'debug' : 'warn']({ err, jobs: jobs.length }, 'could not release undelivered jobs; their leases will expire');
    }
  }

  private changed(): void {
    if (this.watchers.size === 0) return; // the common case: nobody drains
    for (const watch of this.watchers) watch();
  }
}

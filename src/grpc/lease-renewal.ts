import type { LeaseRef } from '../domain/job.js';

/** Renewals never come closer together than this (a lease of 1 s is renewed every 333 ms). */
const MIN_EVERY_MS = 100;

/** While blocked, the worker counts as reading while it read within this many lease lengths. */
const READ_WINDOW_LEASES = 2;

/** What a LeaseRenewal needs from its Work stream. */
export interface LeaseRenewalDeps {
  /** Messages the transport sent on so far (StreamWriter.handedOver): it grows as the worker reads. */
  progress(): number;
  /** Whether the stream's writer is blocked now (the stream then reads nothing from the worker). */
  blocked(): boolean;
  /** When the stream last read a message of the worker (performance.now()). */
  heardAt(): number;
  /** Every lease the session holds now, and the shortest of their lengths (ms; Infinity: none held). */
  held(): { leases: LeaseRef[]; shortestMs: number };
  /** The leases pushed that the worker has not named yet, within IN_TRANSIT_RENEW_MS of their push (WorkerSession.inTransit). */
  inTransit(): LeaseRef[];
  /**
   * Whether a lease pushed within IN_TRANSIT_RENEW_MS is still unnamed, due for renewal now
   * or once older (WorkerSession.awaitsNaming): renewals go on while one is.
   */
  awaitsNaming(): boolean;
  /** Extends the leases that are still current (Dispatcher.sessionRenew); rejections are the caller's to log. */
  renew(leases: LeaseRef[]): Promise<unknown>;
}

/**
 * Renews, on the worker's behalf, the leases of a Work stream's session that the worker
 * cannot renew itself because of the network between them:
 *  - the jobs pushed that have not reached it yet (it has not named them in a heartbeat):
 *    a job's lease runs from its claim, and on a slow link the job may take longer than its
 *    lease to arrive. A far worker on 10 Mbit/s (grpc-js: 250 KB/s at 150 ms RTT) with 100
 *    slots and payloads of 100 KB is pushed 10 MB by one claim;
 *  - while the writer is blocked (more than WRITER_HIGH_WATER_BYTES wait to be written), every
 *    lease it holds: the stream reads nothing from the worker then, so its heartbeats and
 *    reports wait unread behind the jobs.
 * Before this, every job's lease ran out on the way or unread; each was swept, claimed again
 * and pushed again into the same full link (measured with toxiproxy: 20 of 300 jobs done in
 * 400 s, each attempt spent without running), although the worker was healthy.
 *
 * What must stay true: while blocked, all leases are renewed only if the worker read a message
 * within two of the shortest lease held (a message of 1 MB takes 4 s at 250 KB/s), so a worker that stops reading still loses its leases, within three lease
 * lengths, as docs/api.md ("Backpressure: keep reading") says; otherwise only jobs the worker
 * has not named are renewed, and only while the worker sent something within two of the
 * shortest lease (a stopped or silent worker loses them as before, a little later); each for
 * at most IN_TRANSIT_RENEW_MS after its push (a worker that lost one without a
 * word keeps it no longer, plus a lease); renewals come at least every third of the shortest
 * lease held; at most one is in flight; none once stopped.
 */
export class LeaseRenewal {
  #timer: NodeJS.Timeout | null = null;
  #seen = 0;
  /** When the worker was last seen reading (now()): the count moved, or the writer was not blocked. */
  #readAt = 0;
  #inFlight = false;
  #stopped = false;

  constructor(
    private readonly deps: LeaseRenewalDeps,
    private readonly onError: (err: unknown) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Jobs were pushed, or the writer blocked: renew from now on, while there is something to renew. */
  wake(): void {
    if (this.#timer || this.#stopped) return;
    this.#seen = this.deps.progress();
    this.#readAt = this.now();
    this.schedule();
  }

  /** The stream closed: no more renewals. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  private schedule(): void {
    const { shortestMs } = this.deps.held();
    const every = Number.isFinite(shortestMs) ? Math.max(MIN_EVERY_MS, Math.floor(shortestMs / 3)) : 1_000;
    this.#timer = setTimeout(() => this.tick(), every);
  }

  private tick(): void {
    this.#timer = null;
    const blocked = this.deps.blocked();
    const progress = this.deps.progress();
    if (progress !== this.#seen || !blocked) this.#readAt = this.now();
    this.#seen = progress;
    const { leases, shortestMs } = this.deps.held();
    const window = READ_WINDOW_LEASES * shortestMs;
    const reading = this.now() - this.#readAt <= window;
    // Not blocked, the worker's heartbeats are read: jobs on their way are renewed while it
    // keeps sending them (an SDK worker beats with no job in hand too).
    const heard = this.now() - this.deps.heardAt() <= window;
    const due = blocked ? (reading ? leases : []) : heard ? this.deps.inTransit() : [];
    // Nothing to renew, none to renew later, and not blocked: sleep until the next push or
    // block wakes it. A job pushed since the last wake-up, too young to renew at this tick, is
    // renewed at a later one: a push while the timer ran did not wake it (the timer was set),
    // and without the check its lease ran out while its worker beat (1 s leases: pushed 0.2 s
    // before the tick, it got no renewal at all).
    if (!blocked && due.length === 0 && !this.deps.awaitsNaming()) return;
    if (due.length > 0 && !this.#inFlight) {
      this.#inFlight = true;
      this.deps
        .renew(due)
        .catch(this.onError)
        .finally(() => {
          this.#inFlight = false;
        });
    }
    this.schedule();
  }
}

import type { ServerHeartbeatAck, ServerWelcome, WorkRequest } from '../../gen/evora/v1/worker.js';
import type { HeldJob, HeldJobs } from './held-job.js';
import type { LongTimer, TimerSet } from './timers.js';
import type { WorkerLog } from './types.js';

/** No message at all from the server for this long (heartbeats are always answered): the connection is dead. */
export const STALE_MS = 30_000;
const MIN_BEAT_MS = 100;
const MAX_UNANSWERED = 64;

/**
 * The heartbeat timer and the lease bookkeeping it drives. One timer, independent of the
 * handlers, renews every lease the worker holds (running jobs and reports awaiting their
 * ack) at the server's interval, and never less often than a third of the shortest lease
 * held; a hanging handler cannot stop the others' leases from being renewed.
 *
 * What must stay true: the timer runs only while a session is open (start() after each
 * welcome, stop() when the stream ends); a push with a shorter lease than the schedule
 * assumed renews at once and moves to the faster schedule; a server that stays silent for
 * max(30 s, 3 intervals) is reported through `silent` (the worker then drops the stream).
 */
export class Heartbeats {
  private welcome: ServerWelcome | null = null;
  private timer: LongTimer | null = null;
  /** The interval the timer was last set with. */
  private intervalMs = 0;
  /** When each unanswered heartbeat was sent, oldest first (acks come back in order). */
  private unanswered: number[] = [];

  constructor(
    private readonly deps: {
      timers: TimerSet;
      jobs: HeldJobs;
      log: WorkerLog;
      /** Writes on the open session; false if there is none. */
      send: (req: WorkRequest) => boolean;
      /** When the server was last heard from (Date.now() clock). */
      lastHeardAt: () => number;
      /** The server has been silent too long. */
      silent: (silentMs: number) => void;
      /** The server says an operator asked to cancel this running job. */
      cancelRequested: (h: HeldJob) => void;
    },
  ) {}

  /** A session opened: beat now (renewing, and learning the state of, carried-over leases) and keep beating. */
  start(welcome: ServerWelcome): void {
    this.welcome = welcome;
    this.unanswered = [];
    this.beat();
  }

  /** The session ended: no more beats until the next start(). */
  stop(): void {
    this.welcome = null;
    this.unanswered = [];
    this.timer = this.deps.timers.clear(this.timer);
  }

  /** A job with this lease length is now held: renew now if the schedule is too slow for it. */
  leaseAdded(leaseMs: number): void {
    if (this.timer && Math.max(MIN_BEAT_MS, Math.floor(leaseMs / 3)) < this.intervalMs) this.beat();
  }

  /**
   * The server renewed leases: record their new ends, and pass on cancel requests. `late`:
   * the ack was read from a stream that has ended (its renewals and cancels still hold, but
   * it answers none of this session's beats).
   */
  acked(ack: ServerHeartbeatAck, late: boolean): void {
    if (!late) this.unansweredPrune(Date.now());
    const sentAt = late ? undefined : this.unanswered.shift();
    const jobs = this.deps.jobs;
    const running = jobs.running;
    for (const l of ack.leases) {
      const r = running.get(l.jobId);
      const h = r?.token === l.leaseToken ? r : jobs.reportUnder(l.jobId, l.leaseToken);
      if (!h) continue;
      h.leaseExpiresAt = l.leaseExpiresAt ?? h.leaseExpiresAt;
      // Renewed after the beat was sent, so the lease surely lasts until then plus its length.
      if (sentAt !== undefined) h.leaseDeadline = Math.max(h.leaseDeadline, sentAt + h.leaseMs);
      if (l.cancelRequested && running.get(l.jobId) === h) this.deps.cancelRequested(h);
    }
  }

  /**
   * Forgets the send times of beats too old to be answered any more. A beat the server
   * could not write (its database away) is never answered, and acks carry no id: paired by
   * order, every later ack would take a send time one beat older, for good, and the leases'
   * deadlines would stop moving (a report answered RETRY_LATER then given up at once). An
   * answer comes well within the silence bound (max(STALE_MS, 3 intervals)) or the stream is
   * dropped, so a send time older than that answers nothing: the pairing is right again once
   * such beats age out, and the list stays short.
   */
  private unansweredPrune(now: number): void {
    const oldest = now - Math.max(STALE_MS, 3 * this.intervalMs);
    while (this.unanswered.length > 0 && this.unanswered[0]! < oldest) this.unanswered.shift();
  }

  /**
   * How often to renew: the server's interval, but never less often than a third of the
   * shortest lease held (a queue's lease may be shorter than the one the welcome assumed).
   * Walks the held jobs once per beat, never per job.
   */
  private beatIntervalMs(): number {
    const w = this.welcome;
    let ms = 10_000;
    if (w) {
      if (w.heartbeatIntervalMs > 0) ms = w.heartbeatIntervalMs;
      else if (w.heartbeatIntervalSeconds > 0) ms = w.heartbeatIntervalSeconds * 1000;
      else ms = (w.leaseSeconds * 1000) / 3;
      if (w.leaseSeconds > 0) ms = Math.min(ms, (w.leaseSeconds * 1000) / 3);
    }
    ms = Math.min(ms, this.deps.jobs.shortestLeaseMs() / 3);
    return Math.max(MIN_BEAT_MS, Math.floor(ms));
  }

  private beat(): void {
    this.timer = this.deps.timers.clear(this.timer);
    if (!this.welcome) return;
    const interval = this.beatIntervalMs();
    const silentMs = Date.now() - this.deps.lastHeardAt();
    if (silentMs > Math.max(STALE_MS, 3 * interval)) {
      this.deps.silent(silentMs);
      return;
    }
    if (this.deps.send({ msg: { $case: 'heartbeat', value: { leases: this.deps.jobs.leases() } } })) {
      this.unanswered.push(Date.now());
      // A server that never answers must not make this grow without end.
      if (this.unanswered.length > MAX_UNANSWERED) this.unanswered.shift();
    }
    this.intervalMs = interval;
    this.timer = this.deps.timers.after(interval, () => this.beat());
  }
}

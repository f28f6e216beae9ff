// About 650 lines on purpose: the dispatcher owns its parts and the paths between them,
// which are read best in one place.
import type { CancelReason, DrainReason } from '../domain/codes.js';
import type { HeartbeatOutcome, Job, JobSubmitInput, JobSubmitResult, JobWritten, LeaseRef, ProgressReport } from '../domain/job.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import { JobDelivery } from './delivery.js';
import { LongPollWaiters } from './long-poll.js';
import { QueueClaimer, type ClaimerHost } from './queue-claimer.js';
import { WorkerSession, heldLease, typesKeyOf, type SessionMessage } from './session.js';
import { checkTransition, type Transitions } from '../domain/state-machine.js';
import { ProgressWrites } from './progress-writes.js';
import { WorkerWrites, type CompleteWrite, type FailWrite, type SnoozeWrite, type WorkerWriteRequest, type WriteAck, type WriteKind, type WriteListener, type WriteRequest } from './worker-writes.js';
import { isUnavailable } from '../domain/errors.js';

/**
 * The dispatcher matches claimed jobs to workers' free slots. It knows nothing of gRPC:
 * the gRPC layer opens a session per Work stream and relays its messages.
 *
 * What must stay true (docs/dispatcher.md explains how):
 * - a session never holds more jobs than its slots (claims and hand-offs reserve the slots first);
 * - one SKIP LOCKED statement claims for all reserved slots of a queue, and the claimed
 *   jobs are dealt round-robin, best job first, over the queue's sessions;
 * - a submit hands its job to a free slot here only when a claim would pick it now
 *   (the store decides that in the submit's statement); a job leased so is pushed or released;
 * - a worker write is answered only after the batch that carries it has committed;
 * - a session holds a lease only until that lease ends (plus leaseExpiryGraceMs): then the
 *   worker is told lease_lost and the slot is free (dropExpiredLeases). A lease ends at its
 *   expiry, or later while its worker keeps asking to renew it (a heartbeat naming it): a
 *   database outage, which fails the renewals, does not take the leases of live workers.
 *
 * The parts: session.ts (a worker session, its slots and leases), queue-claimer.ts (one
 * queue's claim loop), delivery.ts (pushing leased jobs, and which session holds which),
 * worker-writes.ts and batcher.ts (group commit of worker writes), long-poll.ts (unary
 * claims waiting for work), progress-writes.ts (coalesced progress reports); this file owns
 * them and the paths between them.
 */

import { SessionPresence, type SessionPresenceOptions } from './session-presence.js';
import { DatabaseClock } from './database-clock.js';
import type { ClaimedJobs } from '../store/jobs-claim.js';
export { WorkerSession } from './session.js';
export type { HeldLease, SessionMessage, SessionState } from './session.js';
export type { ClaimerState } from './queue-claimer.js';
export type { CompleteWrite, FailWrite, SnoozeWrite, WorkerWriteRequest, WriteAck, WriteKind, WriteListener, WriteRequest } from './worker-writes.js';

/** Options for the dispatcher. */
export interface DispatcherOptions {
  store: Store;
  logger: Logger;
  /** Fallback poll for queues with free slots (NOTIFY is the fast path). */
  pollIntervalMs: number;
  /** Largest claim in one statement. */
  maxClaimBatch?: number;
  /**
   * Under load (the previous claim of a queue filled every slot it asked for), the next
   * claim waits up to this long for a quarter of the queue's slots to be free, so claims
   * are few and large instead of one per finished batch. An idle queue's first claim never
   * waits. 0 turns it off.
   */
  claimCooldownMs?: number;
  /**
   * How long after a held lease's expiry (`locked_until`, the database's clock) the session
   * stops counting it and tells the worker lease_lost; default 2,000 ms. Why a margin: this
   * process's clock may run ahead of PostgreSQL's (hosts synced by NTP differ by far less),
   * a heartbeat may be on its way, and the database honours an expired lease until the
   * sweeper (each EVORA_SWEEP_INTERVAL_MS, 1 s by default) requeues the job; after the
   * margin the lease is usually gone in the database too. Why not more: the slot is idle
   * for as long. Checked on the fallback poll's tick, so a lease is dropped up to
   * pollIntervalMs after expiry + margin.
   */
  leaseExpiryGraceMs?: number;
  /** How often coalesced progress reports are written (default 1,000 ms: at most one write per job per second). */
  progressFlushMs?: number;
  /** Told of claims, pushes and finished writes (for metrics and logs). */
  observer?: DispatcherObserver;
  /**
   * Records this server's sessions in the shared worker-session table (ListWorkers, stats
   * across servers) while polling; unset: not recorded (a dispatcher of a test).
   */
  presence?: SessionPresenceOptions;
  /**
   * This process's clock (ms since the epoch; default Date.now), which DatabaseClock sets
   * against the database's: a test passes one that runs ahead of PostgreSQL's.
   */
  localClock?: () => number;
}

/** What the dispatcher reports as it works; every method is optional. */
export interface DispatcherObserver {
  claimed?(queue: string, asked: number, got: number, ms: number): void;
  pushed?(session: WorkerSession, job: Job): void;
  /** A worker's complete, fail or snooze committed; `job` is its new state. */
  written?(write: WriteKind, job: JobWritten): void;
}

/**
 * A fallback poll this much later than its interval says the process was stalled: the
 * expiry check waits one tick, so that the heartbeats sent meanwhile are read first.
 */
const POLL_STALL_MS = 2000;

/**
 * Where the dispatcher is: `ready` (made; claims on wake-ups, no fallback poll yet),
 * `polling` (start() ran: the fallback poll and the lease-expiry check run too), `stopped`
 * (drainAll ran: nothing new is claimed, handed off or pushed, and no timer of the
 * dispatcher's runs any more, but the expiry check while a drainAll waits).
 */
export type DispatcherState = 'ready' | 'polling' | 'stopped';

/** The moves the dispatcher may make: it is started at most once and never restarted. */
export const DISPATCHER_TRANSITIONS: Transitions<DispatcherState> = {
  ready: ['polling', 'stopped'],
  polling: ['stopped'],
  stopped: [],
};

/**
 * Owns every worker session of this server process and the per-queue claimers; routes
 * worker writes through group commit, heartbeats, cancels, submits with hand-off and unary
 * claims.
 */
export class Dispatcher {
  /**
   * The claimers, by queue, then by the job-type key of their sessions (job-type routing:
   * WorkerSession.typesKey; '*' = any type): one claimer per (queue, type set) with sessions here.
   */
  private readonly queues = new Map<string, Map<string, QueueClaimer>>();
  private readonly sessions = new Set<WorkerSession>();
  private readonly delivery: JobDelivery;
  private readonly writes: WorkerWrites;
  private readonly progressWrites: ProgressWrites;
  /**
   * Claims and hand-off submits in flight. drainAll waits for them, so every job they lease
   * is pushed or released before shutdown goes on.
   */
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly waiters = new LongPollWaiters();
  /** Aborted by drainAll: ends the long-poll waits. */
  private readonly stopping = new AbortController();
  private readonly claimerHost: ClaimerHost;
  private pollTimer: NodeJS.Timeout | null = null;
  /** When expiryTick last ran (this process's clock: databaseClock.local(); null before the first tick of a timer). */
  private lastTickAt: number | null = null;
  /** This server's sessions in the shared table (null: not recorded). */
  private readonly presence: SessionPresence | null;
  private _state: DispatcherState = 'ready';
  /** Why drainAll asked the workers to drain (told to sessions opened after it, too). */
  private drainReason: DrainReason = 'server_shutdown';
  /** PostgreSQL's clock as this process reckons it: leases and tokens are on it. */
  private readonly databaseClock: DatabaseClock;

  constructor(private readonly opts: DispatcherOptions) {
    const { store } = opts;
    this.databaseClock = new DatabaseClock(opts.logger, opts.localClock);
    this.progressWrites = new ProgressWrites(store, opts.logger, opts.progressFlushMs);
    this.writes = new WorkerWrites(store, opts.logger, (request, ack) => this.written(request, ack), this.progressWrites);
    this.delivery = new JobDelivery(
      store,
      opts.logger,
      (session, job) => opts.observer?.pushed?.(session, job),
      () => this._state === 'stopped',
    );
    this.claimerHost = {
      claim: async (queue, workerIds, types) => {
        const askedAt = this.databaseClock.local();
        return this.claimed(await store.jobClaim({ queues: [queue], workerIds, types }), askedAt);
      },
      deliver: (dealt) => this.delivery.push(dealt),
      slotUnused: (session) => this.wakeQueuesOf(session),
      track: (run) => this.track(run),
      loopEnded: (claimer) => this.forgetIfUnused(claimer),
      claimed: (queue, asked, got, ms) => opts.observer?.claimed?.(queue, asked, got, ms),
      logger: opts.logger,
    };
    this.presence = opts.presence ? new SessionPresence(store, opts.logger, opts.presence, () => this.sessions) : null;
  }

  /** Where the dispatcher is (see DispatcherState). */
  get state(): DispatcherState {
    return this._state;
  }

  /** Starts the fallback poll. Safe to call twice; does nothing once stopped. */
  start(): void {
    if (this._state !== 'ready') return;
    this.to('polling');
    this.pollTimer = setInterval(() => this.poll(), this.opts.pollIntervalMs);
    this.pollTimer.unref();
    this.presence?.start();
  }

  /**
   * Shutdown, after drainAll and once the streams ended: stops recording the sessions and
   * deletes this server's rows of the shared table. Safe to call twice.
   */
  async close(): Promise<void> {
    await this.presence?.stop();
  }

  // ----- wake-ups -----------------------------------------------------------------------

  /** A NOTIFY said this queue has claimable work. */
  notifyQueue(queue: string): void {
    this.waiters.wakeQueue(queue);
    for (const q of this.claimersOf(queue)) q.wake();
  }

  /** Every claimer of a queue here (one per type set of its sessions). */
  private claimersOf(queue: string): Iterable<QueueClaimer> {
    return this.queues.get(queue)?.values() ?? [];
  }

  /** Every claimer here. */
  private *allClaimers(): Iterable<QueueClaimer> {
    for (const group of this.queues.values()) yield* group.values();
  }

  /** Wake every queue: after the LISTEN connection (re)connects, notifications may have been missed. */
  notifyAll(): void {
    this.waiters.wakeAll();
    for (const q of this.allClaimers()) q.wake();
  }

  /**
   * A NOTIFY on evora_job_cancel: tell the worker that holds the job here, if any. The
   * payload is the job id (an operator's cancel, job-cancel.sql) or "<id> timeout" (the
   * sweeper failed an attempt past its timeout, job-sweep-timed-out.sql).
   */
  notifyCancel(payload: string): void {
    const [jobId = '', why] = payload.split(' ');
    const reason: CancelReason = why === 'timeout' ? 'timeout' : 'operator';
    this.delivery.holderOf(jobId)?.send({ kind: 'cancel', jobId, reason });
  }

  /**
   * The fallback poll: first the sessions' expired leases (no query), then only queues with
   * free slots (an idle or busy server queries nothing). Which queues to wake is decided
   * before waking any: a woken queue's claim reserves every free slot of its sessions at
   * once, and a session takes jobs from several queues, so deciding queue by queue left the
   * queues after the first without free slots: never polled, their due retries waited for a
   * NOTIFY that never comes. A queue whose slots an earlier queue's claim just reserved goes
   * `wanted` and claims when that claim gives them back. The idle queues none of whose
   * sessions has a free slot are asked in one statement whether a job is due in them, and
   * those are made `wanted`, so the next freed slot claims them: when the poll skipped them,
   * a worker busy with another queue's backlog (a freed slot is claimed again before any tick
   * sees it) never got the jobs that came due meanwhile until that backlog drained. One
   * such question at a time; a failed one is left to the next tick.
   */
  private poll(): void {
    this.expiryTick();
    const due: QueueClaimer[] = [];
    const busy: QueueClaimer[] = [];
    for (const q of this.allClaimers()) {
      if ([...q.sessions].some((s) => s.free > 0)) due.push(q);
      else if (q.state === 'idle') busy.push(q);
    }
    for (const q of due) q.wake();
    if (busy.length > 0 && !this.busyPollRunning) {
      this.busyPollRunning = true;
      void this.track(this.pollBusy(busy)).finally(() => (this.busyPollRunning = false));
    }
  }

  /** A poll of busy sessions' idle queues is in flight (see poll). */
  private busyPollRunning = false;

  /** Makes `wanted` those of these idle claimers whose queue has a job due now (see poll). */
  private async pollBusy(claimers: QueueClaimer[]): Promise<void> {
    let dueNow: Set<string>;
    try {
      dueNow = new Set(await this.opts.store.jobQueuesDue({ queues: [...new Set(claimers.map((q) => q.name))] }));
    } catch (err) {
      if (!isUnavailable(err)) this.opts.logger.error({ err }, 'poll of busy queues failed; the next tick asks again');
      return;
    }
    for (const q of claimers) if (dueNow.has(q.name)) q.mayHaveWork();
  }

  // ----- sessions -----------------------------------------------------------------------

  /**
   * Opens a session for a worker's stream. `held` are leases the worker still holds from an
   * earlier stream: the current ones occupy slots until finished. A session opened once
   * drainAll has run is drained at once and told so (it gets no jobs; it may finish its own).
   * `types` (job-type routing): the job types it runs, deduplicated and sorted; unset or null
   * = any type. It is given only jobs of those types.
   */
  async sessionOpen(params: {
    workerId: string;
    queues: string[];
    slots: number;
    types?: string[] | null;
    held?: LeaseRef[];
    send: (msg: SessionMessage) => void;
  }): Promise<WorkerSession> {
    const types = params.types && params.types.length > 0 ? [...new Set(params.types)].sort() : null;
    const session = new WorkerSession(params.workerId, [...new Set(params.queues)], params.slots, params.send, types);
    if (params.held && params.held.length > 0) {
      // Only the leases still current hold slots; a stale lease of a job (its current one
      // named too, or not) is told lost with its own token.
      const beat = await this.opts.store.jobHeartbeatMany({ leases: params.held });
      session.lostOnOpen.push(...beat.lost);
      // The heartbeat renewed each from about now: its length is what is left of it.
      const now = this.databaseClock.now();
      for (const lease of beat.extended) {
        const expiresAt = lease.lockedUntil.getTime();
        this.delivery.hold(session, lease.id, heldLease(lease.token, expiresAt, expiresAt - now, true));
      }
    }
    this.sessions.add(session);
    if (this._state === 'stopped') {
      // Opened while (or after) drainAll ran: drained as the sessions it found were.
      session.drain();
      session.send({ kind: 'drain', reason: this.drainReason });
    }
    for (const name of session.queues) {
      let group = this.queues.get(name);
      if (!group) this.queues.set(name, (group = new Map()));
      let q = group.get(session.typesKey);
      if (!q) {
        q = new QueueClaimer(name, this.claimerHost, {
          maxClaimBatch: this.opts.maxClaimBatch ?? 1000,
          claimCooldownMs: this.opts.claimCooldownMs ?? 5,
          types,
        });
        if (this._state === 'stopped') q.stop();
        group.set(session.typesKey, q);
      }
      q.sessions.add(session);
      q.wake();
    }
    this.presence?.kick();
    return session;
  }

  /**
   * The stream ended. Jobs it held keep their leases until they expire: the worker may
   * reconnect and finish them with their tokens; otherwise the sweeper requeues them.
   */
  sessionClose(session: WorkerSession): void {
    if (!session.close()) return;
    this.sessions.delete(session);
    this.presence?.closed(session);
    for (const name of session.queues) {
      const q = this.queues.get(name)?.get(session.typesKey);
      if (!q) continue;
      q.sessions.delete(session);
      this.forgetIfUnused(q);
    }
    this.delivery.sessionGone(session);
  }

  /** The worker asked for nothing new; it keeps finishing what it holds. Ignored once the stream closed. */
  sessionDrain(session: WorkerSession): void {
    if (!session.closed) session.drain();
  }

  /**
   * Backpressure: the worker's stream cannot take more now. The session gets no new pushes
   * (its free slots count as 0) until sessionResume; jobs already claimed for its reserved
   * slots are still pushed (the stream buffers them). Ignored on a draining or closed session.
   */
  sessionPause(session: WorkerSession): void {
    if (!session.closed) session.pause();
  }

  /** The worker's stream can take more again: its queues claim for its free slots. */
  sessionResume(session: WorkerSession): void {
    if (!session.closed && session.resume()) this.wakeQueuesOf(session);
  }

  /** Number of open sessions and their free slots (for stats and tests). */
  sessionStats(): { sessions: number; held: number; free: number } {
    let held = 0;
    let free = 0;
    for (const s of this.sessions) {
      held += s.held.size;
      free += s.free;
    }
    return { sessions: this.sessions.size, held, free };
  }

  /** Workers connected here that take jobs from a queue, and their free slots. */
  queueWorkers(queue: string): { workers: number; freeSlots: number } {
    const sessions = [...this.claimersOf(queue)].flatMap((q) => [...q.sessions]);
    return { workers: sessions.length, freeSlots: sessions.reduce((n, s) => n + s.free, 0) };
  }

  /** Forgets a queue's claimer once it has no sessions and no claim loop. */
  private forgetIfUnused(q: QueueClaimer): void {
    if (q.sessions.size > 0 || q.running) return;
    const group = this.queues.get(q.name);
    const key = typesKeyOf(q.types);
    if (group?.get(key) !== q) return;
    group.delete(key);
    q.forgotten();
    if (group.size === 0) this.queues.delete(q.name);
  }

  // ----- worker writes ------------------------------------------------------------------

  /** Completes a job; resolves after the commit. The slot frees either way. */
  complete(session: WorkerSession | null, p: CompleteWrite): Promise<WriteAck<JobWritten>> {
    return new Promise((resolve, reject) => this.writes.add({ kind: 'complete', write: p, session, listener: promised(resolve, reject) }));
  }

  /** Fails a job (retry, DLQ, or CANCELLED if an operator asked); resolves after the commit. */
  fail(session: WorkerSession | null, p: FailWrite): Promise<WriteAck<Job>> {
    return new Promise((resolve, reject) => this.writes.add({ kind: 'fail', write: p, session, listener: promised(resolve, reject) }));
  }

  /** Snoozes a job until runAt; resolves after the commit. */
  snooze(session: WorkerSession | null, p: SnoozeWrite): Promise<WriteAck<Job>> {
    return new Promise((resolve, reject) => this.writes.add({ kind: 'snooze', write: p, session, listener: promised(resolve, reject) }));
  }

  /**
   * complete(), fail() or snooze() for a Work stream: the request's listener hears the answer
   * after the commit (no promise per report: a stream answers thousands a second).
   */
  report(request: WorkerWriteRequest): void {
    this.writes.add(request);
  }

  /**
   * A progress report (coalesced: written with the next flush, about once a second). For a
   * Work stream (`session` set), a report whose lease is not current while the session still
   * holds that lease is told lease_lost and frees its slot, as a heartbeat's lost lease is; one
   * about a lease the session no longer holds (its complete, fail or snooze was answered, or
   * lease_lost was sent) is not answered: the worker already knows, and a lease_lost racing
   * the ack of its completion would only confuse it. The promise says whether the lease was
   * current (false: nothing changed) and rejects when the write failed.
   */
  progress(session: WorkerSession | null, report: ProgressReport): Promise<boolean> {
    return new Promise((resolve, reject) =>
      this.progressWrites.add(report, {
        written: (accepted) => {
          if (!accepted && session && !session.closed && this.delivery.drop(session, report.id, report.token)) {
            session.send({ kind: 'leaseLost', jobId: report.id, token: report.token, reason: 'expired' });
            this.wakeQueuesOf(session);
          }
          resolve(accepted);
        },
        failed: reject,
      }),
    );
  }

  /**
   * Extends a session's leases. Each lost lease is told to the worker (lease_lost, with its
   * token) and frees its slot if it is the lease the session holds: a stale lease of a job
   * whose current lease the session also holds leaves that slot alone. Jobs an operator
   * asked to cancel are told again (cancel), in case the NOTIFY was missed.
   */
  async heartbeat(session: WorkerSession | null, leases: LeaseRef[]): Promise<HeartbeatOutcome> {
    // Asked for before the write: if the database cannot be reached, the session still holds
    // the leases the worker renews (they end only once it stops naming them).
    const askedAt = this.databaseClock.now();
    for (const l of leases) this.delivery.holderOf(l.id)?.asked(l.id, l.token, askedAt);
    const result = await this.opts.store.jobHeartbeatMany({ leases });
    for (const e of result.extended) {
      // The session that holds the lease holds it longer, whichever stream or unary call beat.
      const expiresAt = e.lockedUntil.getTime();
      session?.extend(e.id, e.token, expiresAt);
      const holder = this.delivery.holderOf(e.id);
      if (holder && holder !== session) holder.extend(e.id, e.token, expiresAt);
    }
    if (session) {
      for (const lost of result.lost) {
        session.send({ kind: 'leaseLost', jobId: lost.id, token: lost.token, reason: 'expired' });
        this.slotFree(session, lost.id, lost.token);
      }
      for (const e of result.extended) if (e.cancelRequested) session.send({ kind: 'cancel', jobId: e.id, reason: 'operator' });
    } else {
      // A unary ExtendLease found lost a lease a stream session holds here (its ask above
      // would otherwise keep that slot): that session's worker is told, and the slot frees.
      for (const lost of result.lost) {
        const holder = this.delivery.holderOf(lost.id);
        if (holder?.held.get(lost.id)?.token !== lost.token) continue;
        holder.send({ kind: 'leaseLost', jobId: lost.id, token: lost.token, reason: 'expired' });
        this.slotFree(holder, lost.id, lost.token);
      }
    }
    return result;
  }

  /**
   * Extends a session's leases on its worker's behalf where the worker cannot: jobs still on
   * their way to it, and every lease while the server itself holds back the worker's
   * heartbeats (its stream's writer is blocked) (src/grpc/lease-renewal.ts).
   * Tells the worker nothing: a lease found lost here may have ended with a report being
   * applied right now, and a worker's own heartbeat, or the expiry check, tells real losses.
   */
  async sessionRenew(session: WorkerSession, leases: LeaseRef[]): Promise<void> {
    const result = await this.opts.store.jobHeartbeatMany({ leases });
    for (const e of result.extended) session.extend(e.id, e.token, e.lockedUntil.getTime());
  }

  /**
   * The lease-expiry check of a timer tick (the fallback poll's, or drainAll's; both every
   * pollIntervalMs). After this process was stalled (stopped, swapped, a long pause) the
   * heartbeats its workers sent meanwhile are still unread: a tick more than POLL_STALL_MS
   * late skips the check once, so they are read before any lease is judged. Returns how
   * many leases it dropped, or null when it skipped; `now` (ms since the epoch) is for tests.
   */
  expiryTick(now: number = this.databaseClock.local()): number | null {
    const stalled = this.lastTickAt !== null && now - this.lastTickAt > this.opts.pollIntervalMs + POLL_STALL_MS;
    this.lastTickAt = now;
    return stalled ? null : this.dropExpiredLeases(new Date(this.databaseClock.toDatabase(now)));
  }

  /**
   * Drops every held lease that ended (WorkerSession's heldUntil: its expiry, or its
   * worker's latest renewal request plus its length) more than leaseExpiryGraceMs before
   * `now`: its worker is told lease_lost (reason expired, with the token, as a heartbeat that
   * finds it lost tells it) and its queues claim for the freed slot. The worker stopped
   * heartbeating it (a report given up after plain RETRY_LATER answers, a client that forgot it); without
   * this its slot stayed taken until the stream ended. Touches no row: the sweeper requeues
   * the job. Runs on the fallback poll's tick (and while drainAll waits). `now` is on the
   * database's clock, as the leases are (default: databaseClock.now()); it is for tests.
   * Returns how many leases it dropped.
   */
  dropExpiredLeases(now: Date = new Date(this.databaseClock.now())): number {
    const cutoff = now.getTime() - (this.opts.leaseExpiryGraceMs ?? 2000);
    let dropped = 0;
    for (const session of this.sessions) {
      const expired = this.delivery.dropExpired(session, cutoff);
      if (expired.length === 0) continue;
      dropped += expired.length;
      this.opts.logger.info({ worker_id: session.workerId, jobs: expired.map((l) => l.id) }, 'leases expired while their worker held them; told lease_lost');
      try {
        for (const l of expired) session.send({ kind: 'leaseLost', jobId: l.id, token: l.token, reason: 'expired' });
      } catch (err) {
        this.opts.logger.error({ err, worker_id: session.workerId }, 'could not tell a worker its leases expired');
      }
      this.wakeQueuesOf(session);
    }
    return dropped;
  }

  /** A write committed (accepted or not): the session's slot for that lease is free. */
  private written(request: WriteRequest, ack: WriteAck): void {
    if (request.session) this.slotFree(request.session, request.write.id, request.write.token);
    if (ack.accepted && ack.job) this.opts.observer?.written?.(request.kind, ack.job);
  }

  /**
   * The session no longer holds this lease. Only the lease with this token: a late write of
   * an earlier run of the same job (claimed again, perhaps by this same session) must not
   * free the slot of the current one.
   */
  private slotFree(session: WorkerSession, jobId: string, token: string): void {
    if (this.delivery.drop(session, jobId, token)) this.wakeQueuesOf(session);
  }

  /**
   * A session has free slots again: its queues claim if they may have more work, or end a
   * cooldown. Least recently served first (WorkerSession.queuesByTurn): the first wanted queue
   * takes every free slot, so in a fixed order the first queue with a backlog took them all.
   */
  private wakeQueuesOf(session: WorkerSession): void {
    if (session.free === 0) return;
    for (const name of session.queuesByTurn) this.queues.get(name)?.get(session.typesKey)?.slotsFreed();
  }

  /** Keeps a claim loop or hand-off in `inFlight` until it settles (drainAll waits for them). */
  private track<T>(run: Promise<T>): Promise<T> {
    this.inFlight.add(run);
    void run.finally(() => this.inFlight.delete(run)).catch(() => undefined);
    return run;
  }

  // ----- submits -----------------------------------------------------------------------

  /**
   * Submits one job. When the queue is idle here (no claim running or pending) and a worker
   * connected here takes jobs from it and has a free slot, the submit's own statement leases
   * the job to that worker if a claim would pick it now (queue not paused, job due, nothing
   * claimable waiting in the queue), and the job is pushed at once: no NOTIFY and no claim,
   * one round trip to the database less between submit and start. Otherwise the job waits
   * PENDING for a claim, here or on another server. The result is the job as the submit
   * committed it (RUNNING when handed over).
   */
  async submit(job: JobSubmitInput): Promise<JobSubmitResult> {
    // Only an idle queue tries: while a claim runs or a wake-up is pending, jobs may be
    // waiting (the statement would decline), and the claim is about to serve the slots anyway.
    // Job-type routing: only a claimer whose sessions take the job's type may hand it off.
    let session: WorkerSession | null = null;
    // A job with parents is created WAITING or PENDING behind them, never handed off.
    const hasParents = (job.dependsOn?.length ?? 0) > 0;
    if (this._state !== 'stopped' && !hasParents) {
      for (const q of this.claimersOf(job.queue)) {
        if (q.types && !q.types.includes(job.type)) continue;
        if ((session = q.reserveForHandOff())) break;
      }
    }
    if (!session) return this.opts.store.jobSubmit({ job });
    return this.track(this.handOff(session, job));
  }

  /** Submits with a hand-off to the slot reserved on `session`; pushes the job or returns the slot. */
  private async handOff(session: WorkerSession, job: JobSubmitInput): Promise<JobSubmitResult> {
    let result: JobSubmitResult | null = null;
    try {
      result = await this.opts.store.jobSubmit({ job, handoffWorkerId: session.workerId });
      return result;
    } finally {
      session.unreserve();
      if (result?.created && result.job.state === 'RUNNING') await this.delivery.push(new Map([[session, [result.job]]]));
      else this.wakeQueuesOf(session); // the slot it reserved is free again
    }
  }

  // ----- unary claims -------------------------------------------------------------------

  /**
   * Claims for a worker without a stream (ClaimJobs). With waitMs > 0 it long-polls: when
   * nothing is claimable it waits for a NOTIFY on one of the queues (or the poll interval)
   * and tries again until the wait is over, the caller aborts or the dispatcher stops.
   * What must stay true: a caller that has gone (`signal` aborted) is never left holding
   * jobs: no claim starts after the abort, and jobs a claim in flight took are given back.
   */
  async claimUnary(params: {
    workerId: string;
    queues: string[];
    max: number;
    waitMs: number;
    /** Job-type routing: only jobs of these types; unset, null or empty = any type. */
    types?: string[] | null;
    signal?: AbortSignal;
  }): Promise<Job[]> {
    const deadline = Date.now() + params.waitMs;
    const queues = new Set(params.queues);
    for (;;) {
      if (params.signal?.aborted) return [];
      const askedAt = this.databaseClock.local();
      const jobs = this.claimed(await this.opts.store.jobClaim({ queues: params.queues, limit: params.max, workerId: params.workerId, types: params.types ?? null }), askedAt);
      if (jobs.length > 0 && params.signal?.aborted) {
        await this.giveBack(jobs);
        return [];
      }
      const left = deadline - Date.now();
      if (jobs.length > 0 || left <= 0 || this._state === 'stopped' || params.signal?.aborted) return jobs;
      // A rate limit held jobs back: try again when the next token is due (on this process's
      // clock: claimed()), not a poll later.
      const tokenIn = jobs.nextTokenAt ? Math.max(1, jobs.nextTokenAt.getTime() - Date.now() + 1) : Infinity;
      await this.waiters.wait(queues, Math.min(left, this.opts.pollIntervalMs, tokenIn), [params.signal, this.stopping.signal]);
    }
  }

  /**
   * A claim's answer, read against the database's clock: a claimed job's start (the claim
   * statement's now(), the same for all its jobs) sets the DatabaseClock, and the next
   * token's time (the database's) is moved onto this process's clock, where the claimer's
   * wake-up timer and claimUnary's wait count. The leases stay the database's times: they
   * go to workers as they are, and are judged against databaseClock.now().
   */
  private claimed(jobs: ClaimedJobs, askedAt: number): ClaimedJobs {
    const startedAt = jobs[0]?.startedAt;
    if (startedAt) this.databaseClock.observe(startedAt, askedAt);
    if (jobs.nextTokenAt) jobs.nextTokenAt = new Date(this.databaseClock.toLocal(jobs.nextTokenAt.getTime()));
    return jobs;
  }

  /**
   * Gives claimed jobs back at once (their caller went away before it got them), as a
   * delivery that cannot push does: claimable again at their run_at, no attempt used up.
   */
  private async giveBack(jobs: Job[]): Promise<void> {
    try {
      await this.opts.store.jobSnoozeMany({ snoozes: jobs.map((j) => ({ id: j.id, token: j.leaseToken ?? '', runAt: j.runAt })) });
    } catch (err) {
      const level = isUnavailable(err) ? 'debug' : 'warn';
      this.opts.logger[level]({ err, jobs: jobs.length }, 'could not give back the jobs of a gone caller; their leases will expire');
    }
  }

  /** How many unary claims are waiting for work (for tests and metrics). */
  get waitingClaims(): number {
    return this.waiters.size;
  }

  // ----- shutdown -----------------------------------------------------------------------

  /**
   * Shutdown, step one: push nothing new, ask every worker to drain, and wait (up to
   * timeoutMs) until the workers have finished what they hold and those writes committed.
   * Returns how many jobs were still held when it stopped waiting; their leases run on.
   * A second call only waits again.
   */
  async drainAll(timeoutMs: number, reason: DrainReason = 'server_shutdown'): Promise<number> {
    if (this._state !== 'stopped') {
      this.to('stopped');
      this.drainReason = reason;
      if (this.pollTimer) clearInterval(this.pollTimer);
      this.pollTimer = null;
      this.stopping.abort(); // ends the long-poll waits
      for (const q of this.allClaimers()) q.stop(); // ends a claim cooldown now
      for (const s of this.sessions) {
        s.drain();
        s.send({ kind: 'drain', reason });
      }
    }
    await Promise.allSettled(this.inFlight);
    // A lease that expires meanwhile stops counting as held, as it would while polling.
    this.lastTickAt = null;
    const expiryCheck = setInterval(() => this.expiryTick(), this.opts.pollIntervalMs);
    expiryCheck.unref();
    try {
      await this.delivery.untilNoneHeld(() => this.sessionStats().held, timeoutMs);
    } finally {
      clearInterval(expiryCheck);
    }
    await this.progressWrites.close();
    await this.writes.idle();
    return this.sessionStats().held;
  }

  private to(next: DispatcherState): void {
    this._state = checkTransition('dispatcher', DISPATCHER_TRANSITIONS, this._state, next);
  }
}

/** A listener that settles one promise (the promise-returning writes). */
function promised<J extends JobWritten>(resolve: (ack: WriteAck<J>) => void, reject: (err: unknown) => void): WriteListener<LeaseRef, J> {
  return { written: (_request, ack) => resolve(ack), failed: (_request, err) => reject(err) };
}

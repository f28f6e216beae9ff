import { randomUUID } from 'node:crypto';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import type { Job, JobSubmitInput, JobSubmitResult, JobWritten, JsonObject, LeaseRef, LeaseWriteOutcome } from '../domain/job.js';
import type { AckResult, CancelReason, DrainReason, LeaseLostReason } from '../domain/codes.js';
import { LEASE_LOST_TEXT } from '../domain/codes.js';
import { Batcher } from './batcher.js';

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
 * - a worker write is answered only after the batch that carries it has committed.
 */

/** What the dispatcher sends to a worker; the gRPC layer turns it into a WorkResponse. */
export type SessionMessage =
  /** Jobs one claim dealt to this session, best first (the gRPC layer may send them as one message). */
  | { kind: 'jobs'; jobs: Job[] }
  | { kind: 'cancel'; jobId: string; reason: CancelReason }
  | { kind: 'leaseLost'; jobId: string; reason: LeaseLostReason }
  | { kind: 'drain'; reason: DrainReason };

/** The answer to one complete, fail or snooze. */
export interface WriteAck<J extends JobWritten = JobWritten> {
  jobId: string;
  accepted: boolean;
  /** What became of the write; `accepted` is `result === 'accepted'`. */
  result: AckResult;
  /** Words for people and logs; empty when accepted. */
  reason: string;
  /** The job as the write left it (a completion reports JobWritten; fail and snooze the whole Job). */
  job?: J;
}

/** A job the dispatcher has pushed to a session and not yet seen finished. */
interface HeldLease {
  token: string;
  queue: string;
}

/** One worker's stream, as the dispatcher tracks it. */
export class WorkerSession {
  readonly id = randomUUID();
  /** Jobs pushed and not yet finished, by job id. */
  readonly held = new Map<string, HeldLease>();
  /** Slots promised to claims in flight. */
  reserved = 0;
  draining = false;
  closed = false;
  /** The gRPC layer cannot write to this worker for now (its stream is backed up): no new jobs. */
  paused = false;
  /** Leases named in hello.held that were no longer current (to be told as lease_lost). */
  lostOnOpen: string[] = [];

  constructor(
    readonly workerId: string,
    readonly queues: string[],
    readonly slots: number,
    readonly send: (msg: SessionMessage) => void,
  ) {}

  /** Slots that are neither holding a job nor promised to a claim. */
  get free(): number {
    if (this.draining || this.closed || this.paused) return 0;
    return Math.max(0, this.slots - this.held.size - this.reserved);
  }
}

interface QueueDispatch {
  name: string;
  sessions: Set<WorkerSession>;
  claiming: boolean;
  /** Set by every wake-up; cleared by a claim that came back short (the queue is drained). */
  wanted: boolean;
  /** Counts wake-ups, so one that arrives during a claim is not lost when that claim comes back short. */
  wakes: number;
  /** Rotates the first session served, so no session is always first. */
  rotation: number;
  /** Set while the claim loop waits for more free slots (see claimCooldownMs). */
  onSlotsFreed: (() => void) | null;
}

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
  /** Told of claims, pushes and finished writes (for metrics and logs). */
  observer?: DispatcherObserver;
}

/** What the dispatcher reports as it works; every method is optional. */
export interface DispatcherObserver {
  claimed?(queue: string, asked: number, got: number, ms: number): void;
  pushed?(session: WorkerSession, job: Job): void;
  /** A worker's complete, fail or snooze committed; `job` is its new state. */
  written?(write: 'complete' | 'fail' | 'snooze', job: JobWritten): void;
}

/**
 * Owns every worker session of this server process and the per-queue claim loops.
 */
export class Dispatcher {
  private readonly queues = new Map<string, QueueDispatch>();
  private readonly sessions = new Set<WorkerSession>();
  /** Which session holds a job, for routing cancels. */
  private readonly holders = new Map<string, WorkerSession>();
  private readonly completions: Batcher<LeaseRef & { result: JsonObject | null }, LeaseWriteOutcome<JobWritten>>;
  private readonly failures: Batcher<LeaseRef & { error: string; retryable: boolean; retryAt: Date | null }, LeaseWriteOutcome>;
  private readonly snoozes: Batcher<LeaseRef & { runAt: Date }, LeaseWriteOutcome>;
  /**
   * Claims and hand-off submits in flight. drainAll waits for them, so every job they lease
   * is pushed or released before shutdown goes on.
   */
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly waiters = new Set<{ queues: Set<string>; wake: () => void }>();
  private pollTimer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly opts: DispatcherOptions) {
    const { store } = opts;
    this.completions = new Batcher((completions) => store.jobCompleteMany({ completions }));
    this.failures = new Batcher((failures) => store.jobFailMany({ failures }));
    this.snoozes = new Batcher((snoozes) => store.jobSnoozeMany({ snoozes }));
  }

  /** Starts the fallback poll. Safe to call twice. */
  start(): void {
    if (this.pollTimer || this.stopped) return;
    this.pollTimer = setInterval(() => this.poll(), this.opts.pollIntervalMs);
    this.pollTimer.unref();
  }

  // ----- wake-ups -----------------------------------------------------------------------

  /** A NOTIFY said this queue has claimable work. */
  notifyQueue(queue: string): void {
    for (const w of this.waiters) if (w.queues.has(queue)) w.wake();
    const q = this.queues.get(queue);
    if (q) this.wake(q);
  }

  /** Wake every queue: after the LISTEN connection (re)connects, notifications may have been missed. */
  notifyAll(): void {
    for (const w of this.waiters) w.wake();
    for (const q of this.queues.values()) this.wake(q);
  }

  private wake(q: QueueDispatch): void {
    q.wanted = true;
    q.wakes++;
    this.claimFor(q);
  }

  /** A NOTIFY said an operator cancelled this job: tell the worker that holds it here, if any. */
  notifyCancel(jobId: string): void {
    this.holders.get(jobId)?.send({ kind: 'cancel', jobId, reason: 'operator' });
  }

  private poll(): void {
    for (const q of this.queues.values()) {
      if ([...q.sessions].some((s) => s.free > 0)) this.wake(q);
    }
  }

  // ----- sessions -----------------------------------------------------------------------

  /**
   * Opens a session for a worker's stream. `held` are leases the worker still holds from an
   * earlier stream: the current ones occupy slots until finished.
   */
  async sessionOpen(params: {
    workerId: string;
    queues: string[];
    slots: number;
    held?: LeaseRef[];
    send: (msg: SessionMessage) => void;
  }): Promise<WorkerSession> {
    const session = new WorkerSession(params.workerId, [...new Set(params.queues)], params.slots, params.send);
    if (params.held && params.held.length > 0) {
      const beat = await this.opts.store.jobHeartbeatMany({ leases: params.held });
      const current = new Set(beat.extended.map((e) => e.id));
      for (const lease of params.held) {
        if (!current.has(lease.id)) {
          session.lostOnOpen.push(lease.id);
          continue;
        }
        session.held.set(lease.id, { token: lease.token, queue: '' });
        this.holders.set(lease.id, session);
      }
    }
    this.sessions.add(session);
    for (const name of session.queues) {
      let q = this.queues.get(name);
      if (!q) {
        q = { name, sessions: new Set(), claiming: false, wanted: true, wakes: 0, rotation: 0, onSlotsFreed: null };
        this.queues.set(name, q);
      }
      q.sessions.add(session);
      this.wake(q);
    }
    return session;
  }

  /**
   * The stream ended. Jobs it held keep their leases until they expire: the worker may
   * reconnect and finish them with their tokens; otherwise the sweeper requeues them.
   */
  sessionClose(session: WorkerSession): void {
    if (session.closed) return;
    session.closed = true;
    this.sessions.delete(session);
    for (const jobId of session.held.keys()) {
      if (this.holders.get(jobId) === session) this.holders.delete(jobId);
    }
    for (const name of session.queues) {
      const q = this.queues.get(name);
      if (!q) continue;
      q.sessions.delete(session);
      if (q.sessions.size === 0 && !q.claiming) this.queues.delete(name);
    }
  }

  /** The worker asked for nothing new; it keeps finishing what it holds. */
  sessionDrain(session: WorkerSession): void {
    session.draining = true;
  }

  /**
   * Backpressure: while paused the session gets no new jobs (it has no free slots); jobs
   * already dealt to it are still sent. Unpausing wakes its queues.
   */
  sessionPause(session: WorkerSession, paused: boolean): void {
    if (session.paused === paused) return;
    session.paused = paused;
    if (!paused) this.wakeQueuesOf(session);
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
    const sessions = [...(this.queues.get(queue)?.sessions ?? [])];
    return { workers: sessions.length, freeSlots: sessions.reduce((n, s) => n + s.free, 0) };
  }

  // ----- worker writes ------------------------------------------------------------------

  /** Completes a job; resolves after the commit. The slot frees either way. */
  async complete(session: WorkerSession | null, p: LeaseRef & { result: JsonObject | null }): Promise<WriteAck<JobWritten>> {
    return this.finish(session, p, 'complete', await this.completions.add(p));
  }

  /** Fails a job (retry, DLQ, or CANCELLED if an operator asked); resolves after the commit. */
  async fail(
    session: WorkerSession | null,
    p: LeaseRef & { error: string; retryable: boolean; retryAt: Date | null },
  ): Promise<WriteAck<Job>> {
    return this.finish(session, p, 'fail', await this.failures.add(p));
  }

  /** Snoozes a job until runAt; resolves after the commit. */
  async snooze(session: WorkerSession | null, p: LeaseRef & { runAt: Date }): Promise<WriteAck<Job>> {
    return this.finish(session, p, 'snooze', await this.snoozes.add(p));
  }

  /**
   * Extends a session's leases. Lost leases are told to the worker (lease_lost) and free
   * their slots; jobs an operator asked to cancel are told again (cancel), in case the
   * NOTIFY was missed.
   */
  async heartbeat(session: WorkerSession | null, leases: LeaseRef[]) {
    const result = await this.opts.store.jobHeartbeatMany({ leases });
    if (session) {
      const tokens = new Map(leases.map((l) => [l.id, l.token]));
      for (const id of result.lost) {
        session.send({ kind: 'leaseLost', jobId: id, reason: 'expired' });
        this.slotFree(session, id, tokens.get(id) ?? '');
      }
      for (const e of result.extended) if (e.cancelRequested) session.send({ kind: 'cancel', jobId: e.id, reason: 'operator' });
    }
    return result;
  }

  private finish<J extends JobWritten>(
    session: WorkerSession | null,
    lease: LeaseRef,
    write: 'complete' | 'fail' | 'snooze',
    outcome: LeaseWriteOutcome<J>,
  ): WriteAck<J> {
    const jobId = lease.id;
    if (session) this.slotFree(session, jobId, lease.token);
    if (outcome.accepted) this.opts.observer?.written?.(write, outcome.job);
    return outcome.accepted
      ? { jobId, accepted: true, result: 'accepted', reason: '', job: outcome.job }
      : { jobId, accepted: false, result: 'lease_lost', reason: `lease lost: ${LEASE_LOST_TEXT.expired}` };
  }

  /**
   * The session no longer holds this lease. Only the lease with this token: a late write of
   * an earlier run of the same job (claimed again, perhaps by this same session) must not
   * free the slot of the current one.
   */
  private slotFree(session: WorkerSession, jobId: string, token: string): void {
    if (session.held.get(jobId)?.token !== token) return;
    this.heldDrop(session, jobId);
    this.wakeQueuesOf(session);
  }

  /** Forgets that the session holds the job (its slot and the cancel route). */
  private heldDrop(session: WorkerSession, jobId: string): void {
    session.held.delete(jobId);
    if (this.holders.get(jobId) === session) this.holders.delete(jobId);
  }

  /** A session has free slots again: claim for its queues that may have more work. */
  private wakeQueuesOf(session: WorkerSession): void {
    if (session.free === 0) return;
    for (const name of session.queues) {
      const q = this.queues.get(name);
      q?.onSlotsFreed?.();
      if (q?.wanted) this.claimFor(q);
    }
  }

  // ----- claiming -----------------------------------------------------------------------

  private claimFor(q: QueueDispatch): void {
    if (q.claiming || this.stopped) return;
    const run = this.claimLoop(q);
    this.inFlight.add(run);
    void run.finally(() => this.inFlight.delete(run));
  }

  /**
   * Claims for a queue while it is wanted and has free slots: reserve slots round-robin,
   * claim for all of them in one statement, deal the jobs to the reserved slots, release
   * the slots that got nothing.
   */
  private async claimLoop(q: QueueDispatch): Promise<void> {
    q.claiming = true;
    let busy = false;
    try {
      while (q.wanted && !this.stopped) {
        if (busy) await this.cooldown(q);
        const slots = this.reserve(q);
        if (slots.length === 0) return; // no free slot: a freed slot wakes us (q.wanted stays set)
        const wakesBefore = q.wakes;
        const started = performance.now();
        let jobs: Job[] = [];
        try {
          jobs = await this.opts.store.jobClaim({ queues: [q.name], workerIds: slots.map((s) => s.workerId) });
        } catch (err) {
          this.opts.logger.error({ err, queue: q.name }, 'claim failed; the next poll retries');
          for (const s of slots) s.reserved--;
          return;
        }
        this.opts.observer?.claimed?.(q.name, slots.length, jobs.length, performance.now() - started);
        // A short claim means the queue had nothing more claimable, unless a wake-up
        // arrived while the claim ran (its rows may not have been visible to it).
        q.wanted = jobs.length === slots.length || q.wakes !== wakesBefore;
        busy = jobs.length === slots.length;
        for (const s of slots) s.reserved--;
        const dealt = new Map<WorkerSession, Job[]>();
        jobs.forEach((job, i) => {
          const session = slots[i] as WorkerSession;
          const list = dealt.get(session);
          if (list) list.push(job);
          else dealt.set(session, [job]);
        });
        await this.push(dealt);
        // Slots that got nothing here may be wanted by the sessions' other queues.
        for (const s of new Set(slots.slice(jobs.length))) this.wakeQueuesOf(s);
      }
    } finally {
      q.claiming = false;
      if (q.sessions.size === 0) this.queues.delete(q.name);
    }
  }

  /**
   * Waits (up to claimCooldownMs) until a quarter of the queue's slots are free, or the
   * dispatcher stops. Returns at once when that many are free already.
   */
  private cooldown(q: QueueDispatch): Promise<void> {
    const ms = this.opts.claimCooldownMs ?? 5;
    const enough = () => {
      let total = 0;
      let free = 0;
      for (const s of q.sessions) {
        total += s.slots;
        free += s.free;
      }
      return this.stopped || free >= Math.min(this.opts.maxClaimBatch ?? 1000, Math.ceil(total / 4));
    };
    if (ms <= 0 || enough()) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        q.onSlotsFreed = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      q.onSlotsFreed = () => {
        if (enough()) done();
      };
    });
  }

  /** Up to `max` free slots of the queue's sessions, one entry per slot, dealt round-robin. */
  private reserve(q: QueueDispatch, max = this.opts.maxClaimBatch ?? 1000): WorkerSession[] {
    const sessions = [...q.sessions].filter((s) => s.free > 0);
    if (sessions.length === 0) return [];
    const start = q.rotation++ % sessions.length;
    const ordered = [...sessions.slice(start), ...sessions.slice(0, start)];
    const free = ordered.map((s) => s.free);
    const slots: WorkerSession[] = [];
    for (let round = 0; slots.length < max; round++) {
      let any = false;
      ordered.forEach((s, i) => {
        if ((free[i] ?? 0) > round && slots.length < max) {
          slots.push(s);
          any = true;
        }
      });
      if (!any) break;
    }
    for (const s of slots) s.reserved++;
    return slots;
  }

  /**
   * Pushes each session the jobs leased to it. Jobs that cannot be pushed (the session closed
   * or drains, the dispatcher stopped, or the gRPC layer could not encode or write them) are
   * released at once.
   */
  private async push(dealt: Map<WorkerSession, Job[]>): Promise<void> {
    const undeliverable: Job[] = [];
    for (const [session, list] of dealt) {
      if (session.closed || session.draining || this.stopped) {
        undeliverable.push(...list);
        continue;
      }
      try {
        this.deliver(session, list);
      } catch (err) {
        this.opts.logger.error({ err, jobs: list.length, worker_id: session.workerId }, 'could not push jobs; releasing them');
        for (const job of list) this.heldDrop(session, job.id);
        undeliverable.push(...list);
      }
    }
    if (undeliverable.length > 0) await this.release(undeliverable);
  }

  private deliver(session: WorkerSession, jobs: Job[]): void {
    for (const job of jobs) {
      session.held.set(job.id, { token: job.leaseToken ?? '', queue: job.queue });
      this.holders.set(job.id, session);
    }
    session.send({ kind: 'jobs', jobs });
    for (const job of jobs) this.opts.observer?.pushed?.(session, job);
  }

  /** Gives claimed jobs back at once (their worker went away between claim and push). */
  private async release(jobs: Job[]): Promise<void> {
    try {
      await this.opts.store.jobSnoozeMany({
        snoozes: jobs.map((j) => ({ id: j.id, token: j.leaseToken ?? '', runAt: j.runAt })),
      });
    } catch (err) {
      this.opts.logger.warn({ err, jobs: jobs.length }, 'could not release undelivered jobs; their leases will expire');
    }
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
    const q = this.queues.get(job.queue);
    // Only an idle queue tries: while a claim runs or a wake-up is pending, jobs may be
    // waiting (the statement would decline), and the claim is about to serve the slots anyway.
    const idle = q !== undefined && !q.wanted && !q.claiming && !this.stopped;
    const [session] = idle ? this.reserve(q, 1) : [];
    if (!session) return this.opts.store.jobSubmit({ job });
    const run = this.handOff(session, job);
    this.inFlight.add(run);
    try {
      return await run;
    } finally {
      this.inFlight.delete(run);
    }
  }

  /** Submits with a hand-off to the slot reserved on `session`; pushes the job or returns the slot. */
  private async handOff(session: WorkerSession, job: JobSubmitInput): Promise<JobSubmitResult> {
    let result: JobSubmitResult | null = null;
    try {
      result = await this.opts.store.jobSubmit({ job, handoffWorkerId: session.workerId });
      return result;
    } finally {
      session.reserved--;
      if (result?.created && result.job.state === 'RUNNING') await this.push(new Map([[session, [result.job]]]));
      else this.wakeQueuesOf(session); // the slot it reserved is free again
    }
  }

  // ----- unary claims -------------------------------------------------------------------

  /**
   * Claims for a worker without a stream (ClaimJobs). With waitMs > 0 it long-polls: when
   * nothing is claimable it waits for a NOTIFY on one of the queues (or the poll interval)
   * and tries again until the wait is over.
   */
  async claimUnary(params: { workerId: string; queues: string[]; max: number; waitMs: number; signal?: AbortSignal }): Promise<Job[]> {
    const deadline = Date.now() + params.waitMs;
    for (;;) {
      const jobs = await this.opts.store.jobClaim({ queues: params.queues, limit: params.max, workerId: params.workerId });
      const left = deadline - Date.now();
      if (jobs.length > 0 || left <= 0 || this.stopped || params.signal?.aborted) return jobs;
      await this.waitForWork(new Set(params.queues), Math.min(left, this.opts.pollIntervalMs), params.signal);
    }
  }

  /** How many unary claims are waiting for work (for tests and metrics). */
  get waitingClaims(): number {
    return this.waiters.size;
  }

  private waitForWork(queues: Set<string>, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const waiter = { queues, wake: done };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
      this.waiters.add(waiter);
      const self = this;
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        self.waiters.delete(waiter);
        resolve();
      }
    });
  }

  // ----- shutdown -----------------------------------------------------------------------

  /**
   * Shutdown, step one: push nothing new, ask every worker to drain, and wait (up to
   * timeoutMs) until the workers have finished what they hold and those writes committed.
   * Returns how many jobs were still held when it stopped waiting; their leases run on.
   */
  async drainAll(timeoutMs: number, reason: DrainReason = 'server_shutdown'): Promise<number> {
    this.stopped = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.pollTimer = null;
    for (const w of this.waiters) w.wake();
    for (const q of this.queues.values()) q.onSlotsFreed?.(); // ends a claim cooldown now
    for (const s of this.sessions) {
      s.draining = true;
      s.send({ kind: 'drain', reason });
    }
    await Promise.allSettled(this.inFlight);
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && this.sessionStats().held > 0) {
      await new Promise((r) => setTimeout(r, 20));
    }
    await Promise.all([this.completions.idle(), this.failures.idle(), this.snoozes.idle()]);
    return this.sessionStats().held;
  }
}

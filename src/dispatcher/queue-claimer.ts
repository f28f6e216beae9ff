import type { Job } from '../domain/job.js';
import type { Logger } from '../logger.js';
import type { WorkerSession } from './session.js';
import { checkTransition, type Transitions } from '../domain/state-machine.js';
import { isUnavailable } from '../domain/errors.js';

/**
 * Where a queue's claim loop is (one claimer per queue with sessions on this server):
 * - `idle`: no claim runs and none is wanted: the last claim came back short (the queue is
 *   drained) and no wake-up came since. Only an idle queue tries a submit's hand-off;
 * - `wanted`: the queue may have claimable work but no claim runs: no session had a free slot
 *   (a freed slot starts the claim) or the last claim failed (the fallback poll retries);
 * - `claiming`: a claim is in flight: slots reserved, one statement, jobs dealt and pushed;
 * - `coolingDown`: the last claim came back full; the next waits (up to claimCooldownMs) for
 *   a quarter of the queue's slots to be free, so claims under load are few and large;
 * - `stopped`: the dispatcher is shutting down; nothing more is claimed.
 */
export type ClaimerState = 'idle' | 'wanted' | 'claiming' | 'coolingDown' | 'stopped';

/** The longest delay setTimeout takes (2^31 − 1 ms, about 24.8 days). */
const MAX_TIMER_MS = 2_147_483_647;

/** The moves a claimer may make. A claim is only ever started from idle or wanted. */
export const CLAIMER_TRANSITIONS: Transitions<ClaimerState> = {
  idle: ['claiming', 'wanted', 'stopped'],
  wanted: ['claiming', 'stopped'],
  claiming: ['idle', 'wanted', 'coolingDown', 'stopped'],
  coolingDown: ['claiming', 'stopped'],
  stopped: [],
};

/** What a claimer needs from the dispatcher that owns it. */
export interface ClaimerHost {
  /**
   * Runs one claim statement: one job at most per worker id (one id per reserved slot), only
   * jobs of `types` (null = any type). `nextTokenAt`: the queue's rate limit held jobs back
   * until then, on this process's clock (the wake-up timer's).
   */
  claim(queue: string, workerIds: string[], types: string[] | null): Promise<Job[] & { nextTokenAt?: Date }>;
  /** Pushes each session the jobs dealt to it; releases those that cannot be pushed. Never throws. */
  deliver(dealt: Map<WorkerSession, Job[]>): Promise<void>;
  /** A reserved slot of this session got nothing: the session's other queues may want it. */
  slotUnused(session: WorkerSession): void;
  /** A claim loop started; shutdown waits for it (every job it leases is pushed or released). */
  track(run: Promise<void>): void;
  /** A claim loop ended (the owner forgets a queue that has no sessions left). */
  loopEnded(claimer: QueueClaimer): void;
  /** Told of each claim (observer). */
  claimed?(queue: string, asked: number, got: number, ms: number): void;
  logger: Logger;
}

/** How a claimer claims. */
export interface ClaimerOptions {
  /** Largest claim in one statement. */
  maxClaimBatch: number;
  /** The longest a claim after a full one waits for free slots; 0 turns the cooldown off. */
  claimCooldownMs: number;
  /**
   * Job-type routing: the job types of every session of this claimer (null = any type). A
   * queue has one claimer per distinct type set of its sessions here (its claimer group).
   */
  types?: string[] | null;
}

/**
 * One queue's claim loop on this server, for the sessions of one job-type set (job-type
 * routing: sessions with equal types share a claimer; a queue whose sessions all take any
 * type has one). What must stay true (docs/dispatcher.md):
 * - every session of a claimer has the claimer's types, and its claims take only those;
 * - at most one claim of the queue is in flight here;
 * - a claim reserves every free slot it asks for before its statement runs, dealt
 *   round-robin (one slot per session per round, from a rotating first session), so it can
 *   never hand out more jobs than there are free slots, even when a session listens to
 *   several queues; job *i* goes to reserved slot *i*, so the best job goes first;
 * - no wake-up is lost: one that arrives while a claim runs is counted, and keeps the queue
 *   claiming even if that claim came back short (its snapshot may have missed the new rows);
 * - an idle queue's first claim never waits: the cooldown only follows a full claim.
 */
export class QueueClaimer {
  /** The sessions on this server that take jobs from the queue. */
  readonly sessions = new Set<WorkerSession>();
  #state: ClaimerState = 'idle';
  /** Counts wake-ups, so one that arrives during a claim is not lost when that claim comes back short. */
  #wakes = 0;
  /** Rotates the first session served, so no session is always first. */
  #rotation = 0;
  /** Ends the cooldown wait; set only while coolingDown. */
  #endCooldown: (() => void) | null = null;
  /** A start for freed slots is queued (see slotsFreed). */
  #startQueued = false;
  /** The name the transition errors give this claimer. */
  readonly #machine: string;
  /**
   * Rate limits: one wake-up at the time the queue's next token is due, set when a claim
   * found jobs held back by the limit (instead of polling while the bucket is empty).
   * At most one is pending (the earliest); stop() clears it.
   */
  #tokenTimer: NodeJS.Timeout | null = null;
  #tokenAt = 0;

  constructor(
    readonly name: string,
    private readonly host: ClaimerHost,
    private readonly opts: ClaimerOptions,
  ) {
    this.types = opts.types && opts.types.length > 0 ? opts.types : null;
    this.#machine = this.types ? `claimer of queue ${name} (types ${this.types.join(',')})` : `claimer of queue ${name}`;
  }

  /** The job types this claimer claims; null = any type. */
  readonly types: string[] | null;

  /** Where the claim loop is (see ClaimerState). */
  get state(): ClaimerState {
    return this.#state;
  }

  /** A claim loop runs (claiming or cooling down). */
  get running(): boolean {
    return this.#state === 'claiming' || this.#state === 'coolingDown';
  }

  /** The queue may have claimable work (a NOTIFY, a new session, the poll): claim unless a claim runs. */
  wake(): void {
    if (this.#state === 'stopped') return;
    this.#wakes++;
    if (this.#state === 'idle' || this.#state === 'wanted') this.#start();
  }

  /**
   * The fallback poll found a job due in this idle queue while none of its sessions had a
   * free slot (no NOTIFY is sent for a job that comes due): it becomes wanted and claims at
   * the next freed slot. Any other state is left alone (a claim runs or is wanted already).
   */
  mayHaveWork(): void {
    if (this.#state === 'idle') this.#to('wanted');
  }

  /**
   * Some of the queue's sessions have free slots again. A wanted queue claims in a
   * microtask, not at once: slots are freed one write at a time, a whole committed batch
   * of them in one go, and the claim then asks for all of them instead of the first one.
   */
  slotsFreed(): void {
    if (this.#state === 'coolingDown') {
      if (this.#enoughFree()) this.#endCooldown?.();
    } else if (this.#state === 'wanted' && !this.#startQueued) {
      this.#startQueued = true;
      queueMicrotask(() => {
        this.#startQueued = false;
        // A wake-up may have started the claim meanwhile, or shutdown stopped the claimer.
        if (this.#state === 'wanted') this.#start();
      });
    }
  }

  /** Shutdown: nothing more is claimed; a cooldown ends at once. A claim in flight finishes (its jobs are released). */
  stop(): void {
    if (this.#state === 'stopped') return;
    this.#clearTokenTimer();
    const endCooldown = this.#endCooldown;
    this.#to('stopped');
    endCooldown?.();
  }

  /**
   * For a submit's hand-off: one free slot, reserved, when the queue is idle here (no claim
   * runs or is wanted: while one is, jobs may be waiting and the claim serves the slots anyway).
   */
  reserveForHandOff(): WorkerSession | null {
    if (this.#state !== 'idle') return null;
    return this.reserve(1)[0] ?? null;
  }

  /** Reserves up to `max` free slots of the queue's sessions, one entry per slot, dealt round-robin. */
  reserve(max: number): WorkerSession[] {
    return this.#reserve(max).slots;
  }

  /** reserve(), with what each session gave (so the slots go back with one call per session). */
  #reserve(max: number): Dealt<WorkerSession> {
    const sessions: WorkerSession[] = [];
    for (const s of this.sessions) if (s.free > 0) sessions.push(s);
    if (sessions.length === 0) return NO_SLOTS;
    const start = this.#rotation++ % sessions.length;
    const dealt = dealRoundRobin(start === 0 ? sessions : [...sessions.slice(start), ...sessions.slice(0, start)], max);
    dealt.sessions.forEach((s, i) => {
      const n = dealt.counts[i] as number;
      if (n > 0) s.reserve(n, this.name);
    });
    return dealt;
  }

  #start(): void {
    this.#to('claiming');
    this.host.track(this.#run());
  }

  async #run(): Promise<void> {
    try {
      await this.#claimWhileWanted();
    } catch (err) {
      // A broken invariant (a bug): say so loudly; the poll retries the queue.
      this.host.logger.error({ err, queue: this.name, state: this.#state }, 'claim loop failed');
      if (this.#state === 'claiming') this.#to('wanted');
    } finally {
      this.host.loopEnded(this);
    }
  }

  /**
   * Claims while the queue is wanted and has free slots: reserve slots round-robin, claim for
   * all of them in one statement, deal the jobs to the reserved slots, release the slots
   * that got nothing.
   */
  async #claimWhileWanted(): Promise<void> {
    for (let full = false; ; ) {
      if (full) {
        await this.#coolDown();
        if (this.#stopped()) return;
      }
      const reserved = this.#reserve(this.opts.maxClaimBatch);
      const { slots } = reserved;
      if (slots.length === 0) return this.#to('wanted'); // a freed slot starts the next claim
      const wakesBefore = this.#wakes;
      const started = performance.now();
      let jobs: Job[] & { nextTokenAt?: Date };
      try {
        jobs = await this.host.claim(this.name, slots.map((s) => s.workerId), this.types);
      } catch (err) {
        // An outage is logged once by the store; the next poll (or wake-up) retries.
        if (isUnavailable(err)) this.host.logger.debug({ err, queue: this.name }, 'claim failed: database unavailable');
        else this.host.logger.error({ err, queue: this.name }, 'claim failed; the next poll retries');
        unreserve(reserved);
        if (!this.#stopped()) this.#to('wanted');
        return;
      }
      unreserve(reserved);
      if (jobs.nextTokenAt) this.#wakeAt(jobs.nextTokenAt);
      this.host.claimed?.(this.name, slots.length, jobs.length, performance.now() - started);
      await this.host.deliver(dealToSlots(slots, jobs));
      // Slots that got nothing here may be wanted by the sessions' other queues.
      for (const s of new Set(slots.slice(jobs.length))) this.host.slotUnused(s);
      if (this.#stopped()) return;
      full = jobs.length === slots.length;
      // A short claim means the queue had nothing more claimable, unless a wake-up arrived
      // while the claim ran (its rows may not have been visible to it) or while its jobs were pushed.
      if (!full && this.#wakes === wakesBefore) return this.#to('idle');
    }
  }

  /**
   * After a full claim: waits (up to claimCooldownMs) until a quarter of the queue's slots
   * are free, or the claimer stops. Returns at once when that many are free already.
   */
  #coolDown(): Promise<void> {
    if (this.opts.claimCooldownMs <= 0 || this.#enoughFree()) return Promise.resolve();
    this.#to('coolingDown');
    return new Promise((resolve) => {
      const end = () => {
        clearTimeout(timer);
        this.#endCooldown = null;
        if (this.#state === 'coolingDown') this.#to('claiming');
        resolve();
      };
      const timer = setTimeout(end, this.opts.claimCooldownMs);
      this.#endCooldown = end;
    });
  }

  /**
   * Wakes the queue when its next token is due (rate limits). Keeps the earliest pending
   * wake-up; a wake-up that comes early is harmless (the claim takes nothing and says when).
   */
  #wakeAt(at: Date): void {
    const due = at.getTime();
    if (this.#tokenTimer && this.#tokenAt <= due) return;
    this.#clearTokenTimer();
    this.#tokenAt = due;
    // A millisecond late rather than early: Date has no finer grain than the database's time.
    // Capped: a longer delay overflows setTimeout, which then fires at once (a very slow rate
    // would claim in a loop); the wake-up after the cap claims nothing and sets another.
    this.#tokenTimer = setTimeout(() => {
      this.#tokenTimer = null;
      this.wake();
    }, Math.min(MAX_TIMER_MS, Math.max(0, due - Date.now() + 1)));
    this.#tokenTimer.unref();
  }

  /** The dispatcher forgets this claimer (no sessions left): its token wake-up is not wanted. */
  forgotten(): void {
    this.#clearTokenTimer();
  }

  #clearTokenTimer(): void {
    if (this.#tokenTimer) clearTimeout(this.#tokenTimer);
    this.#tokenTimer = null;
  }

  /** A quarter of the queue's slots (at most a full claim) are free. */
  #enoughFree(): boolean {
    let total = 0;
    let free = 0;
    for (const s of this.sessions) {
      total += s.slots;
      free += s.free;
    }
    return free >= Math.min(this.opts.maxClaimBatch, Math.ceil(total / 4));
  }

  /** Read through a method so that the loop sees a stop that happened while it awaited. */
  #stopped(): boolean {
    return this.#state === 'stopped';
  }

  #to(next: ClaimerState): void {
    this.#state = checkTransition(this.#machine, CLAIMER_TRANSITIONS, this.#state, next);
  }
}

/**
 * Deals up to `max` slots over sessions that have free ones: one slot per session per round,
 * in the given order, so a claim that comes back short still shares its jobs evenly.
 */
export function roundRobinSlots<S extends { free: number }>(sessions: readonly S[], max: number): S[] {
  return dealRoundRobin(sessions, max).slots;
}

/** Slots dealt round-robin: one entry per slot, and how many slots each session gave. */
interface Dealt<S> {
  slots: S[];
  sessions: readonly S[];
  counts: number[];
}

const NO_SLOTS: Dealt<never> = { slots: [], sessions: [], counts: [] };

function dealRoundRobin<S extends { free: number }>(sessions: readonly S[], max: number): Dealt<S> {
  const free = sessions.map((s) => s.free);
  const counts = sessions.map(() => 0);
  const slots: S[] = [];
  for (let round = 0; slots.length < max; round++) {
    let any = false;
    for (let i = 0; i < sessions.length && slots.length < max; i++) {
      if ((free[i] as number) > round) {
        slots.push(sessions[i] as S);
        counts[i] = (counts[i] as number) + 1;
        any = true;
      }
    }
    if (!any) break;
  }
  return { slots, sessions, counts };
}

/** Gives back the slots of a reservation: one call per session. */
function unreserve(dealt: Dealt<WorkerSession>): void {
  dealt.sessions.forEach((s, i) => {
    const n = dealt.counts[i] as number;
    if (n > 0) s.unreserve(n);
  });
}

/** Job *i* goes to reserved slot *i*: the jobs each session got, best first. */
export function dealToSlots<S>(slots: readonly S[], jobs: readonly Job[]): Map<S, Job[]> {
  const dealt = new Map<S, Job[]>();
  let session: S | undefined;
  let list: Job[] | undefined;
  for (let i = 0; i < jobs.length; i++) {
    const slot = slots[i] as S;
    if (slot !== session || !list) {
      session = slot;
      list = dealt.get(slot);
      if (!list) dealt.set(slot, (list = []));
    }
    list.push(jobs[i] as Job);
  }
  return dealt;
}

import { randomUUID } from 'node:crypto';
import type { CancelReason, DrainReason, LeaseLostReason } from '../domain/codes.js';
import type { Job, LeaseRef } from '../domain/job.js';
import { BrokenInvariantError, checkTransition, type Transitions } from '../domain/state-machine.js';

/** What the dispatcher sends to a worker; the gRPC layer turns it into a WorkResponse. */
export type SessionMessage =
  /** Jobs one claim dealt to this session, best first (the gRPC layer may send them as one message). */
  | { kind: 'jobs'; jobs: Job[] }
  | { kind: 'cancel'; jobId: string; reason: CancelReason }
  | { kind: 'leaseLost'; jobId: string; token: string; reason: LeaseLostReason }
  | { kind: 'drain'; reason: DrainReason };

/**
 * A job the dispatcher has pushed to a session (or the session re-adopted from its hello)
 * and not yet seen finished, nor seen expire.
 */
export interface HeldLease {
  /** The lease's fencing token: only a write with this token frees the slot. */
  token: string;
  /**
   * When the lease expires (ms since the epoch, the database's `locked_until`): as the claim,
   * the hand-off or the hello's heartbeat set it, moved forward by every heartbeat that
   * extends this lease (WorkerSession.extend). Must stay true: it is never earlier than the
   * lease's latest expiry the dispatcher has seen, so a lease is never dropped as expired
   * while a heartbeat this process answered says it runs on.
   */
  expiresAt: number;
  /** How long one renewal makes the lease last (ms): its queue's lease length. */
  lengthMs: number;
  /**
   * Until when the worker's own renewals ask to hold it (ms): the latest time a heartbeat of
   * its worker named this lease, plus lengthMs, whether or not that renewal reached the
   * database (WorkerSession.asked). A worker that keeps renewing through a database outage
   * keeps its lease here; one that stopped naming it loses it after its expiry.
   */
  askedUntil: number;
  /**
   * While the worker has not yet named this lease (a heartbeat, or its hello), when the
   * session started holding it (performance.now()): the job may still be on its way to the
   * worker. Null once the worker named it.
   */
  pushedAt: number | null;
}

/**
 * A lease as the session starts holding it: expiring at `expiresAt` (the database's
 * locked_until), renewed for `lengthMs` at a time; asked for until its expiry so far.
 */
export function heldLease(token: string, expiresAt: number, lengthMs: number, named = false): HeldLease {
  return { token, expiresAt, lengthMs: Math.max(1000, lengthMs), askedUntil: expiresAt, pushedAt: named ? null : performance.now() };
}

/**
 * Where a session is in its life:
 * - `open`: takes new jobs into its free slots;
 * - `paused`: its stream cannot take more now (backpressure), so its free slots count as 0;
 *   jobs already claimed for it are still pushed (the stream buffers them);
 * - `draining`: the worker or the server asked for nothing new; it finishes what it holds;
 * - `closed`: the stream ended; its leases run on until they expire or the worker finishes
 *   them through another stream.
 */
export type SessionState = 'open' | 'paused' | 'draining' | 'closed';

/** The moves a session may make. Draining never reopens; a closed session never moves again. */
export const SESSION_TRANSITIONS: Transitions<SessionState> = {
  open: ['paused', 'draining', 'closed'],
  paused: ['open', 'draining', 'closed'],
  draining: ['closed'],
  closed: [],
};

/**
 * One worker's stream, as the dispatcher tracks it: its state, its slots, and the leases it
 * holds. What must stay true: `held + reserved ≤ slots` for every job the dispatcher gives it
 * (claims and hand-offs reserve a slot before their statement runs and give the reservation
 * back, job or not, before they push); only an open session has free slots; only an open or
 * paused session is pushed jobs; a lease is held only until it is finished, found lost by a
 * heartbeat, or ends (heldUntil: its expiry, or later while its worker keeps renewing it;
 * the dispatcher's expiry check, Dispatcher.dropExpiredLeases).
 */
export class WorkerSession {
  readonly id = randomUUID();
  /** When the stream opened (ListWorkers.connected_at). */
  readonly connectedAt = new Date();
  /**
   * Jobs pushed and not yet finished (nor expired), by job id. Change it only through
   * hold(), extend(), drop() and dropExpired().
   */
  readonly held = new Map<string, HeldLease>();
  /** Leases named in hello.held that were no longer current (to be told as lease_lost). */
  readonly lostOnOpen: LeaseRef[] = [];
  #state: SessionState = 'open';
  #reserved = 0;
  /**
   * The session's queues, the one whose claim reserved its slots longest ago first (a Set
   * keeps insertion order; a reservation moves its queue to the end). Freed slots wake the
   * queues in this order, so the first queue that wants them is the one served least recently.
   */
  readonly #turns: Set<string>;
  /**
   * No held lease ends before this (ms): a lower bound, so dropExpired() skips the scan
   * until it has passed. Must stay ≤ every held lease's end (heldUntil): hold() lowers it,
   * extend() and asked() only move ends later, dropExpired() recomputes it.
   */
  #earliestExpiry = Number.POSITIVE_INFINITY;

  /**
   * The session's job types as one string (job-type routing): sessions with equal keys share
   * a claimer group per queue. '*' = any type.
   */
  readonly typesKey: string;

  /**
   * `types`: the job types the worker runs, deduplicated and sorted (checkJobTypes), or null
   * for any type. Must stay true: the session is only ever given jobs of these types.
   */
  constructor(
    readonly workerId: string,
    readonly queues: string[],
    readonly slots: number,
    readonly send: (msg: SessionMessage) => void,
    readonly types: string[] | null = null,
  ) {
    this.typesKey = typesKeyOf(types);
    this.#turns = new Set(queues);
  }

  /**
   * The session's queues, least recently served first: the order in which freed slots wake
   * them (each wanted queue then claims in that order, and the first takes every free slot).
   * In the hello's order, a queue with a backlog listed first took every freed slot, claim
   * after claim, and the queues listed after it waited until it drained. Must stay true:
   * every queue of the session is in it once; it changes only in reserve(), never while a
   * caller iterates it (a claim reserves in a microtask or timer, not in a wake-up).
   */
  get queuesByTurn(): Iterable<string> {
    return this.#turns;
  }

  /** Whether the session may be given a job of this type. */
  takesType(type: string): boolean {
    return this.types === null || this.types.includes(type);
  }

  /** Where the session is in its life (see SessionState). */
  get state(): SessionState {
    return this.#state;
  }

  /** The session takes nothing new and finishes what it holds. */
  get draining(): boolean {
    return this.#state === 'draining';
  }

  /** The stream ended. */
  get closed(): boolean {
    return this.#state === 'closed';
  }

  /** Slots promised to claims and hand-offs in flight. */
  get reserved(): number {
    return this.#reserved;
  }

  /** Slots that are neither holding a job nor promised to a claim; 0 unless open. */
  get free(): number {
    if (this.#state !== 'open') return 0;
    return Math.max(0, this.slots - this.held.size - this.#reserved);
  }

  /**
   * Whether jobs leased to it may still be pushed: open or paused. A draining or closed
   * session's jobs are released instead.
   */
  get deliverable(): boolean {
    return this.#state === 'open' || this.#state === 'paused';
  }

  // ----- slots ------------------------------------------------------------------------

  /**
   * Promises `n` free slots (one by default) to a claim or hand-off in flight of `queue`,
   * which goes to the end of the session's turns (queuesByTurn).
   */
  reserve(n = 1, queue?: string): void {
    if (!(n >= 1 && this.free >= n)) throw new BrokenInvariantError(`session ${this.id}: reserve ${n} with ${this.free} slots free`);
    this.#reserved += n;
    if (queue !== undefined && this.#turns.delete(queue)) this.#turns.add(queue);
  }

  /** Gives back `n` slots (one by default) reserve() promised, whatever the session's state now. */
  unreserve(n = 1): void {
    if (!(n >= 1 && this.#reserved >= n)) throw new BrokenInvariantError(`session ${this.id}: unreserve ${n} with ${this.#reserved} reserved`);
    this.#reserved -= n;
  }

  /** Records a lease the session holds: a job pushed to it, or one named in its hello. */
  hold(jobId: string, lease: HeldLease): void {
    if (!this.deliverable) throw new BrokenInvariantError(`session ${this.id}: a job held while ${this.#state}`);
    if (!Number.isFinite(lease.expiresAt)) throw new BrokenInvariantError(`session ${this.id}: job ${jobId} held without an expiry`);
    this.held.set(jobId, lease);
    const end = heldUntil(lease);
    if (end < this.#earliestExpiry) this.#earliestExpiry = end;
  }

  /**
   * The worker asked at `at` (ms) to renew this lease (a heartbeat named it): the session
   * holds it at least until `at` plus its length, even if the renewal cannot reach the
   * database now (an outage). Only the lease with this token. Returns whether it is held.
   */
  asked(jobId: string, token: string, at: number): boolean {
    const lease = this.held.get(jobId);
    if (!lease || lease.token !== token) return false;
    const until = at + lease.lengthMs;
    if (until > lease.askedUntil) lease.askedUntil = until;
    lease.pushedAt = null;
    return true;
  }

  /**
   * The leases pushed to the worker within the last `maxAgeMs`, and more than a sixth of their
   * length ago, that it has not named yet: jobs that may still be on their way to it (the
   * server's buffers, the sockets, a slow link). A worker can renew a lease only once its job
   * arrived, and a job's lease runs from its claim, so the server renews these on the worker's
   * behalf while the worker heartbeats. Not the younger ones: a near worker's jobs, which end
   * in milliseconds, then never cost a renewal statement, and a worker that beats every third
   * of a lease (docs/api.md) costs one at most per job it holds long. Renewals come every
   * third of the shortest lease (LeaseRenewal), so one of these is renewed by half its lease.
   */
  inTransit(now: number, maxAgeMs: number): LeaseRef[] {
    const out: LeaseRef[] = [];
    for (const [id, lease] of this.held) {
      if (lease.pushedAt === null) continue;
      const age = now - lease.pushedAt;
      if (age < maxAgeMs && age >= lease.lengthMs / 6) out.push({ id, token: lease.token });
    }
    return out;
  }

  /**
   * Whether a lease pushed within the last `maxAgeMs` is still unnamed by the worker: one
   * inTransit() gives now, or will give once a sixth of its length old. LeaseRenewal ticks on
   * while one is, so a job pushed just before a tick is renewed at the next.
   */
  awaitsNaming(now: number, maxAgeMs: number): boolean {
    for (const lease of this.held.values()) if (lease.pushedAt !== null && now - lease.pushedAt < maxAgeMs) return true;
    return false;
  }

  /**
   * A heartbeat extended a lease until `expiresAt`: the session holds it that much longer.
   * Only the lease with this token (a stale lease of the same job says nothing of the
   * current one), and only ever later (heartbeat answers may be seen out of order).
   * Returns whether the session holds that lease.
   */
  extend(jobId: string, token: string, expiresAt: number): boolean {
    const lease = this.held.get(jobId);
    if (!lease || lease.token !== token) return false;
    if (expiresAt > lease.expiresAt) lease.expiresAt = expiresAt;
    return true;
  }

  /**
   * Forgets a lease; returns whether it was held. With `token`, only that lease: a late write
   * of an earlier run of the same job (claimed again, perhaps by this same session) must not
   * free the slot of the current one.
   */
  drop(jobId: string, token?: string): boolean {
    const lease = this.held.get(jobId);
    if (!lease || (token !== undefined && lease.token !== token)) return false;
    this.held.delete(jobId);
    return true;
  }

  /**
   * Forgets every lease that ended (heldUntil) before `cutoff` (ms since the epoch) and
   * returns them. Costs nothing until the earliest end has passed; then one pass over the
   * held leases.
   */
  dropExpired(cutoff: number): LeaseRef[] {
    if (cutoff <= this.#earliestExpiry) return [];
    const expired: LeaseRef[] = [];
    let earliest = Number.POSITIVE_INFINITY;
    for (const [id, lease] of this.held) {
      const end = heldUntil(lease);
      if (end < cutoff) expired.push({ id, token: lease.token });
      else if (end < earliest) earliest = end;
    }
    for (const { id } of expired) this.held.delete(id);
    this.#earliestExpiry = earliest;
    return expired;
  }

  // ----- life -------------------------------------------------------------------------

  /** Backpressure on: no new pushes. Returns whether it changed (a draining session stays draining). */
  pause(): boolean {
    if (this.#state !== 'open') return this.#stayUnlessClosed('pause');
    this.#to('paused');
    return true;
  }

  /** Backpressure off. Returns whether it changed, i.e. whether free slots may have appeared. */
  resume(): boolean {
    if (this.#state !== 'paused') return this.#stayUnlessClosed('resume');
    this.#to('open');
    return true;
  }

  /** Nothing new from now on. Returns whether it changed (draining twice is one drain). */
  drain(): boolean {
    if (this.#state === 'draining') return false;
    this.#to('draining'); // from closed this throws: a closed session is never drained
    return true;
  }

  /** The stream ended. Returns whether it changed (closing twice is one close). */
  close(): boolean {
    if (this.#state === 'closed') return false;
    this.#to('closed');
    return true;
  }

  /** pause/resume where they change nothing; on a closed session they are a bug. */
  #stayUnlessClosed(what: string): false {
    if (this.#state === 'closed') throw new BrokenInvariantError(`session ${this.id}: ${what} after close`);
    return false;
  }

  #to(next: SessionState): void {
    this.#state = checkTransition('worker session', SESSION_TRANSITIONS, this.#state, next);
  }
}

/** The claimer-group key of a set of job types (sorted, deduplicated) or of any type (null). */
export function typesKeyOf(types: readonly string[] | null): string {
  return types === null || types.length === 0 ? '*' : types.join('\n');
}

/**
 * Until when a session holds a lease: its expiry by the database's latest word, or by its
 * worker's latest renewal request, whichever is later. A lease the worker stopped renewing
 * ends with its expiry; one it renews while the database is unreachable does not end.
 */
export function heldUntil(lease: HeldLease): number {
  return lease.expiresAt > lease.askedUntil ? lease.expiresAt : lease.askedUntil;
}

import type { Job as PbJob } from '../../gen/evora/v1/job.js';
import type { Lease, LeasedJob, WorkRequest } from '../../gen/evora/v1/worker.js';
import { JobAbortedError, type AbortCause } from '../errors.js';
import { jobFromPb, type Job, type JsonObject } from '../types.js';
import type { LongTimer } from './timers.js';
import { IllegalTransitionError, type Transitions } from './state.js';

/**
 * One leased job in the worker, from the push to the end of its lease, and the table of
 * the jobs the worker holds. The held job's lifecycle:
 *
 *   running ──> reporting ──> awaitingAck ──> done   (ack: accepted, or invalid)
 *      │            ^   │          │    └───> lost   (ack: lease lost; resend bound reached)
 *      │            └───┼──────────┘                 (stream lost, ack: retry later, or ack:
 *      │                │                             invalid, once: a fail goes instead)
 *      └───> lost <─────┘                            (server: lease_lost naming the lease
 *                                                     while running, or while its report waits)
 *   awaitingAck ──> lostAwaitingAck ──> done | lost  (server: lease_lost naming the lease of a
 *                                                     written report; then its ack, or the end
 *                                                     of the stream)
 *
 * running: the handler runs and the lease is renewed. reporting: the report is made and
 * waits to be written (a batch flush, a reconnect, a resend delay). awaitingAck: written on
 * the current stream. lostAwaitingAck: written, and then the server said its lease is lost
 * (or pushed the same job under a newer lease, which says the same): the server no longer
 * counts it against this worker's slots, so neither does the worker, and it is renewed and
 * named in hello no more; only its ack is awaited, to learn whether the write was applied
 * just before the lease went (the ack settles it; a stream that ends first settles it as
 * lost, since nothing may be resent under a lost lease).
 *
 * A job holds its slot and its lease while running, reporting or awaitingAck, and in no
 * other state: that is the count the server keeps for the session (src/dispatcher/
 * session.ts: a lease is held from its push until its write commits or a heartbeat finds it
 * lost), so the worker never counts more than the server and a push never finds the slots
 * full. done and lost are final. A lost job's handler may still be running: the handler
 * runner counts executions on its own.
 */

/** Where a held job is in its lifecycle (see the module comment). */
export type HeldJobState = 'running' | 'reporting' | 'awaitingAck' | 'lostAwaitingAck' | 'done' | 'lost';

/**
 * The held job's allowed moves (the diagram above). Exported for the tests that pin it;
 * HeldJob.to() is the only code that moves a job along it.
 */
export const HELD_JOB_TRANSITIONS: Transitions<HeldJobState> = {
  running: ['reporting', 'lost'],
  reporting: ['awaitingAck', 'done', 'lost'],
  awaitingAck: ['reporting', 'lostAwaitingAck', 'done', 'lost'],
  lostAwaitingAck: ['done', 'lost'],
  done: [],
  lost: [],
};

/** The states in which a job holds a slot and a lease (see the module comment). */
export function holdsLease(state: HeldJobState): boolean {
  return state === 'running' || state === 'reporting' || state === 'awaitingAck';
}

/** What a finished handler reported. */
export type ReportOutcome = 'completed' | 'failed' | 'snoozed';

/** The report of a held job: the message to write and what it says. */
export interface Report {
  outcome: ReportOutcome;
  /** The error reported with a failure. */
  error: string | null;
  /** A `complete`, `fail` or `snooze` message. */
  msg: NonNullable<WorkRequest['msg']>;
  /** Rough upper bound of the encoded size (to keep batches well under the message limit). */
  bytes: number;
  /**
   * A completion's result as JSON text: sent as result_json instead of the message's Struct
   * when the server takes it (ServerWelcome.payloads_as_json). Unset: no result, or not a completion.
   */
  resultText?: string;
}

/** A report the server refused as invalid: what it said, and why (the server's words). */
export interface RefusedReport {
  outcome: ReportOutcome;
  reason: string;
}

/** One leased job: its lease, its state, its report and its abort signal. */
export class HeldJob {
  readonly job: Job;
  readonly token: string;
  /** Length of the lease (server clock on both ends, so no skew). */
  readonly leaseMs: number;
  /** When the lease ends unless renewed, by the server's clock (what ctx.leaseExpiresAt shows). */
  leaseExpiresAt: Date | null;
  /** The parents' results the server sent with the job (LeasedJob.parent_results). */
  readonly parentResults: Record<string, JsonObject>;
  /** The checkpoint an earlier attempt reported (LeasedJob.checkpoint; ctx.checkpoint); null = none. */
  readonly checkpoint: JsonObject | null;
  /**
   * By the local clock, a time before which the lease surely still lasts: when the worker
   * received it (or sent the heartbeat that renewed it) plus the lease length.
   */
  leaseDeadline: number;
  report: Report | null = null;
  /**
   * The handler's own report, when the server refused it as invalid and `report` became the
   * fail sent instead (Reports); null otherwise.
   */
  refused: RefusedReport | null = null;
  /** Times the report was written. */
  sends = 0;
  /**
   * A write of the report went unanswered: its stream ended before the ack. The server may
   * have applied it, so a later LEASE_LOST (the resend meeting that write) does not say it
   * was not applied (JobOutcome.maybeApplied).
   */
  ackMissed = false;
  /** Resends after the server answered RETRY_LATER (bounded by MAX_RESENDS and the lease). */
  writeRetries = 0;
  /** Resends after RETRY_LATER with database_unavailable (not bounded: they only pace the backoff). */
  outageResends = 0;
  /** The pending resend after a RETRY_LATER. */
  resendTimer: LongTimer | null = null;
  /**
   * The same job's next report (a later lease) while both wait for their acks; kept by
   * HeldJobs, which chains a job's reports oldest first.
   */
  laterReport: HeldJob | null = null;
  private _state: HeldJobState = 'running';
  /** Made when the handler first reads ctx.signal (most never do). */
  private controller: AbortController | null = null;
  private abortedBy: JobAbortedError | null = null;

  constructor(
    private readonly table: HeldJobs,
    leased: LeasedJob,
    job: PbJob,
    defaultLeaseMs: number,
    /** When the message that carried the job was received (Date.now() clock). */
    receivedAt: number,
  ) {
    this.job = jobFromPb(job, leased.payloadJson);
    this.token = leased.leaseToken;
    this.leaseExpiresAt = leased.leaseExpiresAt ?? null;
    this.parentResults = leased.parentResults as Record<string, JsonObject>;
    this.checkpoint = (leased.checkpoint ?? null) as JsonObject | null;
    const started = this.job.startedAt;
    this.leaseMs = this.leaseExpiresAt && started ? Math.max(1000, this.leaseExpiresAt.getTime() - started.getTime()) : defaultLeaseMs;
    this.leaseDeadline = receivedAt + this.leaseMs;
  }

  get state(): HeldJobState {
    return this._state;
  }

  /** Moves along the lifecycle (throws on a move the table does not allow); the table's indexes follow. */
  to(next: HeldJobState): void {
    const from = this._state;
    // Three moves per job: check without building the error's words unless it is thrown.
    if (!HELD_JOB_TRANSITIONS[from].includes(next)) throw new IllegalTransitionError(`job ${this.job.id}`, from, next);
    this._state = next;
    this.table.moved(this, from, next);
  }

  /** Why the job was aborted; set once, whether or not the handler ever read ctx.signal. */
  get aborted(): JobAbortedError | null {
    return this.abortedBy;
  }

  /** ctx.signal: made on first use, already aborted if the job was (with the same reason). */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortedBy) this.controller.abort(this.abortedBy);
    }
    return this.controller.signal;
  }

  /** Aborts ctx.signal with a JobAbortedError of this kind. Returns false if it was aborted before. */
  abort(kind: AbortCause, message: string): boolean {
    if (this.abortedBy) return false;
    this.abortedBy = new JobAbortedError(kind, message);
    this.controller?.abort(this.abortedBy);
    return true;
  }

  lease(): Lease {
    return { jobId: this.job.id, leaseToken: this.token };
  }
}

/**
 * The jobs the worker holds, indexed as the server addresses them: `running` by job id
 * (cancel and lease-lost messages are about these), and the reports (reporting and
 * awaitingAck jobs) by job id and then lease token, which is how an ack names its report.
 * One job can have several reports at once: the report of an earlier lease may still wait
 * for its ack when the job, leased again (a retry claimed at once), is reported under its
 * new lease, and the two acks may come in either order. The index holds a job's oldest
 * report; its later ones follow through HeldJob.laterReport (almost always there is one).
 *
 * What must stay true: a job is in the index of its state and in no other, and moving
 * between reporting, awaitingAck and lostAwaitingAck leaves the indexes alone; `held`
 * counts exactly the jobs whose state holds a lease (holdsLease); a job's reports are kept in
 * the order they were made (a server that predates ack tokens acks one job's reports in
 * the order they were sent); every move calls `changed` (stop() waits on it); and per job
 * the bookkeeping is a constant number of map operations, with nothing allocated.
 */
export class HeldJobs {
  private readonly runningById = new Map<string, HeldJob>();
  /** Each job's oldest report not yet settled; the later ones hang off it (laterReport). */
  private readonly reportsById = new Map<string, HeldJob>();
  private unsettled = 0;
  /** Reports in state lostAwaitingAck: not settled, but holding no slot and no lease. */
  private leaseless = 0;

  constructor(private readonly changed: () => void) {}

  get running(): ReadonlyMap<string, HeldJob> {
    return this.runningById;
  }

  /** Reports made and not yet settled (reporting or awaitingAck jobs). */
  get reportCount(): number {
    return this.unsettled;
  }

  /** Every report not yet settled, each job's oldest first. */
  *reports(): IterableIterator<HeldJob> {
    for (const first of this.reportsById.values()) {
      for (let h: HeldJob | null = first; h; h = h.laterReport) yield h;
    }
  }

  /** The ids of the jobs with a report not yet settled, once each. */
  reportingJobIds(): IterableIterator<string> {
    return this.reportsById.keys();
  }

  /** Whether any lease of this job is held here, running or reported (O(1): checked on every push). */
  hasLeaseOf(jobId: string): boolean {
    return this.runningById.has(jobId) || this.reportsById.has(jobId);
  }

  /** The job's reports not yet settled, oldest first. */
  *reportsOf(jobId: string): IterableIterator<HeldJob> {
    for (let h = this.reportsById.get(jobId); h; h = h.laterReport ?? undefined) yield h;
  }

  /** The report made under this lease, if it is not settled yet. */
  reportUnder(jobId: string, leaseToken: string): HeldJob | undefined {
    for (let h = this.reportsById.get(jobId); h; h = h.laterReport ?? undefined) {
      if (h.token === leaseToken) return h;
    }
    return undefined;
  }

  /**
   * The report an ack answers: the one under the lease token the ack names; from a server
   * that predates ack tokens (an empty token), the job's oldest report, since such a server
   * acks one job's reports in the order they were sent. Undefined if none waits.
   */
  reportAcked(jobId: string, leaseToken: string): HeldJob | undefined {
    if (leaseToken !== '') return this.reportUnder(jobId, leaseToken);
    return this.reportsById.get(jobId);
  }

  /**
   * Slots taken, which is leases held: running jobs and reports not yet acknowledged whose
   * lease the server has not said is lost. The server counts exactly these for the session.
   */
  get held(): number {
    return this.runningById.size + this.unsettled - this.leaseless;
  }

  /**
   * A newly pushed job, in state running. `receivedAt` (Date.now() clock): when its
   * message came, the start of the time its lease surely lasts.
   */
  add(leased: LeasedJob, job: PbJob, defaultLeaseMs: number, receivedAt: number): HeldJob {
    const h = new HeldJob(this, leased, job, defaultLeaseMs, receivedAt);
    this.runningById.set(h.job.id, h);
    this.changed();
    return h;
  }

  /** Every lease held, once each (what hello.held and heartbeats carry); none the server said is lost. */
  leases(): Lease[] {
    const leases: Lease[] = [];
    for (const h of this.runningById.values()) leases.push(h.lease());
    for (const h of this.reports()) {
      if (h.state !== 'lostAwaitingAck' && this.runningById.get(h.job.id)?.token !== h.token) leases.push(h.lease());
    }
    return leases;
  }

  /** The shortest lease held, in ms (Infinity when none). */
  shortestLeaseMs(): number {
    let ms = Infinity;
    for (const h of this.runningById.values()) ms = Math.min(ms, h.leaseMs);
    for (const h of this.reports()) if (h.state !== 'lostAwaitingAck') ms = Math.min(ms, h.leaseMs);
    return ms;
  }

  /** Called by HeldJob.to(): keeps the indexes in step with the states. */
  moved(h: HeldJob, from: HeldJobState, to: HeldJobState): void {
    if (from === 'running') {
      const id = h.job.id;
      if (this.runningById.get(id) === h) this.runningById.delete(id);
      if (to === 'reporting') this.reportAdd(h);
    } else if (to === 'done' || to === 'lost') {
      if (from === 'lostAwaitingAck') this.leaseless--;
      this.reportRemove(h);
    } else if (to === 'lostAwaitingAck') {
      this.leaseless++;
    }
    this.changed();
  }

  /** Appends a report to its job's chain (the job's newest). */
  private reportAdd(h: HeldJob): void {
    this.unsettled++;
    h.laterReport = null;
    const first = this.reportsById.get(h.job.id);
    if (!first) {
      this.reportsById.set(h.job.id, h);
      return;
    }
    let last = first;
    while (last.laterReport) last = last.laterReport;
    last.laterReport = h;
  }

  /** Takes a settled report out of its job's chain. */
  private reportRemove(h: HeldJob): void {
    const id = h.job.id;
    const first = this.reportsById.get(id);
    if (!first) return;
    if (first === h) {
      if (h.laterReport) this.reportsById.set(id, h.laterReport);
      else this.reportsById.delete(id);
    } else {
      let prev = first;
      while (prev.laterReport && prev.laterReport !== h) prev = prev.laterReport;
      if (prev.laterReport !== h) return;
      prev.laterReport = h.laterReport;
    }
    h.laterReport = null;
    this.unsettled--;
  }
}

// Over 400 lines on purpose: the worker's lifecycle (start, reconnect, drain, stop) and the
// paths from the stream to its held jobs are one state machine, read best in one place.
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import * as grpc from '@grpc/grpc-js';
import { CancelReason, type LeasedJob, type ServerLeaseLost, type ServerWelcome, type WorkResponse } from '../../gen/evora/v1/worker.js';
import { channelCreate, credentialsFor, RECONNECT_INITIAL_DELAY_MS, RECONNECT_MAX_DELAY_MS, resolveAddress } from '../connection.js';
import { stringCheck } from '../checks.js';
import type { AbortCause } from '../errors.js';
import type { JsonObject } from '../types.js';
import { leaseLostName, leaseLostText } from './codes.js';
import { HandlerRunner, snoozeReport } from './handler-runner.js';
import { Heartbeats } from './heartbeats.js';
import { HeldJobs, type HeldJob, type Report } from './held-job.js';
import { limitsOf, progressTooLarge } from './limits.js';
import { Reports } from './reports.js';
import { ChangeWaiters, StateMachine, type Transitions } from './state.js';
import { TimerSet, type LongTimer } from './timers.js';
import { workerLogOf, type EvoraWorkerOptions, type JobHandler, type StopResult, type WorkerEvents, type WorkerLog, type WorkerStats } from './types.js';
import { WorkConnection } from './work-connection.js';
import { WorkStreamClient } from './work-client.js';

/**
 * EvoraWorker: runs job handlers for jobs the server pushes on the Work stream. This class
 * is the public facade; the work is done by its parts, each in its own module:
 *
 * - WorkConnection (work-connection.ts): the stream, hello/welcome, reconnects, drain.
 * - Heartbeats (heartbeats.ts): the renewal timer and the lease bookkeeping.
 * - Reports (reports.ts): batching reports, matching acks, acting on their codes.
 * - HandlerRunner (handler-runner.ts): the user's handlers, their context and signal.
 * - HeldJobs (held-job.ts): each held job's lifecycle, running -> … -> done | lost.
 *
 * (About 420 lines: the facade wires those parts together and owns the public events and
 * stop() order; splitting the wiring further would scatter one sequence over files.)
 *
 * How it keeps its promises (docs/sdk.md has the user's view):
 * - Slots: the server pushes at most `slots` jobs minus those held; the worker runs every
 *   pushed job at once. A job holds its slot until the server acknowledges its report or
 *   says the lease is lost.
 * - Reconnects: handlers keep running while the stream is down; their reports wait and go
 *   out after the next welcome, whose hello named the leases still held.
 * - Per job, the worker does O(1) work: no walk over the held jobs on a push, and the
 *   AbortController behind ctx.signal is made only if the handler reads ctx.signal.
 * - One lifetime AbortSignal: every timer of every part is bound to it, and stop() aborts
 *   it, so nothing outlives stop().
 * - stop() has one order (see stop()).
 *
 * The worker's own lifecycle: idle -> starting -> started -> stopping -> stopped (starting:
 * start() called, no welcome yet; stop() may come from any state before stopping).
 */

/** Where the worker is in its lifecycle (see the module comment). */
export type WorkerState = 'idle' | 'starting' | 'started' | 'stopping' | 'stopped';

/**
 * The worker's allowed moves (the lifecycle above). Exported for the tests that pin it;
 * only the worker's own StateMachine moves along it.
 */
export const WORKER_TRANSITIONS: Transitions<WorkerState> = {
  idle: ['starting', 'stopping'],
  starting: ['started', 'stopping'],
  started: ['stopping'],
  stopping: ['stopped'],
  stopped: [],
};

/** Runs handlers for the jobs of some queues (see the module comment and docs/sdk.md). */
export class EvoraWorker extends EventEmitter<WorkerEvents> {
  readonly workerId: string;
  readonly address: string;
  readonly queues: readonly string[];
  readonly slots: number;

  private readonly log: WorkerLog;
  /** Aborted by stop(): every timer of every part ends with it. */
  private readonly lifetime = new AbortController();
  private readonly timers: TimerSet;
  private readonly state: StateMachine<WorkerState>;
  private readonly channel: grpc.Channel;
  private readonly jobs: HeldJobs;
  private readonly runner: HandlerRunner;
  private readonly heartbeats: Heartbeats;
  private readonly reports: Reports;
  private readonly connection: WorkConnection;
  private startPromise: Promise<void> | null = null;
  private startWaiter: { resolve: () => void; reject: (err: Error) => void } | null = null;
  private startTimer: LongTimer | null = null;
  private stopPromise: Promise<StopResult> | null = null;
  /** stop() waits on conditions here; every state change of every part wakes it. */
  private readonly waiters = new ChangeWaiters();

  constructor(opts: EvoraWorkerOptions) {
    super();
    if (!Array.isArray(opts.queues) || opts.queues.length === 0) throw new TypeError('EvoraWorker: queues must be an array naming at least one queue');
    opts.queues.forEach((q, i) => stringCheck(q, `EvoraWorker: queues[${i}]`));
    const slots = opts.slots ?? 10;
    if (!Number.isInteger(slots) || slots < 1) throw new TypeError(`EvoraWorker: slots must be a positive integer, got ${slots}`);
    this.queues = [...opts.queues];
    this.slots = slots;
    this.workerId = opts.workerId ?? defaultWorkerId();
    this.address = resolveAddress(opts.address);
    const backoff = {
      initialDelayMs: opts.reconnect?.initialDelayMs ?? RECONNECT_INITIAL_DELAY_MS,
      // Short: after an outage the worker is back within about this long of the server.
      maxDelayMs: opts.reconnect?.maxDelayMs ?? RECONNECT_MAX_DELAY_MS,
      jitter: opts.reconnect?.jitter ?? 0.3,
    };
    this.log = workerLogOf(opts.logger);
    const changed = () => this.waiters.changed();
    this.timers = new TimerSet(this.lifetime.signal);
    this.state = new StateMachine('EvoraWorker', 'idle', WORKER_TRANSITIONS, changed);
    // The channel reconnects on its own schedule too; keep it no slower than ours.
    this.channel = channelCreate(opts, backoff);
    const client = new WorkStreamClient(this.address, credentialsFor(opts), {
      channelOverride: this.channel,
    });
    this.jobs = new HeldJobs(changed);
    this.runner = new HandlerRunner({
      workerId: this.workerId,
      log: this.log,
      started: (job) => this.fire('jobStarted', job),
      done: (h, report) => this.onHandlerDone(h, report),
      // Only while the handler holds the lease; dropped while disconnected (the next report
      // or the job's end says more).
      progress: (h, msg) => {
        const tooLarge = progressTooLarge(msg, limitsOf(this.connection.session));
        if (tooLarge !== null) throw new RangeError(tooLarge);
        if (h.state === 'running') this.connection.write(msg);
      },
    });
    this.connection = new WorkConnection({
      client,
      address: this.address,
      workerId: this.workerId,
      queues: this.queues,
      slots,
      backoff,
      timers: this.timers,
      log: this.log,
      changed,
      events: {
        helloLeases: () => this.jobs.leases(),
        helloJobTypes: () => this.runner.types(),
        stopping: () => this.stopping,
        opened: (w, reconnect) => this.onOpened(w, reconnect),
        message: (m, late) => this.onMessage(m, late),
        serverDrain: (code, reason) => this.fire('drain', { reason, code }),
        lost: () => {
          this.heartbeats.stop();
          this.reports.streamLost();
        },
        disconnected: (error, retryInMs) => this.fire('disconnected', { error, retryInMs }),
        refused: (error) => this.onRefused(error),
        writable: () => this.reports.flush(),
      },
    });
    this.heartbeats = new Heartbeats({
      timers: this.timers,
      jobs: this.jobs,
      log: this.log,
      send: (req) => this.connection.write(req),
      lastHeardAt: () => this.connection.lastHeardAt,
      silent: (silentMs) => {
        this.log.warn({ silent_ms: silentMs }, 'no word from the server; reconnecting');
        this.connection.cancel();
      },
      cancelRequested: (h) => this.abortJob(h, 'cancelled', 'an operator cancelled the job'),
    });
    this.reports = new Reports({
      stream: this.connection,
      jobs: this.jobs,
      timers: this.timers,
      log: this.log,
      settled: (outcome) => this.fire('jobFinished', outcome),
    });
  }

  /**
   * Registers the handler for a job type (replacing an earlier one). Returns the worker, for
   * chaining. The worker's hello declares its registered types (job-type routing), so the
   * server sends it only jobs of those types: register them all before start() (a type
   * registered later is declared at the next reconnect only).
   */
  handle<P = JsonObject>(type: string, handler: JobHandler<P>): this {
    this.runner.register(type, handler as JobHandler);
    return this;
  }

  /**
   * Opens the Work stream. Resolves once the server's welcome arrived; until then it keeps
   * trying with backoff (the server may not be up yet). Rejects if the server refuses the
   * hello (e.g. INVALID_ARGUMENT for a bad queue name), if stop() is called first, or after
   * `timeoutMs` without a welcome (the worker then stops). Once stop() was called (or a
   * start() timed out), every start() rejects: a stopped worker does not start again. Infinity (or unset) = no limit; any
   * finite length is kept, however long (see LongTimer).
   */
  start(opts: { timeoutMs?: number } = {}): Promise<void> {
    // Checked first: a worker that started and then stopped resolved start() again, as if it
    // ran, while it took no more jobs.
    if (this.stopping) return Promise.reject(new Error('EvoraWorker: start() after stop(): a stopped worker does not start again; make a new EvoraWorker'));
    if (this.startPromise) return this.startPromise;
    if (this.runner.registered === 0) return Promise.reject(new Error('EvoraWorker: register a handler with handle() before start()'));
    this.state.to('starting');
    this.startPromise = new Promise<void>((resolve, reject) => {
      this.startWaiter = { resolve, reject };
    });
    if (opts.timeoutMs !== undefined) {
      this.startTimer = this.timers.after(opts.timeoutMs, () => {
        this.startSettle(new Error(`EvoraWorker: no welcome from ${this.address} within ${opts.timeoutMs} ms`));
        void this.stop({ timeoutMs: 0 });
      });
    }
    this.connection.start();
    return this.startPromise;
  }

  /**
   * Drains and stops, in this order:
   * 1. Takes no new work: start() rejects if no welcome came yet; the stream is asked to
   *    drain (or, while reconnecting, the next session starts draining); a job pushed
   *    meanwhile is given back at once with a snooze.
   * 2. Waits up to `timeoutMs` (default 30 000) for the running handlers.
   * 3. Aborts the handlers left (ctx.signal, kind 'shutdown'; a handler that then throws
   *    gives its job back with a snooze).
   * 4. Waits up to `graceMs` (default 5 000) for them and for the ack of every report.
   * 5. Writes the reports still waiting for their batch, aborts the worker's lifetime signal
   *    (heartbeat, reconnect and resend timers end), half-closes the stream and waits up to
   *    2 s for the server to end it, then closes the connection.
   * `timeoutMs` and `graceMs` of Infinity wait for as long as it takes; any finite length is
   * kept, however long (see LongTimer). Resolves to the jobs left unfinished. Safe to call
   * twice (the same promise).
   */
  stop(opts: { timeoutMs?: number; graceMs?: number } = {}): Promise<StopResult> {
    this.stopPromise ??= this.doStop(opts.timeoutMs ?? 30_000, opts.graceMs ?? 5_000);
    return this.stopPromise;
  }

  /** A snapshot of the worker's state. */
  stats(): WorkerStats {
    return {
      workerId: this.workerId,
      connected: this.connection.connected,
      sessionId: this.connection.session?.sessionId ?? null,
      running: this.runner.executions.size,
      awaitingAck: this.jobs.reportCount,
      held: this.jobs.held,
      reconnects: this.connection.reconnects,
      draining: this.stopping || this.connection.current === 'draining',
    };
  }

  // ----- what the parts report -------------------------------------------------------

  private onOpened(w: ServerWelcome, reconnect: boolean): void {
    if (this.state.is('starting')) this.state.to('started');
    const held = this.jobs.held;
    this.log.info({ session_id: w.sessionId, reconnect, held }, reconnect ? 'reconnected' : 'connected');
    // Renew (and learn the state of) the carried-over leases at once.
    this.heartbeats.start(w);
    this.startSettle(null);
    this.fire('ready', {
      sessionId: w.sessionId,
      leaseSeconds: w.leaseSeconds,
      heartbeatIntervalSeconds: w.heartbeatIntervalSeconds,
      reconnect,
      held,
    });
  }

  private onMessage(m: NonNullable<WorkResponse['msg']>, late: boolean): void {
    switch (m.$case) {
      case 'job':
        return this.onJob(m.value, this.defaultLeaseMs(), Date.now());
      case 'jobs': {
        // Once per message, not per job.
        const leaseMs = this.defaultLeaseMs();
        const receivedAt = Date.now();
        for (const leased of m.value.jobs) this.onJob(leased, leaseMs, receivedAt);
        return;
      }
      case 'ack':
        return this.reports.acked(m.value);
      case 'acks':
        for (const a of m.value.acks) this.reports.acked(a);
        return;
      case 'heartbeatAck':
        return this.heartbeats.acked(m.value, late);
      case 'cancel': {
        // Every cancel code (and none, from an older server) means: stop the job. TIMEOUT
        // says the server already failed the attempt (the signal's reason tells the handler).
        const h = this.jobs.running.get(m.value.jobId);
        if (h && m.value.code === CancelReason.CANCEL_REASON_TIMEOUT) {
          this.abortJob(h, 'timed_out', 'the attempt ran past the job\'s timeout; the server failed it');
        } else if (h) this.abortJob(h, 'cancelled', 'an operator cancelled the job');
        return;
      }
      case 'leaseLost':
        return this.onLeaseLost(m.value);
      case 'welcome':
      case 'drain':
        // The connection handles these itself.
        return;
    }
  }

  /**
   * The server no longer holds a lease for this worker, named by its token (empty from a
   * server older than the token: then the job's running lease), and has freed its slot. The
   * running job under it is aborted and its outcome never reported; a report under it that
   * waits to be written (a resend after RETRY_LATER, a reconnect) is dropped, since nothing
   * may be sent about a lost lease. A report already written frees its slot too, and is
   * left to its ack (the server may have applied it just before). Any other lease of the
   * job, such as a newer one, is kept.
   */
  private onLeaseLost(lost: ServerLeaseLost): void {
    this.leaseLose(lost.jobId, lost.leaseToken, leaseLostName(lost.code), lost.reason, leaseLostText(lost.code));
  }

  /** What onLeaseLost does, for one lease (`token`; '' = the job's running lease). */
  private leaseLose(jobId: string, token: string, code: string, reason: string, abortText: string): void {
    const h = this.jobs.running.get(jobId);
    if (h && (token === '' || token === h.token)) {
      this.log.warn({ job_id: h.job.id, lease_token: h.token, code, reason }, 'lease lost; the handler is aborted and its outcome will not be reported');
      h.to('lost');
      this.abortJob(h, 'lease_lost', abortText);
      return;
    }
    const report = token === '' ? undefined : this.jobs.reportUnder(jobId, token);
    if (report) return this.reports.leaseLost(report, code, reason);
    this.log.debug({ job_id: jobId, lease_token: token }, 'lease lost for a lease no running job or waiting report holds');
  }

  /**
   * A job was pushed under `token`: a job has one current lease, so every other lease of it
   * this worker still holds is lost, whether or not the server's lease_lost for it has come
   * yet (the server stopped counting it when it leased the job again). Acting now keeps the
   * slot count equal to the server's at the moment of the push. Rare: only after a lease
   * expired while this worker held it (for instance through a database outage).
   */
  private leasesSuperseded(jobId: string, token: string): void {
    const running = this.jobs.running.get(jobId);
    const stale: string[] = [];
    if (running && running.token !== token) stale.push(running.token);
    for (const r of this.jobs.reportsOf(jobId)) if (r.token !== token && r.state !== 'lostAwaitingAck') stale.push(r.token);
    for (const t of stale) this.leaseLose(jobId, t, 'superseded', 'the server leased the job again', 'the server leased the job again: this lease is lost');
  }

  /** The lease length a pushed job without lease times is given: the session's, else 30 s. */
  private defaultLeaseMs(): number {
    return (this.connection.session?.leaseSeconds ?? 30) * 1000;
  }

  /** stop() was called: no new work is taken. */
  private get stopping(): boolean {
    const s = this.state.current;
    return s === 'stopping' || s === 'stopped';
  }

  private onJob(leased: LeasedJob, defaultLeaseMs: number, receivedAt: number): void {
    const job = leased.job;
    if (!job) return;
    if (this.jobs.hasLeaseOf(job.id)) this.leasesSuperseded(job.id, leased.leaseToken);
    if (this.jobs.held >= this.slots) {
      this.log.warn({ job_id: job.id, slots: this.slots }, 'the server pushed more jobs than this worker has slots');
    }
    const h = this.jobs.add(leased, job, defaultLeaseMs, receivedAt);
    if (this.stopping) {
      // Pushed before the server saw our drain: give it back untouched.
      this.log.debug({ job_id: h.job.id }, 'giving back a job pushed while stopping');
      this.reports.submit(h, snoozeReport(h, null));
      return;
    }
    this.heartbeats.leaseAdded(h.leaseMs);
    void this.runner.run(h);
  }

  private onHandlerDone(h: HeldJob, report: Report): void {
    if (h.state === 'lost') {
      this.fire('jobFinished', { job: h.job, outcome: 'lost', accepted: false, reason: 'lease lost', error: null, ackResult: null, refused: null, maybeApplied: false });
      this.waiters.changed();
      return;
    }
    this.reports.submit(h, report);
  }

  private onRefused(error: Error): void {
    this.log.error({ err: error }, 'the server refused the worker');
    this.emitError(error);
    this.startSettle(error);
    void this.stop({ timeoutMs: 0, graceMs: 0 });
  }

  private abortJob(h: HeldJob, kind: AbortCause, message: string): void {
    if (h.abort(kind, message)) this.fire('jobAborted', { job: h.job, kind });
  }

  // ----- stopping -----------------------------------------------------------------------

  private async doStop(timeoutMs: number, graceMs: number): Promise<StopResult> {
    this.state.to('stopping');
    this.startSettle(new Error('EvoraWorker: stopped before the server welcomed it'));
    this.connection.drain();
    const executions = this.runner.executions;
    await this.waiters.until(() => executions.size === 0, timeoutMs);
    for (const h of executions) this.abortJob(h, 'shutdown', 'the worker is stopping');
    await this.waiters.until(() => executions.size === 0 && this.jobs.reportCount === 0, graceMs);

    const unfinished = [...new Set([...[...executions].map((h) => h.job.id), ...this.jobs.reportingJobIds()])];
    if (unfinished.length > 0) {
      this.log.warn({ jobs: unfinished }, 'stopping with unfinished jobs; their leases will expire and they will be retried');
    }
    // Reports still waiting for their batch go out before the half-close.
    this.reports.flush({ ignoreBackpressure: true });
    this.heartbeats.stop();
    this.lifetime.abort();
    await this.connection.close();
    this.channel.close();
    this.state.to('stopped');
    this.log.info({ unfinished: unfinished.length }, 'worker stopped');
    return { unfinished };
  }

  private startSettle(err: Error | null): void {
    const w = this.startWaiter;
    if (!w) return;
    this.startWaiter = null;
    this.startTimer = this.timers.clear(this.startTimer);
    if (err) w.reject(err);
    else w.resolve();
  }

  private emitError(err: Error): void {
    if (this.listenerCount('error') > 0) this.fire('error', err);
  }

  /** Emits an event; a listener that throws is logged, never allowed to break the worker. */
  private fire<K extends keyof WorkerEvents>(event: K, ...args: WorkerEvents[K]): void {
    try {
      (this.emit as (e: string, ...a: unknown[]) => boolean)(event, ...args);
    } catch (err) {
      this.log.error({ err, event }, 'a worker event listener threw');
    }
  }
}

function defaultWorkerId(): string {
  const host = hostname().replace(/[^A-Za-z0-9_.:/-]/g, '-').replace(/^[^A-Za-z0-9]+/, '') || 'worker';
  return `${host}:${process.pid}:${randomBytes(3).toString('hex')}`;
}

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import * as grpc from '@grpc/grpc-js';
import {
  WorkerServiceClient,
  type LeasedJob,
  type Lease,
  type ServerWelcome,
  type WorkerComplete,
  type WorkerFail,
  type WorkRequest,
  type WorkResponse,
} from '../gen/evora/v1/worker.js';
import { channelCreate, resolveAddress, type ConnectionOptions } from './connection.js';
import { EvoraApiError, JobAbortedError, NonRetryableError, RetryAtError, SnoozeError, type AbortCause } from './errors.js';
import { jobFromPb, toJsonObjectSized, type Job, type JsonObject } from './types.js';

/**
 * EvoraWorker: runs job handlers for jobs the server pushes on the Work stream.
 *
 * How it keeps its promises (docs/sdk.md has the user's view):
 * - Slots: the server pushes at most `slots` jobs minus those held; the worker runs every
 *   pushed job at once, so handlers run concurrently up to the slots. A job holds its slot
 *   until the server acknowledges its report (complete/fail/snooze) or says the lease is lost.
 * - Heartbeats: one timer, independent of the handlers, renews every lease the worker holds
 *   (running jobs and reports awaiting their ack) well within the shortest lease.
 * - Reconnects: when the stream breaks, the worker reconnects with exponential backoff and
 *   jitter, sends hello with `held` = the leases it still holds, and re-sends the reports
 *   that were not acknowledged. Handlers keep running meanwhile; their reports wait.
 * - Batches: the hello says accepts_batches, so the server may push `jobs` and `acks`
 *   batches; reports that become ready in the same tick go as one `completes` / `fails`
 *   message (flushed on setImmediate, so a lone report waits for nothing) when the
 *   server's welcome says it takes them, else one message each.
 * - Per job, the worker does O(1) work: no walk over the held jobs on a push, and the
 *   AbortController behind ctx.signal is made only if the handler reads ctx.signal.
 * - Stop: drain, wait for the handlers (up to a timeout), abort the rest, wait for acks,
 *   close the stream.
 */

/** Where the worker logs; pino-compatible (`logger.warn(obj, msg)`). Default: silent. */
export interface WorkerLogger {
  debug?(obj: object, msg: string): void;
  info?(obj: object, msg: string): void;
  warn?(obj: object, msg: string): void;
  error?(obj: object, msg: string): void;
}

/** Options of an EvoraWorker. */
export interface EvoraWorkerOptions extends ConnectionOptions {
  /** Queues to take jobs from (at least one). */
  queues: string[];
  /** Jobs held (and handlers run) at once. Default 10. */
  slots?: number;
  /** Identity recorded in Job.workerId. Default `<hostname>:<pid>:<random>`. */
  workerId?: string;
  /** Reconnect backoff: delay = min(max, initial * 2^n) +/- jitter. Defaults 200 ms, 5 000 ms, 0.3. */
  reconnect?: { initialDelayMs?: number; maxDelayMs?: number; jitter?: number };
  /** Where to log. Default: nowhere (listen to the events instead). */
  logger?: WorkerLogger;
}

/** What a handler gets besides the job. */
export interface JobContext<P = JsonObject> {
  /** The job as leased (state RUNNING, attempt = this attempt's number). */
  readonly job: Job<P>;
  /** Fires when an operator cancels the job, the lease is lost, or a stop times out; its `reason` is a JobAbortedError. */
  readonly signal: AbortSignal;
  /** This worker's id. */
  readonly workerId: string;
  /** The lease token (reports carry it; handlers rarely need it). */
  readonly leaseToken: string;
  /** When the lease ends unless renewed (the worker renews it on its own). */
  readonly leaseExpiresAt: Date | null;
  /** Gives the job back to run again at `when` (a Date, or ms from now) without counting a failure. Throws; never returns. */
  snooze(when: Date | number): never;
  /** Fails this attempt and retries at `when` (a Date, or ms from now) instead of after the queue's backoff. Throws; never returns. */
  retryAt(when: Date | number, message?: string): never;
}

/**
 * A job handler. Its return value becomes the job's result (an object is stored as is;
 * any other value except undefined as `{ value }`). A thrown error fails the attempt
 * (retried per the queue's backoff); NonRetryableError sends the job to the DLQ;
 * RetryAtError / SnoozeError (or ctx.retryAt / ctx.snooze) choose when it runs again.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type JobHandler<P = any> = (job: Job<P>, ctx: JobContext<P>) => unknown;

/** What the worker reported for a job, and what the server said. */
export interface JobOutcome {
  job: Job;
  /** 'lost': the lease was lost while the handler ran; nothing was reported. */
  outcome: 'completed' | 'failed' | 'snoozed' | 'lost';
  /** The server applied the report (false: the lease was lost meanwhile). */
  accepted: boolean;
  /** The server's reason when not accepted. */
  reason: string;
  /** The error reported with a failure. */
  error: string | null;
}

/** The session the server opened (the `ready` event). */
export interface WorkerSessionInfo {
  sessionId: string;
  leaseSeconds: number;
  heartbeatIntervalSeconds: number;
  /** True when this is a reconnect. */
  reconnect: boolean;
  /** Leases carried over from the previous stream. */
  held: number;
}

/** Events of an EvoraWorker. `error` is emitted only when someone listens to it. */
export interface WorkerEvents {
  ready: [WorkerSessionInfo];
  disconnected: [{ error: Error; retryInMs: number }];
  jobStarted: [Job];
  jobFinished: [JobOutcome];
  jobAborted: [{ job: Job; kind: AbortCause }];
  drain: [{ reason: string }];
  error: [Error];
}

/** A snapshot of the worker's state. */
export interface WorkerStats {
  workerId: string;
  /** A session is open (the welcome arrived and the stream is up). */
  connected: boolean;
  sessionId: string | null;
  /** Handlers executing (including ones whose lease was lost). */
  running: number;
  /** Reports sent or queued, not yet acknowledged. */
  awaitingAck: number;
  /** Leases held: running jobs and jobs awaiting their ack. */
  held: number;
  /** Streams opened after the first welcome. */
  reconnects: number;
  /** Taking no new jobs (stop() was called, or the server asked to drain this stream). */
  draining: boolean;
}

/** What stop() left behind. */
export interface StopResult {
  /** Jobs whose handler did not finish or whose report was not acknowledged; their leases expire and they are retried. */
  unfinished: string[];
}

type ReportOutcome = 'completed' | 'failed' | 'snoozed';

/** One leased job in this worker. */
interface Held {
  job: Job;
  token: string;
  /** Length of the lease (server clock on both ends, so no skew). */
  leaseMs: number;
  leaseExpiresAt: Date | null;
  /** Made when the handler first reads ctx.signal (most never do). */
  abort: AbortController | null;
  /** Why the job was aborted; set once, whether or not the signal exists yet. */
  aborted: JobAbortedError | null;
  lost: boolean;
  report: WorkRequest | null;
  /** Rough upper bound of the report's encoded size (to keep batches well under the message limit). */
  reportBytes: number;
  outcome: ReportOutcome | null;
  error: string | null;
  /** How many times the report was written (a resend after a reconnect may meet an already-applied write). */
  sends: number;
  /** Resends after the server asked to retry the write. */
  writeRetries: number;
}

const FATAL_BEFORE_WELCOME = new Set([
  grpc.status.INVALID_ARGUMENT,
  grpc.status.UNIMPLEMENTED,
  grpc.status.UNAUTHENTICATED,
  grpc.status.PERMISSION_DENIED,
]);
/** No message at all from the server for this long (heartbeats are always answered): the connection is dead. */
const STALE_MS = 30_000;
/** The welcome must arrive within this long after hello. */
const WELCOME_TIMEOUT_MS = 30_000;
const MIN_BEAT_MS = 100;
const MAX_WRITE_RETRIES = 5;
/** Largest `completes` / `fails` batch by reportBytes (servers take 4 MiB messages by default). */
const REPORT_BATCH_MAX_BYTES = 1024 * 1024;

export class EvoraWorker extends EventEmitter<WorkerEvents> {
  readonly workerId: string;
  readonly address: string;
  readonly queues: readonly string[];
  readonly slots: number;

  private readonly handlers = new Map<string, JobHandler>();
  private readonly channel: grpc.Channel;
  private readonly client: WorkerServiceClient;
  private readonly log: Required<WorkerLogger>;
  private readonly backoff: { initialDelayMs: number; maxDelayMs: number; jitter: number };

  /** Jobs whose handler runs and whose lease we hold, by job id. */
  private readonly running = new Map<string, Held>();
  /** Jobs whose report waits for its ack, by job id. */
  private readonly reporting = new Map<string, Held>();
  /** Handler executions in progress (a handler whose lease was lost stays here until it returns). */
  private readonly active = new Set<Held>();

  private stream: grpc.ClientDuplexStream<WorkRequest, WorkResponse> | null = null;
  /** Generation of the current stream; events of older streams are ignored. */
  private gen = 0;
  private welcome: ServerWelcome | null = null;
  private everWelcomed = false;
  private failures = 0;
  private reconnects = 0;
  private lastHeard = 0;
  private serverDraining = false;
  private stopping = false;
  private closing = false;
  private beatTimer: NodeJS.Timeout | null = null;
  /** The interval the heartbeat timer was set with. */
  private beatMs = 0;
  /** Reports waiting for the next flush (only when the server takes batches). */
  private outbox = new Set<Held>();
  private welcomeTimer: NodeJS.Timeout | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private startTimer: NodeJS.Timeout | null = null;
  private startPromise: Promise<void> | null = null;
  private startWaiter: { resolve: () => void; reject: (err: Error) => void } | null = null;
  private stopPromise: Promise<StopResult> | null = null;
  private readonly changeListeners = new Set<() => void>();
  private readonly retryTimers = new Set<NodeJS.Timeout>();

  constructor(opts: EvoraWorkerOptions) {
    super();
    if (!opts.queues || opts.queues.length === 0) throw new TypeError('EvoraWorker: queues must name at least one queue');
    const slots = opts.slots ?? 10;
    if (!Number.isInteger(slots) || slots < 1) throw new TypeError(`EvoraWorker: slots must be a positive integer, got ${slots}`);
    this.queues = [...opts.queues];
    this.slots = slots;
    this.workerId = opts.workerId ?? defaultWorkerId();
    this.address = resolveAddress(opts.address);
    this.backoff = {
      initialDelayMs: opts.reconnect?.initialDelayMs ?? 200,
      maxDelayMs: opts.reconnect?.maxDelayMs ?? 5_000,
      jitter: opts.reconnect?.jitter ?? 0.3,
    };
    const l = opts.logger ?? {};
    const noop = () => undefined;
    this.log = {
      debug: l.debug?.bind(l) ?? noop,
      info: l.info?.bind(l) ?? noop,
      warn: l.warn?.bind(l) ?? noop,
      error: l.error?.bind(l) ?? noop,
    };
    // The channel reconnects on its own schedule too; keep it no slower than ours.
    this.channel = channelCreate(opts, {
      'grpc.initial_reconnect_backoff_ms': this.backoff.initialDelayMs,
      'grpc.max_reconnect_backoff_ms': this.backoff.maxDelayMs,
    });
    this.client = new WorkerServiceClient(this.address, opts.credentials ?? grpc.credentials.createInsecure(), {
      channelOverride: this.channel,
    });
  }

  /** Registers the handler for a job type (replacing an earlier one). Returns the worker, for chaining. */
  handle<P = JsonObject>(type: string, handler: JobHandler<P>): this {
    this.handlers.set(type, handler as JobHandler);
    return this;
  }

  /**
   * Opens the Work stream. Resolves once the server's welcome arrived; until then it keeps
   * trying with backoff (the server may not be up yet). Rejects if the server refuses the
   * hello (e.g. INVALID_ARGUMENT for a bad queue name), if stop() is called first, or after
   * `timeoutMs` without a welcome (the worker then stops).
   */
  start(opts: { timeoutMs?: number } = {}): Promise<void> {
    if (this.startPromise) return this.startPromise;
    if (this.stopping) return Promise.reject(new Error('EvoraWorker: start() after stop()'));
    if (this.handlers.size === 0) return Promise.reject(new Error('EvoraWorker: register a handler with handle() before start()'));
    this.startPromise = new Promise<void>((resolve, reject) => {
      this.startWaiter = { resolve, reject };
    });
    if (opts.timeoutMs !== undefined) {
      this.startTimer = setTimeout(() => {
        this.startSettle(new Error(`EvoraWorker: no welcome from ${this.address} within ${opts.timeoutMs} ms`));
        void this.stop({ timeoutMs: 0 });
      }, opts.timeoutMs);
    }
    this.connect();
    return this.startPromise;
  }

  /**
   * Drains and stops: tells the server to send nothing new, waits up to `timeoutMs`
   * (default 30 000) for running handlers, then aborts the ones left (ctx.signal, kind
   * 'shutdown'; a handler that then throws gives its job back with a snooze) and waits up
   * to `graceMs` (default 5 000) for them and for the acks of every report, then closes
   * the stream and the connection. Safe to call twice.
   */
  stop(opts: { timeoutMs?: number; graceMs?: number } = {}): Promise<StopResult> {
    this.stopPromise ??= this.doStop(opts.timeoutMs ?? 30_000, opts.graceMs ?? 5_000);
    return this.stopPromise;
  }

  /** A snapshot of the worker's state. */
  stats(): WorkerStats {
    return {
      workerId: this.workerId,
      connected: this.welcome !== null,
      sessionId: this.welcome?.sessionId ?? null,
      running: this.active.size,
      awaitingAck: this.reporting.size,
      held: this.running.size + this.reporting.size,
      reconnects: this.reconnects,
      draining: this.stopping || this.serverDraining,
    };
  }

  // ----- the stream ---------------------------------------------------------------------

  private connect(): void {
    if (this.closing) return;
    this.reconnectTimer = null;
    const gen = ++this.gen;
    const stream = this.client.work();
    this.stream = stream;
    this.welcome = null;
    this.serverDraining = false;
    let lastError: Error | null = null;
    stream.on('data', (res: WorkResponse) => {
      // A message may be read after its stream's status; what it says about leases still holds.
      this.onMessage(res, gen !== this.gen);
    });
    stream.on('error', (err: Error) => {
      lastError = err;
    });
    stream.on('status', (s: grpc.StatusObject) => {
      if (gen !== this.gen) return;
      const error =
        s.code === grpc.status.OK
          ? new Error('the server closed the Work stream')
          : (EvoraApiError.from(lastError ?? Object.assign(new Error(s.details), { code: s.code, details: s.details }), 'Work') as Error);
      this.onStreamEnd(error);
    });
    const held = this.heldLeases();
    stream.write({
      msg: { $case: 'hello', value: { workerId: this.workerId, queues: [...this.queues], slots: this.slots, held, acceptsBatches: true } },
    });
    this.welcomeTimer = setTimeout(() => {
      if (gen !== this.gen || this.welcome) return;
      this.log.warn({ address: this.address }, 'no welcome from the server; reconnecting');
      stream.cancel();
    }, WELCOME_TIMEOUT_MS);
    this.log.debug({ address: this.address, held: held.length }, 'hello sent');
  }

  private onStreamEnd(error: Error): void {
    this.gen++;
    this.stream = null;
    // Their reports stay in `reporting` and are re-sent after the next welcome.
    this.outbox.clear();
    const wasOpen = this.welcome !== null;
    this.welcome = null;
    this.clearTimer('beatTimer');
    this.clearTimer('welcomeTimer');
    this.changed();
    if (this.closing) return;
    const code = error instanceof EvoraApiError ? error.code : undefined;
    if (!this.everWelcomed && code !== undefined && FATAL_BEFORE_WELCOME.has(code)) {
      // The server refuses this worker as configured: retrying cannot help.
      this.log.error({ err: error }, 'the server refused the worker');
      this.emitError(error);
      this.startSettle(error);
      void this.stop({ timeoutMs: 0, graceMs: 0 });
      return;
    }
    const retryInMs = this.nextDelay();
    if (wasOpen) this.log.warn({ err: error, retry_in_ms: retryInMs }, 'Work stream lost; reconnecting');
    else this.log.debug({ err: error, retry_in_ms: retryInMs }, 'cannot open the Work stream; retrying');
    this.fire('disconnected', { error, retryInMs });
    this.reconnectTimer = setTimeout(() => this.connect(), retryInMs);
  }

  private nextDelay(): number {
    const { initialDelayMs, maxDelayMs, jitter } = this.backoff;
    const delay = Math.min(maxDelayMs, initialDelayMs * 2 ** Math.min(this.failures++, 30));
    return Math.max(0, Math.round(delay * (1 + jitter * (2 * Math.random() - 1))));
  }

  /** Writes a message on the open session, after the reports waiting for the flush. */
  private send(req: WorkRequest): boolean {
    if (this.outbox.size > 0) this.flushReports();
    return this.write(req);
  }

  private write(req: WorkRequest): boolean {
    if (!this.stream || !this.welcome) return false;
    this.stream.write(req);
    return true;
  }

  private onMessage(res: WorkResponse, late = false): void {
    const m = res.msg;
    if (!m) return;
    if (late) {
      // From a stream that has ended: session messages are void, lease messages still apply.
      if (this.closing || m.$case === 'welcome' || m.$case === 'drain') return;
    } else {
      this.lastHeard = Date.now();
    }
    switch (m.$case) {
      case 'welcome':
        return this.onWelcome(m.value);
      case 'job':
        return this.onJob(m.value);
      case 'jobs':
        for (const leased of m.value.jobs) this.onJob(leased);
        return;
      case 'ack': {
        const h = this.reporting.get(m.value.jobId);
        if (h) this.onAck(h, m.value.accepted, m.value.reason);
        return;
      }
      case 'acks':
        for (const a of m.value.acks) {
          const h = this.reporting.get(a.jobId);
          if (h) this.onAck(h, a.accepted, a.reason);
        }
        return;
      case 'heartbeatAck':
        for (const l of m.value.leases) {
          const h = this.running.get(l.jobId) ?? this.reporting.get(l.jobId);
          if (!h || h.token !== l.leaseToken) continue;
          h.leaseExpiresAt = l.leaseExpiresAt ?? h.leaseExpiresAt;
          if (l.cancelRequested && this.running.get(l.jobId) === h) this.abortJob(h, 'cancelled', 'an operator cancelled the job');
        }
        return;
      case 'cancel': {
        const h = this.running.get(m.value.jobId);
        if (h) this.abortJob(h, 'cancelled', 'an operator cancelled the job');
        return;
      }
      case 'leaseLost': {
        const h = this.running.get(m.value.jobId);
        // A report in flight is answered by its ack; only a running job is affected.
        if (!h) return;
        h.lost = true;
        this.running.delete(h.job.id);
        this.log.warn({ job_id: h.job.id, reason: m.value.reason }, 'lease lost; the handler is aborted and its outcome will not be reported');
        this.abortJob(h, 'lease_lost', `the lease was lost: ${m.value.reason || 'expired'}`);
        this.changed();
        return;
      }
      case 'drain':
        this.serverDraining = true;
        this.log.info({ reason: m.value.reason }, 'the server asked this worker to drain');
        this.send({ msg: { $case: 'drain', value: {} } });
        this.fire('drain', { reason: m.value.reason });
        return;
    }
  }

  private onWelcome(w: ServerWelcome): void {
    this.clearTimer('welcomeTimer');
    const reconnect = this.everWelcomed;
    if (reconnect) this.reconnects++;
    this.everWelcomed = true;
    this.welcome = w;
    this.failures = 0;
    if (this.stopping) this.send({ msg: { $case: 'drain', value: {} } });
    const held = this.running.size + this.reporting.size;
    // Reports that were not acknowledged on the old stream (or were made while disconnected).
    for (const h of this.reporting.values()) this.writeReport(h);
    this.log.info({ session_id: w.sessionId, reconnect, held }, reconnect ? 'reconnected' : 'connected');
    // Renew (and learn the state of) the carried-over leases at once.
    this.beat();
    this.startSettle(null);
    this.fire('ready', {
      sessionId: w.sessionId,
      leaseSeconds: w.leaseSeconds,
      heartbeatIntervalSeconds: w.heartbeatIntervalSeconds,
      reconnect,
      held,
    });
  }

  // ----- heartbeats ---------------------------------------------------------------------

  private heldLeases(): Lease[] {
    const leases: Lease[] = [];
    for (const h of this.running.values()) leases.push({ jobId: h.job.id, leaseToken: h.token });
    for (const h of this.reporting.values()) {
      if (this.running.get(h.job.id)?.token !== h.token) leases.push({ jobId: h.job.id, leaseToken: h.token });
    }
    return leases;
  }

  /**
   * How often to renew: the server's interval, but never less often than a third of the
   * shortest lease held (a queue's lease may be shorter than the one the welcome assumed,
   * and the welcome's whole seconds cannot express less than 1 s).
   */
  private beatIntervalMs(): number {
    const w = this.welcome;
    let ms = w ? (w.heartbeatIntervalSeconds > 0 ? w.heartbeatIntervalSeconds * 1000 : (w.leaseSeconds * 1000) / 3) : 10_000;
    if (w && w.leaseSeconds > 0) ms = Math.min(ms, (w.leaseSeconds * 1000) / 3);
    // Once per beat (never per job): a push with a shorter lease is checked in onJob.
    for (const h of this.running.values()) ms = Math.min(ms, h.leaseMs / 3);
    for (const h of this.reporting.values()) ms = Math.min(ms, h.leaseMs / 3);
    return Math.max(MIN_BEAT_MS, Math.floor(ms));
  }

  private beat(): void {
    this.clearTimer('beatTimer');
    if (!this.stream || !this.welcome) return;
    const interval = this.beatIntervalMs();
    if (Date.now() - this.lastHeard > Math.max(STALE_MS, 3 * interval)) {
      this.log.warn({ silent_ms: Date.now() - this.lastHeard }, 'no word from the server; reconnecting');
      this.stream.cancel();
      return;
    }
    this.send({ msg: { $case: 'heartbeat', value: { leases: this.heldLeases() } } });
    this.beatMs = interval;
    this.beatTimer = setTimeout(() => this.beat(), interval);
  }

  // ----- jobs ---------------------------------------------------------------------------

  private onJob(leased: LeasedJob): void {
    if (!leased.job) return;
    const job = jobFromPb(leased.job);
    const expires = leased.leaseExpiresAt ?? null;
    const leaseMs =
      expires && job.startedAt ? Math.max(1000, expires.getTime() - job.startedAt.getTime()) : (this.welcome?.leaseSeconds ?? 30) * 1000;
    const h: Held = {
      job,
      token: leased.leaseToken,
      leaseMs,
      leaseExpiresAt: expires,
      abort: null,
      aborted: null,
      lost: false,
      report: null,
      reportBytes: 0,
      outcome: null,
      error: null,
      sends: 0,
      writeRetries: 0,
    };
    if (this.running.size + this.reporting.size >= this.slots) {
      this.log.warn({ job_id: job.id, slots: this.slots }, 'the server pushed more jobs than this worker has slots');
    }
    if (this.stopping) {
      // Pushed before the server saw our drain: give it back untouched.
      this.log.debug({ job_id: job.id }, 'giving back a job pushed while stopping');
      this.report(h, 'snoozed', null, { $case: 'snooze', value: { jobId: job.id, leaseToken: h.token, runAt: new Date() } });
      return;
    }
    this.running.set(job.id, h);
    this.active.add(h);
    // A shorter lease than the schedule assumed: renew now and on the faster schedule.
    if (this.beatTimer && Math.max(MIN_BEAT_MS, Math.floor(leaseMs / 3)) < this.beatMs) this.beat();
    this.changed();
    void this.run(h);
  }

  private async run(h: Held): Promise<void> {
    const handler = this.handlers.get(h.job.type);
    const jobId = h.job.id;
    let msg: WorkRequest['msg'];
    let outcome: ReportOutcome;
    let error: string | null = null;
    let resultLength = 0;
    if (!handler) {
      outcome = 'failed';
      error = `no handler for job type "${h.job.type}" on worker ${this.workerId} (it handles: ${[...this.handlers.keys()].join(', ')})`;
      this.log.error({ job_id: jobId, type: h.job.type }, error);
      msg = { $case: 'fail', value: { jobId, leaseToken: h.token, error, nonRetryable: true } };
    } else {
      this.fire('jobStarted', h.job);
      try {
        const result = resultOf(await handler(h.job, this.context(h)));
        outcome = 'completed';
        resultLength = result?.length ?? 0;
        msg = { $case: 'complete', value: { jobId, leaseToken: h.token, result: result?.json } };
      } catch (err) {
        ({ msg, outcome, error } = this.failureOf(h, err));
      }
    }
    this.active.delete(h);
    if (this.running.get(jobId) === h) this.running.delete(jobId);
    if (h.lost) {
      this.fire('jobFinished', { job: h.job, outcome: 'lost', accepted: false, reason: 'lease lost', error: null });
      this.changed();
      return;
    }
    // A protobuf Struct takes at most ~6 bytes per character of its JSON text (short numbers).
    h.reportBytes = 200 + 6 * resultLength + 3 * (error?.length ?? 0);
    this.report(h, outcome, error, msg);
  }

  private context(h: Held): JobContext {
    return {
      job: h.job,
      get signal() {
        return signalOf(h);
      },
      workerId: this.workerId,
      leaseToken: h.token,
      get leaseExpiresAt() {
        return h.leaseExpiresAt;
      },
      snooze: ctxSnooze,
      retryAt: ctxRetryAt,
    };
  }

  /** The report for a handler that threw. */
  private failureOf(h: Held, err: unknown): { msg: WorkRequest['msg']; outcome: ReportOutcome; error: string | null } {
    const jobId = h.job.id;
    const leaseToken = h.token;
    if (err instanceof SnoozeError) {
      return { outcome: 'snoozed', error: null, msg: { $case: 'snooze', value: { jobId, leaseToken, runAt: err.runAt } } };
    }
    const aborted = h.aborted?.kind ?? null;
    if (aborted === 'shutdown') {
      // Interrupted by our own stop: not the job's fault. Give it back to run elsewhere.
      return { outcome: 'snoozed', error: null, msg: { $case: 'snooze', value: { jobId, leaseToken, runAt: new Date() } } };
    }
    const error = errorText(err);
    if (err instanceof RetryAtError) {
      return { outcome: 'failed', error, msg: { $case: 'fail', value: { jobId, leaseToken, error, nonRetryable: false, retryAt: err.retryAt } } };
    }
    // A cancelled job becomes CANCELLED whatever we say; non_retryable keeps that true even if the flag were gone.
    const nonRetryable = err instanceof NonRetryableError || aborted === 'cancelled';
    if (!(err instanceof NonRetryableError) && !aborted) this.log.debug({ job_id: jobId, error }, 'handler failed; the job will be retried');
    return { outcome: 'failed', error, msg: { $case: 'fail', value: { jobId, leaseToken, error, nonRetryable } } };
  }

  private report(h: Held, outcome: ReportOutcome, error: string | null, msg: WorkRequest['msg']): void {
    h.report = { msg };
    h.outcome = outcome;
    h.error = error;
    this.reporting.set(h.job.id, h);
    this.writeReport(h);
    this.changed();
  }

  private writeReport(h: Held): void {
    if (!h.report) return;
    const kind = h.report.msg?.$case;
    if (this.welcome?.acceptsBatches && (kind === 'complete' || kind === 'fail')) {
      // Sent with the other reports of this tick (see flushReports).
      this.outbox.add(h);
      if (this.outbox.size === 1) setImmediate(() => this.flushReports());
      return;
    }
    if (this.send(h.report)) h.sends++;
  }

  /** Writes the reports of the outbox: completes and fails in batches, each batch kept small. */
  private flushReports(): void {
    if (this.outbox.size === 0) return;
    const held = [...this.outbox];
    this.outbox.clear();
    let completes: { h: Held; v: WorkerComplete }[] = [];
    let fails: { h: Held; v: WorkerFail }[] = [];
    let completeBytes = 0;
    let failBytes = 0;
    const flushCompletes = () => {
      if (completes.length === 1) this.writeCounted(completes, { msg: { $case: 'complete', value: completes[0]!.v } });
      else if (completes.length > 1) this.writeCounted(completes, { msg: { $case: 'completes', value: { completes: completes.map((c) => c.v) } } });
      completes = [];
      completeBytes = 0;
    };
    const flushFails = () => {
      if (fails.length === 1) this.writeCounted(fails, { msg: { $case: 'fail', value: fails[0]!.v } });
      else if (fails.length > 1) this.writeCounted(fails, { msg: { $case: 'fails', value: { fails: fails.map((f) => f.v) } } });
      fails = [];
      failBytes = 0;
    };
    for (const h of held) {
      // Acknowledged (or given up) meanwhile: nothing to send.
      if (this.reporting.get(h.job.id) !== h) continue;
      const m = h.report?.msg;
      if (m?.$case === 'complete') {
        if (completeBytes + h.reportBytes > REPORT_BATCH_MAX_BYTES) flushCompletes();
        completes.push({ h, v: m.value });
        completeBytes += h.reportBytes;
      } else if (m?.$case === 'fail') {
        if (failBytes + h.reportBytes > REPORT_BATCH_MAX_BYTES) flushFails();
        fails.push({ h, v: m.value });
        failBytes += h.reportBytes;
      }
    }
    flushCompletes();
    flushFails();
  }

  private writeCounted(items: { h: Held }[], req: WorkRequest): void {
    if (!this.write(req)) return;
    for (const { h } of items) h.sends++;
  }

  private onAck(h: Held, accepted: boolean, reason: string): void {
    if (!accepted && /retry/i.test(reason) && h.writeRetries < MAX_WRITE_RETRIES) {
      // The server could not write it (e.g. a database error) and asks us to try again.
      h.writeRetries++;
      this.log.warn({ job_id: h.job.id, reason }, 'the server could not apply a report; retrying');
      const timer = setTimeout(() => {
        this.retryTimers.delete(timer);
        if (this.reporting.get(h.job.id) === h) this.writeReport(h);
      }, 200 * 2 ** h.writeRetries);
      this.retryTimers.add(timer);
      return;
    }
    this.reporting.delete(h.job.id);
    if (!accepted) {
      // A resend after a reconnect may meet its own earlier, already applied write.
      const fields = { job_id: h.job.id, outcome: h.outcome, reason, resent: h.sends > 1 };
      if (h.sends > 1) this.log.info(fields, 'report not applied (it may have been applied before the reconnect)');
      else this.log.warn(fields, 'report not applied');
    }
    this.fire('jobFinished', { job: h.job, outcome: h.outcome ?? 'failed', accepted, reason, error: h.error });
    this.changed();
  }

  private abortJob(h: Held, kind: AbortCause, message: string): void {
    if (h.aborted) return;
    h.aborted = new JobAbortedError(kind, message);
    h.abort?.abort(h.aborted);
    this.fire('jobAborted', { job: h.job, kind });
  }

  // ----- stopping -----------------------------------------------------------------------

  private async doStop(timeoutMs: number, graceMs: number): Promise<StopResult> {
    this.stopping = true;
    this.startSettle(new Error('EvoraWorker: stopped before the server welcomed it'));
    this.send({ msg: { $case: 'drain', value: {} } });
    this.changed();
    await this.until(() => this.active.size === 0, timeoutMs);
    for (const h of this.active) this.abortJob(h, 'shutdown', 'the worker is stopping');
    await this.until(() => this.active.size === 0 && this.reporting.size === 0, graceMs);

    const unfinished = [...new Set([...[...this.active].map((h) => h.job.id), ...this.reporting.keys()])];
    if (unfinished.length > 0) {
      this.log.warn({ jobs: unfinished }, 'stopping with unfinished jobs; their leases will expire and they will be retried');
    }
    this.closing = true;
    this.clearTimer('reconnectTimer');
    this.clearTimer('beatTimer');
    this.clearTimer('welcomeTimer');
    this.clearTimer('startTimer');
    for (const t of this.retryTimers) clearTimeout(t);
    this.retryTimers.clear();
    const stream = this.stream;
    if (stream) {
      // Reports still waiting for their batch go out before the half-close.
      if (this.outbox.size > 0) this.flushReports();
      // Half-close and wait briefly for the server to end the call, then cut it.
      const ended = new Promise<void>((resolve) => stream.once('status', () => resolve()));
      stream.end();
      const timer = setTimeout(() => stream.cancel(), 2_000);
      await ended;
      clearTimeout(timer);
    }
    this.stream = null;
    this.welcome = null;
    this.gen++;
    this.channel.close();
    this.changed();
    this.log.info({ unfinished: unfinished.length }, 'worker stopped');
    return { unfinished };
  }

  /** Resolves true when check() holds (re-checked on every state change), false after ms. */
  private until(check: () => boolean, ms: number): Promise<boolean> {
    if (check()) return Promise.resolve(true);
    if (ms <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const listener = () => {
        if (!check()) return;
        clearTimeout(timer);
        this.changeListeners.delete(listener);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.changeListeners.delete(listener);
        resolve(false);
      }, ms);
      this.changeListeners.add(listener);
    });
  }

  private changed(): void {
    if (this.changeListeners.size === 0) return;
    for (const l of [...this.changeListeners]) l();
  }

  private startSettle(err: Error | null): void {
    const w = this.startWaiter;
    if (!w) return;
    this.startWaiter = null;
    this.clearTimer('startTimer');
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

  private clearTimer(name: 'beatTimer' | 'welcomeTimer' | 'reconnectTimer' | 'startTimer'): void {
    const t = this[name];
    if (t) clearTimeout(t);
    this[name] = null;
  }
}

function defaultWorkerId(): string {
  const host = hostname().replace(/[^A-Za-z0-9_.:/-]/g, '-').replace(/^[^A-Za-z0-9]+/, '') || 'worker';
  return `${host}:${process.pid}:${randomBytes(3).toString('hex')}`;
}

/** ctx.signal: made on first use, already aborted if the job was (with the same reason). */
function signalOf(h: Held): AbortSignal {
  if (!h.abort) {
    h.abort = new AbortController();
    if (h.aborted) h.abort.abort(h.aborted);
  }
  return h.abort.signal;
}

function ctxSnooze(when: Date | number): never {
  throw new SnoozeError(dateOf(when));
}

function ctxRetryAt(when: Date | number, message?: string): never {
  throw new RetryAtError(dateOf(when), message);
}

function dateOf(when: Date | number): Date {
  return when instanceof Date ? when : new Date(Date.now() + when);
}

function errorText(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  if (typeof err === 'string') return err;
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}

/**
 * A handler's return value as the job's result, with the length of its JSON text; a value
 * JSON cannot carry is a bug retrying will not fix.
 */
function resultOf(value: unknown): { json: JsonObject; length: number } | undefined {
  if (value === undefined || value === null) return undefined;
  const isObject = typeof value === 'object' && !Array.isArray(value) && !(value instanceof Date);
  try {
    return toJsonObjectSized(isObject ? value : { value }, 'the handler result');
  } catch (err) {
    throw new NonRetryableError((err as Error).message, { cause: err });
  }
}

// Over 400 lines on purpose: the Work stream's states and the handlers whose meaning depends
// on them are one machine, read best in one place.
import { status, type ServerDuplexStream, type ServiceError } from '@grpc/grpc-js';
import { checkTransition, type Transitions } from '../domain/state-machine.js';
import type { CompleteWrite, Dispatcher, SessionMessage, WorkerSession, WriteListener } from '../dispatcher/dispatcher.js';
import type { AckResult, LeaseLostReason } from '../domain/codes.js';
import { EvoraError, isUnavailable } from '../domain/errors.js';
import { isUuid } from '../domain/ids.js';
import type { LeaseRef, ProgressReport } from '../domain/job.js';
import { UndecodableRequest } from './request-decode.js';
import { MAX_SLOTS, checkCompleteResult, checkHeldCount, checkDate, checkIntRange, checkJobTypes, checkName, checkProgressReport, checkUuid, checkWorkerQueues, errorText } from '../domain/validate.js';
import type {
  Lease,
  WorkerComplete,
  WorkerFail,
  WorkerHeartbeat,
  WorkerHello,
  WorkerProgress,
  WorkerSnooze,
  WorkRequest,
  WorkResponse,
} from '../gen/evora/v1/worker.js';
import type { Authenticator } from '../auth/authenticator.js';
import { authorize, type Principal } from '../domain/auth.js';
import type { Logger } from '../logger.js';
import { AckQueue } from './ack-queue.js';
import { LeaseRenewal } from './lease-renewal.js';
import { LEASE_LOST_REASON_TO_PB, progressInput } from './convert.js';
import { onCallGone, type OpenStreams, type ServerStreamHandle } from './open-streams.js';
import { toServiceError } from './status.js';
import { StreamWriter, type WritableCall } from './stream-writer.js';
import { encodedWorkResponse, leasedJobsMessages, sessionMessageToPb, type EncodedWorkResponse, type WorkOut } from './work-messages.js';

/**
 * One worker's Work stream: the protocol of worker.proto on top of a dispatcher session.
 * The writer, the acks and the encoding of jobs live in stream-writer.ts, ack-queue.ts and
 * work-messages.ts.
 *
 * States (checked: an illegal transition is a bug, logged and answered INTERNAL):
 *   awaitingHello → opening   a valid hello arrived; the session is being opened
 *   opening → open            the session exists; welcome written
 *   open → draining           the worker (drain) or the server (shutdown) asked for no new jobs
 *   any → closed              the stream ended, failed or was refused; the session is closed
 *
 * What must stay true:
 * - messages that arrive while opening are kept, in order, and processed right after the
 *   welcome (a worker may send reports and a drain right behind its hello); dispatcher
 *   messages that come before the welcome follow it;
 * - every complete, fail or snooze gets exactly one ack with a result code; a malformed one
 *   (id or token not a UUID, result too big) gets ACK_RESULT_INVALID and never reaches the
 *   dispatcher; one whose write failed unexpectedly gets ACK_RESULT_RETRY_LATER;
 * - every message goes out through one StreamWriter, in order. Once more than
 *   WRITER_HIGH_WATER_BYTES wait in it (the worker does not read fast enough), it is
 *   blocked: the session takes no new jobs and the stream reads no more requests until all
 *   of it has gone, so what waits here stays bounded (that much, plus the jobs of the
 *   session's slots and the acks of the requests already read); nothing is dropped until
 *   the stream closes (its AbortSignal then discards what is left);
 * - ending (shutdown, or the worker half-closing) writes the acks of the reports already
 *   received before the stream ends;
 * - the caller was authenticated before the stream started (worker-service.ts); its hello
 *   may name only queues of its token's scope (else PERMISSION_DENIED), and the stream ends
 *   UNAUTHENTICATED as soon as the token cache says the token was revoked or expired.
 */

/** Where a Work stream is in its life; see the module comment. */
export type WorkStreamState = 'awaitingHello' | 'opening' | 'open' | 'draining' | 'closed';

const TRANSITIONS: Transitions<WorkStreamState> = {
  awaitingHello: ['opening', 'closed'],
  opening: ['open', 'closed'],
  open: ['draining', 'closed'],
  draining: ['closed'],
  closed: [],
};

/** Messages kept while opening before the stream stops reading until the session is open. */
const EARLY_MAX = 1000;

/**
 * Bytes that may wait in the stream's writer (behind grpc-js's buffer of 16 messages) before
 * the session takes no new jobs and the stream reads no requests. Well above a claim's worth
 * of single-job messages, so a worker that reads is not stopped by every claim; the bound of
 * what a worker that does not read makes the server keep.
 */
export const WRITER_HIGH_WATER_BYTES = 1024 * 1024;

/**
 * How long after its push a job the worker has not named yet counts as on its way to it, its
 * lease renewed by the server while the worker goes on sending (LeaseRenewal,
 * WorkerSession.inTransit). Long enough for
 * a slow link (at 10 Mbit/s, 150 MB), short enough that a worker that lost a job without
 * a word keeps it at most this long (plus a lease) before it is retried.
 */
export const IN_TRANSIT_RENEW_MS = 120_000;

/** Marks, among the messages kept while opening, where the worker half-closed the stream. */
const HALF_CLOSE = Symbol('half-close');

/** A lease named in a heartbeat or in hello.held that is not well-formed (reason text for logs). */
const MALFORMED_LEASE_TEXT = 'the lease is malformed (job_id and lease_token must be UUIDs), so it cannot be current';

/** What a Work stream needs from the server. */
export interface WorkStreamDeps {
  dispatcher: Dispatcher;
  logger: Logger;
  maxPayloadBytes: number;
  /** The largest message the server receives: the welcome tells the worker (a larger one would end the stream). */
  maxMessageBytes: number;
  /**
   * How long the stream may stay without its hello: then it ends INVALID_ARGUMENT. A stream
   * opened and never greeted would otherwise hold its memory for as long as its connection
   * lives (a client bug could open thousands).
   */
  helloTimeoutMs: number;
  /** The lease length to announce in the welcome for these queues. */
  leaseSecondsFor(queues: string[]): Promise<number>;
  /** Open streams, so shutdown can end them after the drain. */
  streams: Pick<OpenStreams, 'add' | 'delete'>;
  /** Tells the stream when its caller stops being accepted (a token revoked or expired, auth turned on). */
  auth: Pick<Authenticator, 'onPrincipalInvalidated'>;
}

/** The Work stream of one worker; see the module comment for its states and rules. */
export class WorkStream implements ServerStreamHandle {
  private current: WorkStreamState = 'awaitingHello';
  /** Ends a stream still awaiting its hello (WorkStreamDeps.helloTimeoutMs); cleared by the hello or the end. */
  private readonly helloTimer: NodeJS.Timeout;
  private session: WorkerSession | null = null;
  private log: Logger;
  /** The worker said hello.accepts_batches: jobs and acks may go in batch messages. */
  private batches = false;
  /** The worker said hello.payloads_as_json: pushed payloads go as JSON text (LeasedJob.payload_json). */
  private payloadsAsJson = false;
  /** Requests received while opening, in order (and where the worker half-closed). */
  private readonly early: (WorkRequest | typeof HALF_CLOSE)[] = [];
  /** Dispatcher messages that came before the welcome was written. */
  private readonly beforeWelcome: SessionMessage[] = [];
  private readonly acks: AckQueue;
  /** Reports and heartbeats not answered yet; ending waits until none is left. */
  private pending = 0;
  /** Told once `pending` is back to 0 (ending waits so). */
  private whenAnswered: (() => void)[] = [];
  /**
   * Hears the answers of this stream's reports: one listener for all of them, so a report
   * costs no closure or promise of its own.
   */
  private readonly answers: WriteListener = {
    written: (request, ack) => this.answered(request.write, ack.result, ack.reason),
    failed: (request, err) => {
      // An outage is logged once by the store.
      const outage = isUnavailable(err);
      this.log[outage ? 'debug' : 'error']({ err, job_id: request.write.id }, 'worker write failed; the worker is asked to send it again');
      this.answered(request.write, 'retry_later', 'the server could not apply the report now; retry the write', outage);
    },
  };
  private readonly closing = new AbortController();
  /** Stops listening for the token's invalidation. */
  private unsubscribe: (() => void) | null = null;
  private readonly writer: StreamWriter<EncodedWorkResponse>;
  /** Renews the leases the worker cannot renew itself: jobs on their way to it, and all while the writer is blocked. */
  private readonly renewal: LeaseRenewal;
  /** When the stream last read a message of the worker (performance.now()). */
  private heardAt = performance.now();

  /**
   * Serves a Work stream until it ends, for an authenticated caller whose role may work
   * (src/grpc/worker-service.ts checked it): hello.queues must be in its scope, and the
   * stream ends UNAUTHENTICATED when its token is revoked or expires.
   */
  static start(call: ServerDuplexStream<WorkRequest, WorkResponse>, deps: WorkStreamDeps, principal: Principal): WorkStream {
    return new WorkStream(call, deps, principal);
  }

  private constructor(
    private readonly call: ServerDuplexStream<WorkRequest, WorkResponse>,
    private readonly deps: WorkStreamDeps,
    private readonly principal: Principal,
  ) {
    this.log = deps.logger;
    this.unsubscribe = deps.auth.onPrincipalInvalidated(principal, (reason) =>
      this.guard(() => {
        if (this.current === 'closed') return;
        this.log.warn({ token_id: principal.tokenId, token_name: principal.tokenId ? principal.name : null, reason }, `Work stream ended: ${reason}`);
        this.endWithStatus({ code: status.UNAUTHENTICATED, details: reason });
        this.gone();
      }),
    );
    // Messages are encoded before they are written, so the writer knows what waits in bytes;
    // the Work method's serializer (workerServiceDefinition) passes encoded messages through.
    this.writer = new StreamWriter(call as unknown as WritableCall<EncodedWorkResponse>, {
      signal: this.closing.signal,
      onBlocked: (blocked) => this.guard(() => this.backpressure(blocked)),
      sizeOf: (out) => out.bytes.length,
      highWaterMark: WRITER_HIGH_WATER_BYTES,
    });
    this.renewal = new LeaseRenewal(
      {
        progress: () => this.writer.handedOver,
        blocked: () => this.writer.blocked,
        heardAt: () => this.heardAt,
        inTransit: () => this.session?.inTransit(performance.now(), IN_TRANSIT_RENEW_MS) ?? [],
        awaitsNaming: () => this.session?.awaitsNaming(performance.now(), IN_TRANSIT_RENEW_MS) ?? false,
        held: () => {
          const leases: LeaseRef[] = [];
          let shortestMs = Number.POSITIVE_INFINITY;
          for (const [id, lease] of this.session?.held ?? []) {
            leases.push({ id, token: lease.token });
            shortestMs = Math.min(shortestMs, lease.lengthMs);
          }
          return { leases, shortestMs };
        },
        renew: (leases) => (this.session ? this.deps.dispatcher.sessionRenew(this.session, leases) : Promise.resolve()),
      },
      (err) => this.log[isUnavailable(err) ? 'debug' : 'error']({ err }, 'renewal of leases on the worker\'s behalf failed'),
    );
    this.acks = new AckQueue(
      (out) => this.writer.write(encodedWorkResponse(out)),
      () => this.batches,
      (flush) => this.guard(flush),
    );
    deps.streams.add(this);
    this.helloTimer = setTimeout(
      () =>
        this.guard(() => {
          if (this.current === 'awaitingHello') this.refuse(`no hello within ${deps.helloTimeoutMs} ms of opening the Work stream: hello must be its first message`);
        }),
      deps.helloTimeoutMs,
    );
    call.on('data', (req: WorkRequest | UndecodableRequest) => {
      this.heardAt = performance.now();
      this.guard(() => (req instanceof UndecodableRequest ? this.refuse(`a message could not be decoded: ${req.reason}`) : this.receive(req)));
    });
    call.on('end', () => this.guard(() => (this.current === 'opening' ? this.early.push(HALF_CLOSE) : this.end())));
    onCallGone(call, () => this.guard(() => this.gone()));
  }

  get state(): WorkStreamState {
    return this.current;
  }

  /** Ends the stream: no new jobs; the acks of reports received are written first. */
  end(): void {
    this.close();
    this.afterAnswers(() =>
      this.guard(() => {
        this.acks.flush();
        this.writer.end();
      }),
    );
  }

  // ----- requests --------------------------------------------------------------------

  private receive(req: WorkRequest): void {
    switch (this.current) {
      case 'awaitingHello':
        return this.hello(req);
      case 'opening':
        this.early.push(req);
        return this.inputFlow();
      case 'open':
      case 'draining':
        return this.handle(this.session as WorkerSession, req);
      case 'closed':
        return;
    }
  }

  private hello(req: WorkRequest): void {
    clearTimeout(this.helloTimer);
    const m = req.msg;
    if (!m) return this.refuse('empty WorkRequest');
    if (m.$case !== 'hello') return this.refuse('the first message on a Work stream must be hello');
    const hello = m.value;
    try {
      checkName('hello.worker_id', hello.workerId);
      checkWorkerQueues('hello.queues', hello.queues);
      checkIntRange('hello.slots', hello.slots, 1, MAX_SLOTS);
      checkJobTypes('hello.job_types', hello.jobTypes);
      checkHeldCount('hello.held', hello.held.length);
    } catch (err) {
      return this.refuse((err as Error).message);
    }
    try {
      authorize(this.principal, 'work', 'Work', hello.queues);
    } catch (err) {
      this.log.warn(
        { method: 'Work', token_id: this.principal.tokenId, token_name: this.principal.name, reason: (err as Error).message, peer: this.call.getPeer() },
        'call refused: permission denied',
      );
      this.endWithStatus(toServiceError(err, this.log, { method: 'Work' }));
      this.gone();
      return;
    }
    this.to('opening');
    this.batches = hello.acceptsBatches === true;
    this.payloadsAsJson = hello.payloadsAsJson === true;
    this.open(hello).catch((err: unknown) => this.bug(err));
  }

  private async open(hello: WorkerHello): Promise<void> {
    const { dispatcher } = this.deps;
    const held = hello.held.filter(leaseWellFormed);
    let session: WorkerSession;
    let leaseSeconds: number;
    try {
      leaseSeconds = await this.deps.leaseSecondsFor(hello.queues);
      session = await dispatcher.sessionOpen({
        workerId: hello.workerId,
        queues: hello.queues,
        slots: hello.slots,
        types: checkJobTypes('hello.job_types', hello.jobTypes),
        held: held.map((l) => ({ id: l.jobId, token: l.leaseToken })),
        send: (msg) => this.fromDispatcher(msg),
      });
    } catch (err) {
      if (this.current === 'opening') this.endWithStatus(toServiceError(err, this.deps.logger, { method: 'Work' }));
      return;
    }
    if (this.current !== 'opening') {
      dispatcher.sessionClose(session); // the stream ended while the session was opening
      return;
    }
    this.session = session;
    this.log = this.deps.logger.child({ worker_id: hello.workerId, session_id: session.id });
    this.log.info({ queues: hello.queues, slots: hello.slots, job_types: hello.jobTypes }, 'worker session opened');
    this.to('open');
    this.send({
      msg: {
        $case: 'welcome',
        value: {
          sessionId: session.id,
          leaseSeconds,
          heartbeatIntervalSeconds: Math.max(1, Math.floor(leaseSeconds / 3)),
          heartbeatIntervalMs: Math.floor((leaseSeconds * 1000) / 3),
          acceptsBatches: true,
          payloadsAsJson: this.payloadsAsJson,
          maxResultBytes: this.deps.maxPayloadBytes,
          maxMessageBytes: this.deps.maxMessageBytes,
        },
      },
    });
    for (const l of hello.held) if (!leaseWellFormed(l)) this.leaseLostMalformed(l, 'not_held_on_reconnect');
    for (const l of session.lostOnOpen) this.send(sessionMessageToPb({ kind: 'leaseLost', jobId: l.id, token: l.token, reason: 'not_held_on_reconnect' }));
    for (const msg of this.beforeWelcome.splice(0)) this.fromDispatcher(msg);
    const early = this.early.splice(0);
    this.inputFlow();
    for (const req of early) {
      if (req === HALF_CLOSE) this.end();
      else this.receive(req);
    }
  }

  private handle(s: WorkerSession, req: WorkRequest): void {
    const m = req.msg;
    if (!m) return this.refuse('empty WorkRequest');
    switch (m.$case) {
      case 'hello':
        return this.refuse('hello may be sent only once');
      case 'heartbeat':
        return this.heartbeat(s, m.value);
      case 'complete':
        return this.complete(s, m.value);
      case 'completes':
        // Each report on its own, as if sent alone; the dispatcher's batcher writes the
        // ones of this tick in one statement.
        for (const v of m.value.completes) this.complete(s, v);
        return;
      case 'fail':
        return this.fail(s, m.value);
      case 'fails':
        for (const v of m.value.fails) this.fail(s, v);
        return;
      case 'snooze':
        return this.snooze(s, m.value);
      case 'progress':
        return this.progress(s, m.value);
      case 'drain':
        if (this.current !== 'open') return; // already draining
        this.to('draining');
        this.log.info('worker draining');
        this.deps.dispatcher.sessionDrain(s);
        return;
    }
  }

  private complete(s: WorkerSession, v: WorkerComplete): void {
    let write: CompleteWrite;
    try {
      leaseCheck(v);
      write = { id: v.jobId, token: v.leaseToken, ...checkCompleteResult(v.result, v.resultJson, this.deps.maxPayloadBytes) };
    } catch (err) {
      return this.ackInvalid(v, err);
    }
    this.pending++;
    this.deps.dispatcher.report({ kind: 'complete', write, session: s, listener: this.answers });
  }

  private fail(s: WorkerSession, v: WorkerFail): void {
    try {
      leaseCheck(v);
      checkDate('retry_at', v.retryAt);
    } catch (err) {
      return this.ackInvalid(v, err);
    }
    const write = { id: v.jobId, token: v.leaseToken, error: errorText(v.error), retryable: !v.nonRetryable, retryAt: v.retryAt ?? null };
    this.pending++;
    this.deps.dispatcher.report({ kind: 'fail', write, session: s, listener: this.answers });
  }

  private snooze(s: WorkerSession, v: WorkerSnooze): void {
    try {
      leaseCheck(v);
      checkDate('run_at', v.runAt);
    } catch (err) {
      return this.ackInvalid(v, err);
    }
    // run_at unset means now: the job is claimable again at once.
    this.pending++;
    const write = { id: v.jobId, token: v.leaseToken, runAt: v.runAt ?? null };
    this.deps.dispatcher.report({ kind: 'snooze', write, session: s, listener: this.answers });
  }

  /**
   * A progress report: not acked. Coalesced by the dispatcher, which tells a report whose
   * lease is not current lease_lost; a malformed one is dropped and logged (there is no ack
   * to carry INVALID, and the job runs on).
   */
  private progress(s: WorkerSession, v: WorkerProgress): void {
    let report: ProgressReport;
    try {
      report = checkProgressReport(progressInput(v), this.deps.maxPayloadBytes, new Date());
    } catch (err) {
      if (!(err instanceof EvoraError)) throw err;
      this.log.warn({ job_id: v.jobId.slice(0, 64), reason: err.message }, 'worker sent a malformed progress report; dropped');
      return;
    }
    this.deps.dispatcher
      .progress(s, report)
      .catch((err: unknown) => this.log[isUnavailable(err) ? 'debug' : 'error']({ err, job_id: report.id }, 'progress report not written'));
  }

  /**
   * Extends the well-formed leases (the dispatcher answers lost ones with lease_lost). A
   * malformed lease cannot be current: it is answered lease_lost (code EXPIRED) at once and
   * left out of the heartbeat_ack, like any other lease that is not current.
   */
  private heartbeat(s: WorkerSession, v: WorkerHeartbeat): void {
    const leases = v.leases.filter(leaseWellFormed);
    for (const l of v.leases) if (!leaseWellFormed(l)) this.leaseLostMalformed(l, 'expired');
    const answered = this.deps.dispatcher
      .heartbeat(
        s,
        leases.map((l) => ({ id: l.jobId, token: l.leaseToken })),
      )
      .then(
        (r) => {
          // Each extended lease with its own token: a worker may have named a stale lease of
          // the same job too, and that one is told lost.
          const extended = r.extended.map((e) => ({
            jobId: e.id,
            leaseToken: e.token,
            leaseExpiresAt: e.lockedUntil,
            cancelRequested: e.cancelRequested,
          }));
          this.send({ msg: { $case: 'heartbeatAck', value: { leases: extended } } });
        },
        (err: unknown) => this.log[isUnavailable(err) ? 'debug' : 'error']({ err }, 'heartbeat failed'),
      );
    this.track(answered);
  }

  /** A malformed lease (in hello.held or a heartbeat) is told lost with the code of where it was named. */
  private leaseLostMalformed(l: Lease, code: LeaseLostReason): void {
    this.log.warn({ job_id: l.jobId.slice(0, 64) }, 'worker named a malformed lease; told lease_lost');
    this.send({ msg: { $case: 'leaseLost', value: { jobId: l.jobId, leaseToken: l.leaseToken, reason: MALFORMED_LEASE_TEXT, code: LEASE_LOST_REASON_TO_PB[code] } } });
  }

  // ----- acks ------------------------------------------------------------------------

  /** A report's write committed (or failed): its ack, in the order the answers came. */
  private answered(lease: LeaseRef, result: AckResult, reason: string, databaseUnavailable = false): void {
    try {
      this.acks.add(lease.id, lease.token, result, reason, databaseUnavailable);
    } catch (err) {
      this.bug(err);
    }
    this.settled();
  }

  /** A report that is malformed: refused before it reaches the dispatcher. */
  private ackInvalid(report: Report, err: unknown): void {
    if (!(err instanceof EvoraError)) throw err;
    this.acks.add(report.jobId, report.leaseToken, 'invalid', err.message);
  }

  /** Counts a heartbeat as not answered until it settles (a failure in answering it is a bug). */
  private track(p: Promise<void>): void {
    this.pending++;
    void p.then(
      () => this.settled(),
      (err: unknown) => {
        this.bug(err);
        this.settled();
      },
    );
  }

  /** One report or heartbeat is answered. */
  private settled(): void {
    if (--this.pending > 0 || this.whenAnswered.length === 0) return;
    for (const fn of this.whenAnswered.splice(0)) fn();
  }

  /** Runs `fn` once every report and heartbeat received so far is answered (never synchronously). */
  private afterAnswers(fn: () => void): void {
    if (this.pending === 0) queueMicrotask(fn);
    else this.whenAnswered.push(fn);
  }

  // ----- to the worker ---------------------------------------------------------------

  /** What the dispatcher sends this session. Throws when jobs cannot be sent (it then releases them). */
  private fromDispatcher(msg: SessionMessage): void {
    if (this.current === 'opening') {
      this.beforeWelcome.push(msg);
      return;
    }
    const state = this.writer.state;
    const writable = state === 'flowing' || state === 'queueing' || state === 'blocked';
    if (msg.kind === 'jobs') {
      if (!writable) throw new Error('the Work stream has ended');
      for (const out of leasedJobsMessages(msg.jobs, { batches: this.batches, payloadsAsJson: this.payloadsAsJson })) this.send(out);
      this.renewal.wake();
      return;
    }
    if (!writable) return; // a lease_lost or cancel for a stream that is ending or gone
    if (msg.kind === 'drain' && this.current === 'open') this.to('draining');
    this.send(sessionMessageToPb(msg));
  }

  /** Writes a message after the acks already queued, so the worker sees them in order. */
  private send(out: WorkOut): void {
    this.acks.flush();
    this.writer.write(encodedWorkResponse(out));
  }

  /** The writer blocked or flows again: take no new jobs and read no requests meanwhile. */
  private backpressure(blocked: boolean): void {
    const s = this.session;
    if (s && blocked) this.deps.dispatcher.sessionPause(s);
    else if (s) this.deps.dispatcher.sessionResume(s);
    // The worker's heartbeats are not read meanwhile: the server renews its leases for it,
    // for as long as it goes on reading (a slow link, not a worker that stopped).
    if (blocked) this.renewal.wake();
    this.inputFlow();
  }

  private inputFlow(): void {
    const pause = this.writer.blocked || (this.current === 'opening' && this.early.length >= EARLY_MAX);
    if (pause === this.call.isPaused()) return;
    if (pause) this.call.pause();
    else this.call.resume();
  }

  // ----- the end ---------------------------------------------------------------------

  /** Closes the session (its leases run on, so a reconnecting worker can finish its jobs). */
  private close(): void {
    if (this.current === 'closed') return;
    this.to('closed');
    clearTimeout(this.helloTimer);
    this.renewal.stop();
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.deps.streams.delete(this);
    this.early.length = 0;
    this.beforeWelcome.length = 0;
    const s = this.session;
    if (s) {
      this.log.info({ held: s.held.size }, 'worker session closed');
      this.deps.dispatcher.sessionClose(s);
    }
  }

  /** The stream is over (error, cancel or close): whatever waits to be written is dropped. */
  private gone(): void {
    this.closing.abort();
    this.close();
  }

  private refuse(message: string): void {
    this.endWithStatus({ code: status.INVALID_ARGUMENT, details: message });
  }

  /** Ends the stream with a status (grpc-js sends it after what is already written). */
  private endWithStatus(err: Partial<ServiceError>): void {
    this.call.emit('error', err);
  }

  /** A bug in this class: logged with its detail; the stream ends with INTERNAL. */
  private bug(err: unknown): void {
    const answer = toServiceError(err, this.log, { method: 'Work', state: this.current });
    if (this.current !== 'closed') this.endWithStatus(answer);
  }

  private guard(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.bug(err);
    }
  }

  private to(next: WorkStreamState): void {
    this.current = checkTransition('Work stream', TRANSITIONS, this.current, next);
  }
}

/** A worker's report as its ack names it: the job and the lease token the report carried. */
type Report = { jobId: string; leaseToken: string };

function leaseWellFormed(l: Lease): boolean {
  return isUuid(l.jobId) && isUuid(l.leaseToken);
}

/** INVALID_ARGUMENT unless the report names its job and lease by UUIDs. */
function leaseCheck(v: { jobId: string; leaseToken: string }): void {
  checkUuid('job_id', v.jobId);
  checkUuid('lease_token', v.leaseToken);
}

import { status, type ServerDuplexStream, type ServiceError } from '@grpc/grpc-js';
import type { Authenticator } from '../auth/authenticator.js';
import type { Principal } from '../domain/auth.js';
import { invalidArgument } from '../domain/errors.js';
import { checkTransition, type Transitions } from '../domain/state-machine.js';
import type { SubmitJobRequest, SubmitJobResponse, SubmitJobStreamRequest, SubmitJobStreamResponse } from '../gen/evora/v1/job.js';
import type { Logger } from '../logger.js';
import { onCallGone, type OpenStreams, type ServerStreamHandle } from './open-streams.js';
import { UndecodableRequest } from './request-decode.js';
import { toServiceError } from './status.js';
import { StreamWriter } from './stream-writer.js';

/**
 * One producer's SubmitJobStream (job.proto): SubmitJob, request by request, on a stream
 * that stays open, so a submit costs no call of its own.
 *
 * States (checked):
 *   open → ending    the producer half-closed, the server shuts down, or the token stopped
 *                    working: no more requests are read; those read are answered
 *   ending → closed  every request read was answered; the stream ended with its status
 *   any → closed     the stream broke or was cancelled (answers not written are dropped)
 *
 * What must stay true:
 * - every request read gets exactly one response with its request_id: the submit's result,
 *   or its status (toServiceError: domain errors keep code and message, anything else is
 *   logged and answered INTERNAL); a failed submit never ends the stream;
 * - at most MAX_SUBMITS_IN_FLIGHT submits run at once, and the stream reads no request
 *   while that many run or while answers wait in the writer past the same bound (the
 *   producer does not read them), so what one stream makes the server hold is bounded;
 * - an end with OK (half-close, shutdown) comes only after every request read was
 *   answered, so a request without a response was never read and not applied; the end
 *   for a revoked or expired token (UNAUTHENTICATED) also waits for the submits running;
 * - the caller was authenticated with permission job.submit when the stream opened
 *   (job-service.ts); each request's queue is checked against its scope by `submit`.
 */

/** Where a submit stream is in its life; see the module comment. */
export type SubmitStreamState = 'open' | 'ending' | 'closed';

const TRANSITIONS: Transitions<SubmitStreamState> = {
  open: ['ending', 'closed'],
  ending: ['closed'],
  closed: [],
};

/** Submits one stream runs at once (also the bound of answers waiting to be written). */
export const MAX_SUBMITS_IN_FLIGHT = 128;

/** What a submit stream needs from the server. */
export interface SubmitStreamDeps {
  /** SubmitJob for this caller: checks, scope, the dispatcher's submit; throws its status. */
  submit(req: SubmitJobRequest, principal: Principal): Promise<SubmitJobResponse>;
  logger: Logger;
  /** Open streams, so shutdown can end them. */
  streams: Pick<OpenStreams, 'add' | 'delete'>;
  /** Tells the stream when its caller stops being accepted (a token revoked or expired, auth turned on). */
  auth: Pick<Authenticator, 'onPrincipalInvalidated'>;
}

/** A SubmitJobStream; see the module comment for its states and rules. */
export class SubmitStream implements ServerStreamHandle {
  private current: SubmitStreamState = 'open';
  private inFlight = 0;
  /** The status the stream ends with once ending; null = OK. */
  private endStatus: Partial<ServiceError> | null = null;
  private readonly closing = new AbortController();
  private readonly writer: StreamWriter<SubmitJobStreamResponse>;
  private unsubscribe: (() => void) | null = null;

  /** Serves a SubmitJobStream of an authenticated caller with permission job.submit until it ends. */
  static start(call: ServerDuplexStream<SubmitJobStreamRequest, SubmitJobStreamResponse>, deps: SubmitStreamDeps, principal: Principal): SubmitStream {
    return new SubmitStream(call, deps, principal);
  }

  private constructor(
    private readonly call: ServerDuplexStream<SubmitJobStreamRequest, SubmitJobStreamResponse>,
    private readonly deps: SubmitStreamDeps,
    private readonly principal: Principal,
  ) {
    this.unsubscribe = deps.auth.onPrincipalInvalidated(principal, (reason) => {
      if (this.current !== 'open') return;
      deps.logger.warn({ token_id: principal.tokenId, token_name: principal.tokenId ? principal.name : null, reason }, `SubmitJobStream ended: ${reason}`);
      this.finish({ code: status.UNAUTHENTICATED, details: reason });
    });
    this.writer = new StreamWriter(call, {
      signal: this.closing.signal,
      onBlocked: () => this.inputFlow(),
      highWaterMark: MAX_SUBMITS_IN_FLIGHT,
    });
    deps.streams.add(this);
    call.on('data', (req: SubmitJobStreamRequest | UndecodableRequest) => this.receive(req));
    call.on('end', () => this.end());
    onCallGone(call, () => this.gone());
  }

  get state(): SubmitStreamState {
    return this.current;
  }

  /** Ends the stream with OK once every request read is answered; reads no more. Safe to call twice. */
  end(): void {
    this.finish(null);
  }

  private receive(req: SubmitJobStreamRequest | UndecodableRequest): void {
    // A request read while ending (grpc-js had it in hand) is answered like the others.
    if (this.current === 'closed') return;
    // Without its request id it cannot be answered: the stream ends, the others answered first.
    if (req instanceof UndecodableRequest) return this.finish({ code: status.INVALID_ARGUMENT, details: `a request could not be decoded: ${req.reason}` });
    this.inFlight++;
    this.inputFlow();
    const requestId = req.requestId;
    const submitted = req.job
      ? this.deps.submit(req.job, this.principal)
      : Promise.reject(invalidArgument('job is required: the SubmitJobRequest to submit'));
    submitted
      .then(
        (result): SubmitJobStreamResponse => ({ requestId, outcome: { $case: 'result', value: result } }),
        (err: unknown): SubmitJobStreamResponse => {
          const s = toServiceError(err, this.deps.logger, { method: 'SubmitJobStream' });
          return { requestId, outcome: { $case: 'error', value: { code: s.code ?? status.INTERNAL, message: s.details ?? '' } } };
        },
      )
      .then((answer) => {
        this.inFlight--;
        if (this.current === 'closed') return;
        this.writer.write(answer);
        this.inputFlow();
        this.maybeEnded();
      })
      .catch((err: unknown) => {
        // Only a bug in the lines above can land here; the stream cannot go on safely.
        this.deps.logger.error({ err }, 'SubmitJobStream: answering a submit failed');
        if (this.current !== 'closed') this.call.emit('error', toServiceError(err, this.deps.logger, { method: 'SubmitJobStream' }));
        this.gone();
      });
  }

  /** Reads requests only while open, below the in-flight bound and with the writer flowing. */
  private inputFlow(): void {
    const pause = this.current !== 'open' || this.inFlight >= MAX_SUBMITS_IN_FLIGHT || this.writer.blocked;
    if (pause === this.call.isPaused()) return;
    if (pause) this.call.pause();
    else this.call.resume();
  }

  private finish(endStatus: Partial<ServiceError> | null): void {
    if (this.current !== 'open') return;
    this.to('ending');
    this.endStatus = endStatus;
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.inputFlow();
    this.maybeEnded();
  }

  /** Ending and nothing left to answer: the stream ends with its status. */
  private maybeEnded(): void {
    if (this.current !== 'ending' || this.inFlight > 0) return;
    const endStatus = this.endStatus;
    this.close();
    // OK goes after every queued answer (the writer's end); another status goes after what
    // grpc-js already holds.
    if (endStatus) this.call.emit('error', endStatus);
    else this.writer.end();
  }

  /** The stream is over (error, cancel or close): answers not written yet are dropped. */
  private gone(): void {
    if (this.current === 'closed') return;
    this.closing.abort();
    this.close();
  }

  private close(): void {
    this.to('closed');
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.deps.streams.delete(this);
  }

  private to(next: SubmitStreamState): void {
    this.current = checkTransition('SubmitJobStream', TRANSITIONS, this.current, next);
  }
}

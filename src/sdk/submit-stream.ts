import * as grpc from '@grpc/grpc-js';
import { SubmitJobStreamRequest, type SubmitJobRequest, type SubmitJobResponse, type SubmitJobStreamResponse } from '../gen/evora/v1/job.js';
import { EvoraApiError } from './errors.js';
import { StateMachine, type Transitions } from './worker/state.js';
import { LongTimer } from './worker/timers.js';

/**
 * How long a SubmitJobStream stays open with no submit in flight before the client
 * half-closes it. An open stream keeps the process alive (grpc-js holds its socket while a
 * call is open), so a script that never calls close() exits this long after its last
 * submit; a producer that submits more often than this keeps one stream.
 */
export const SUBMIT_STREAM_IDLE_MS = 1000;

/** Times one request is sent again after its stream ended before the server read it (or before it was written). */
const MAX_RESENDS = 3;

/**
 * Requests written on a stream and not answered yet, at most. The server works on 128 of a
 * stream's at once (docs/api.md); the rest wait here, unwritten, so a submit given up by its
 * deadline or signal before its turn is never sent, and a burst of submits is not all
 * handed to grpc-js (and the server) at once. Twice the server's bound keeps it fed.
 */
export const SUBMIT_STREAM_WINDOW = 256;

/**
 * The largest request (encoded) sent on the stream; a larger one goes by unary SubmitJob.
 * A request over the server's largest message (--max-message-bytes, 4 MiB by default) is
 * refused by gRPC before the server reads it, which ends the whole stream with
 * RESOURCE_EXHAUSTED and drops the answers of every other submit on it; a unary call
 * fails alone. The client does not know the server's limit; this is far below any sensible
 * one, and at this size a call of its own costs nothing that counts.
 */
export const SUBMIT_STREAM_MAX_REQUEST_BYTES = 64 * 1024;

const METHOD = 'SubmitJob';

/**
 * How submits travel: `streaming` (on a SubmitJobStream, opened when needed), `unary` (the
 * server has no SubmitJobStream: a SubmitJob call each, for good) or `closed` (close() was
 * called; EvoraClient refuses submits from then on).
 */
type SubmitTransport = 'streaming' | 'unary' | 'closed';

const TRANSPORT_TRANSITIONS: Transitions<SubmitTransport> = {
  streaming: ['unary', 'closed'],
  unary: ['closed'],
  closed: [],
};

/** One submit waiting for its response. */
interface PendingSubmit {
  readonly req: SubmitJobRequest;
  readonly resolve: (res: SubmitJobResponse) => void;
  readonly reject: (err: unknown) => void;
  /** When its deadline passes (ms since the epoch; Infinity: none). */
  readonly deadlineAt: number;
  /** The deadline's timer (null: no deadline, or settled); a LongTimer, since a deadline may be days. */
  timer: LongTimer | null;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
  resends: number;
  /** The stream and request id it was last sent with. */
  sentOn: OpenStream | null;
  requestId: number;
}

/**
 * A SubmitJobStream whose requests are written already encoded (SubmitJobStreamRequest
 * bytes): send() encodes each one itself, so that one that cannot be encoded fails alone
 * instead of failing grpc-js's serializer, which ends the stream and every submit on it.
 */
export type SubmitStreamCall = grpc.ClientDuplexStream<Buffer, SubmitJobStreamResponse>;

/** One open stream and the submits sent on it that have no response yet. */
interface OpenStream {
  readonly call: SubmitStreamCall;
  /** The submits on this stream not settled yet, by request id (written or waiting). */
  readonly pending: Map<number, PendingSubmit>;
  /** Requests not written yet (their submits are pending), in order, with their bytes. */
  readonly waiting: Map<number, Buffer>;
  /** Requests written and not answered, given-up ones too (the server may be at them still). */
  readonly unanswered: Set<number>;
  /** Half-close once every waiting request is written (close()). */
  ending: boolean;
}

/**
 * EvoraClient.submit's transport: each submit is one request on a SubmitJobStream
 * (job.proto) that stays open while submits come, where a unary SubmitJob costs a call of
 * its own on both sides (about 0.7 ms more per submit on an idle 2-core machine:
 * docs/benchmarks.md). Written here because it is Evora's protocol (grpc-js has no
 * request/response multiplexing over a stream).
 *
 * What must stay true:
 * - every submit settles exactly once: with its response, or its status (an
 *   EvoraApiError), or DEADLINE_EXCEEDED / CANCELLED from its own deadline or signal (a
 *   submit already written may still be applied then, as with a unary call: resubmit with
 *   the same idempotency key to be sure);
 * - a submit whose request cannot be encoded rejects alone (a TypeError); the stream and the
 *   other submits on it live on;
 * - at most SUBMIT_STREAM_WINDOW requests of a stream are written and not answered; a
 *   submit given up while its request waits is never sent (its error says so);
 * - a request over SUBMIT_STREAM_MAX_REQUEST_BYTES goes by unary SubmitJob, never on the stream;
 * - a submit the server never read (its stream ended with OK: a half-close or a server
 *   shutting down) or never written (any end) is sent again on a new stream, at most
 *   MAX_RESENDS times; after any other end of the stream, its submits without a response
 *   fail with that status;
 * - a server without SubmitJobStream (UNIMPLEMENTED) is asked by unary SubmitJob from then on;
 * - with nothing in flight for SUBMIT_STREAM_IDLE_MS the stream is half-closed, so an
 *   idle client does not keep its process alive.
 */
export class SubmitStreamClient {
  private readonly transport = new StateMachine<SubmitTransport>('submit transport', 'streaming', TRANSPORT_TRANSITIONS);
  /** The open stream (streaming only; null until a submit needs one, and after it ends or idles). */
  private stream: OpenStream | null = null;
  private nextRequestId = 1;
  private idleTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly open: () => SubmitStreamCall,
    private readonly unaryFallback: (req: SubmitJobRequest, deadlineMs: number, signal: AbortSignal | undefined) => Promise<SubmitJobResponse>,
  ) {}

  /** Submits one job; settles as the class comment says. The caller (EvoraClient) refuses submits once closed. */
  submit(req: SubmitJobRequest, deadlineMs: number, signal: AbortSignal | undefined): Promise<SubmitJobResponse> {
    if (this.transport.is('unary')) return this.unaryFallback(req, deadlineMs, signal);
    return new Promise<SubmitJobResponse>((resolve, reject) => {
      if (signal?.aborted) return reject(new EvoraApiError({ code: grpc.status.CANCELLED, details: 'cancelled before the call started', method: METHOD }));
      const p: PendingSubmit = {
        req,
        resolve,
        reject,
        deadlineAt: Date.now() + deadlineMs,
        timer: null,
        signal,
        onAbort: () => this.giveUp(p, grpc.status.CANCELLED, 'cancelled by the caller'),
        resends: 0,
        sentOn: null,
        requestId: 0,
      };
      p.timer = LongTimer.after(deadlineMs, () => this.giveUp(p, grpc.status.DEADLINE_EXCEEDED, 'deadline exceeded'));
      signal?.addEventListener('abort', p.onAbort, { once: true });
      this.send(p);
    });
  }

  /** Half-closes the open stream once its waiting requests are written (its submits in flight still settle); later submits are refused. */
  close(): void {
    if (this.transport.is('closed')) return;
    this.transport.to('closed');
    this.idleStop();
    if (this.stream) {
      this.stream.ending = true;
      this.flush(this.stream);
    }
    this.stream = null;
  }

  private send(p: PendingSubmit): void {
    const requestId = this.nextRequestId++;
    let bytes: Buffer;
    try {
      bytes = Buffer.from(SubmitJobStreamRequest.encode({ requestId, job: p.req }).finish());
    } catch (err) {
      this.settled(p);
      p.reject(new TypeError(`${METHOD}: the request cannot be encoded: ${(err as Error).message}`, { cause: err }));
      return;
    }
    if (bytes.length > SUBMIT_STREAM_MAX_REQUEST_BYTES) return this.unary(p);
    this.idleStop();
    const s = this.stream ?? this.openStream();
    s.pending.set(requestId, p);
    p.sentOn = s;
    p.requestId = requestId;
    s.waiting.set(requestId, bytes);
    this.flush(s);
  }

  /** Writes waiting requests while the window has room; half-closes an ending stream once none wait. */
  private flush(s: OpenStream): void {
    for (const [requestId, bytes] of s.waiting) {
      if (s.unanswered.size >= SUBMIT_STREAM_WINDOW) return;
      s.waiting.delete(requestId);
      s.unanswered.add(requestId);
      s.call.write(bytes);
    }
    if (s.ending) {
      s.ending = false;
      s.call.end();
    }
  }

  /** Sends a submit by unary SubmitJob, with what is left of its deadline. */
  private unary(p: PendingSubmit): void {
    this.settled(p);
    this.unaryFallback(p.req, Math.max(1, p.deadlineAt - Date.now()), p.signal).then(p.resolve, p.reject);
  }

  private openStream(): OpenStream {
    const s: OpenStream = { call: this.open(), pending: new Map(), waiting: new Map(), unanswered: new Set(), ending: false };
    this.stream = s;
    s.call.on('data', (res: SubmitJobStreamResponse) => this.answer(s, res));
    // 'status' comes once, after the last response; 'error' repeats a non-OK status.
    s.call.on('error', () => undefined);
    s.call.on('status', (st: grpc.StatusObject) => this.ended(s, st));
    return s;
  }

  private answer(s: OpenStream, res: SubmitJobStreamResponse): void {
    s.unanswered.delete(res.requestId);
    this.flush(s);
    const p = s.pending.get(res.requestId);
    if (!p) return; // its deadline passed or it was cancelled: settled already
    s.pending.delete(res.requestId);
    this.settled(p);
    const outcome = res.outcome;
    if (outcome?.$case === 'result') p.resolve(outcome.value);
    else if (outcome?.$case === 'error') p.reject(new EvoraApiError({ code: outcome.value.code, details: outcome.value.message, method: METHOD, answered: true }));
    else p.reject(new Error(`${METHOD}: the server's answer lacks its outcome`));
    this.idleIfDone(s);
  }

  private ended(s: OpenStream, st: grpc.StatusObject): void {
    if (this.stream === s) {
      this.stream = null;
      this.idleStop();
    }
    const left = [...s.pending.values()];
    const unwritten = new Set(s.waiting.keys());
    s.pending.clear();
    s.waiting.clear();
    s.unanswered.clear();
    s.ending = false;
    if (st.code === grpc.status.UNIMPLEMENTED && this.transport.is('streaming')) this.transport.to('unary');
    for (const p of left) {
      if (st.code === grpc.status.UNIMPLEMENTED) {
        this.unary(p);
      } else if ((st.code === grpc.status.OK || unwritten.has(p.requestId)) && this.transport.is('streaming') && p.resends < MAX_RESENDS) {
        // Never read by the server (it answers all it reads before an OK end), or never
        // written: send it again.
        p.resends++;
        this.send(p);
      } else {
        this.settled(p);
        p.reject(st.code === grpc.status.OK
          ? new EvoraApiError({ code: grpc.status.UNAVAILABLE, details: 'the server ended the submit stream without reading this submit', method: METHOD })
          : EvoraApiError.from({ code: st.code, details: st.details }, METHOD));
      }
    }
  }

  /**
   * A submit's deadline or signal fired first: it fails now; a late response is ignored. One
   * whose request was not written yet is never written: it was not submitted.
   */
  private giveUp(p: PendingSubmit, code: grpc.status, what: string): void {
    const s = p.sentOn;
    if (!s || s.pending.get(p.requestId) !== p) return; // settled already
    s.pending.delete(p.requestId);
    const unsent = s.waiting.delete(p.requestId);
    this.settled(p);
    const details = unsent ? `${what} before the submit was sent; the job was not submitted` : `${what}; the job may have been submitted`;
    p.reject(new EvoraApiError({ code, details, method: METHOD, notSent: unsent }));
    if (s.ending) this.flush(s); // close() waits for no more requests to write
    this.idleIfDone(s);
  }

  /** The open stream has nothing in flight: it is half-closed unless a submit comes soon. */
  private idleIfDone(s: OpenStream): void {
    if (s === this.stream && s.pending.size === 0) this.idleStart();
  }

  private settled(p: PendingSubmit): void {
    p.timer?.clear();
    p.timer = null;
    p.signal?.removeEventListener('abort', p.onAbort);
  }

  private idleStart(): void {
    this.idleStop();
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      const s = this.stream;
      if (!s || s.pending.size > 0) return;
      this.stream = null;
      s.call.end();
    }, SUBMIT_STREAM_IDLE_MS);
    this.idleTimer.unref();
  }

  private idleStop(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
  }
}

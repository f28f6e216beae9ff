import * as grpc from '@grpc/grpc-js';
import type { Lease, ServerDrain, ServerWelcome, WorkerServiceClient, WorkRequest, WorkResponse } from '../../gen/evora/v1/worker.js';
import { EvoraApiError } from '../errors.js';
import { drainCauseOf } from './codes.js';
import { StateMachine, type Transitions } from './state.js';
import type { LongTimer, TimerSet } from './timers.js';
import type { DrainCause, WorkerLog } from './types.js';

/**
 * The worker's Work stream: opens it, says hello, waits for the welcome, reconnects with
 * exponential backoff and jitter when it breaks, and closes it on stop. Its lifecycle:
 *
 *   idle -> connecting -> open -> draining -> closing -> stopped
 *              ^   │        │        │
 *              │   └────────┴────────┴──> backoff ──> connecting (after the delay)
 *
 * connecting: the stream is up and hello sent, no welcome yet. open: a session; jobs may
 * come. draining: a session on which this worker takes no new jobs (it stops, or the
 * server asked it to drain); reports and acks still flow. backoff: the stream ended;
 * waiting out the delay before the next one. closing: stop() half-closed the stream and
 * waits for the server to end it. A server that refuses the very first hello with a status
 * retrying cannot fix (INVALID_ARGUMENT, UNAUTHENTICATED …) takes it straight to stopped;
 * so does a stream ended UNAUTHENTICATED or PERMISSION_DENIED at any time (a token revoked
 * or expired while open or draining: it does not heal by itself).
 *
 * What must stay true: at most one stream at a time, and events of an ended stream never
 * act on its successor (each stream has a generation; a message read after its stream's
 * status still counts for what it says about leases and acks, but never as a welcome or a
 * drain). Writes honour backpressure: `writable` is false from a write that filled the
 * stream's buffer until its 'drain', and `onWritable` says when to go on.
 */

/** Where the Work stream is in its lifecycle (see the module comment). */
export type ConnectionState = 'idle' | 'connecting' | 'open' | 'draining' | 'backoff' | 'closing' | 'stopped';

/**
 * The stream's allowed moves (the lifecycle above). Exported for the tests that pin it;
 * only the connection's own StateMachine moves along it.
 */
export const CONNECTION_TRANSITIONS: Transitions<ConnectionState> = {
  idle: ['connecting', 'stopped'],
  connecting: ['open', 'draining', 'backoff', 'closing', 'stopped'],
  open: ['draining', 'backoff', 'closing', 'stopped'],
  draining: ['backoff', 'closing', 'stopped'],
  backoff: ['connecting', 'stopped'],
  closing: ['stopped'],
  stopped: [],
};

/** Statuses before the first welcome that mean the server refuses this worker as configured. */
const FATAL_BEFORE_WELCOME = new Set([
  grpc.status.INVALID_ARGUMENT,
  grpc.status.UNIMPLEMENTED,
  grpc.status.UNAUTHENTICATED,
  grpc.status.PERMISSION_DENIED,
]);
/**
 * Statuses that refuse the worker whenever they come, also after a welcome (a token
 * revoked or expired mid-session): a bad token does not heal by itself, so reconnecting
 * would only spin.
 */
const FATAL_ALWAYS = new Set([grpc.status.UNAUTHENTICATED, grpc.status.PERMISSION_DENIED]);
/** The welcome must arrive within this long after hello. */
const WELCOME_TIMEOUT_MS = 30_000;
/** How long close() waits for the server to end the call after the half-close, before cutting it. */
const CLOSE_TIMEOUT_MS = 2_000;

/** What the connection tells the worker, and asks of it. */
export interface ConnectionEvents {
  /** The leases to name in hello.held. */
  helloLeases(): Lease[];
  /**
   * The job types to name in hello.job_types: the worker's registered handlers, so the server
   * sends it only jobs it can run (job-type routing). Read at every hello (each reconnect).
   */
  helloJobTypes(): string[];
  /** The worker is stopping: a new session starts draining. */
  stopping(): boolean;
  /** A session opened (`reconnect`: not the first). */
  opened(welcome: ServerWelcome, reconnect: boolean): void;
  /** Any message but welcome and drain; `late` = read after its stream ended. */
  message(m: NonNullable<WorkResponse['msg']>, late: boolean): void;
  /** The server asked this stream to drain (already answered with a drain). */
  serverDrain(cause: DrainCause, reason: string): void;
  /** The stream ended (not by close()); the next one comes after the backoff. */
  lost(): void;
  /** The next stream comes in `retryInMs` (the `disconnected` event). */
  disconnected(error: Error, retryInMs: number): void;
  /** The server refused the worker (its first hello, or its token at any time); the connection has stopped. */
  refused(error: Error): void;
  /** The stream takes writes again (a session opened, or its buffer drained). */
  writable(): void;
}

/** The Work stream and its reconnects (see the module comment). */
export class WorkConnection {
  private readonly state: StateMachine<ConnectionState>;
  private stream: grpc.ClientDuplexStream<WorkRequest, WorkResponse> | null = null;
  /** Generation of the current stream; events of older streams are late. */
  private gen = 0;
  private welcome: ServerWelcome | null = null;
  private everWelcomed = false;
  private failures = 0;
  private reconnectCount = 0;
  private lastHeard = 0;
  /** A write filled the stream's buffer; wait for its 'drain'. */
  private blocked = false;
  private welcomeTimer: LongTimer | null = null;
  private reconnectTimer: LongTimer | null = null;
  private closed: (() => void) | null = null;

  constructor(
    private readonly opts: {
      client: WorkerServiceClient;
      address: string;
      workerId: string;
      queues: readonly string[];
      slots: number;
      backoff: { initialDelayMs: number; maxDelayMs: number; jitter: number };
      timers: TimerSet;
      log: WorkerLog;
      events: ConnectionEvents;
      /** Called on every state change (stop() waits on them). */
      changed: () => void;
    },
  ) {
    this.state = new StateMachine('Work stream', 'idle', CONNECTION_TRANSITIONS, () => opts.changed());
  }

  get current(): ConnectionState {
    return this.state.current;
  }

  /** The open session's welcome (null while not open or draining). */
  get session(): ServerWelcome | null {
    return this.welcome;
  }

  /** A session is open: the welcome arrived and the stream is up. */
  get connected(): boolean {
    const s = this.state.current;
    return s === 'open' || s === 'draining';
  }

  /** Sessions opened after the first. */
  get reconnects(): number {
    return this.reconnectCount;
  }

  /** When the server was last heard from (Date.now() clock). */
  get lastHeardAt(): number {
    return this.lastHeard;
  }

  /** A write now goes out without queuing behind a full buffer. */
  get writable(): boolean {
    return this.stream !== null && this.connected && !this.blocked;
  }

  /** Opens the first stream. */
  start(): void {
    this.connect();
  }

  /** Writes on the open session; false (nothing written) when there is none. Never blocks: check `writable` to honour backpressure. */
  write(req: WorkRequest): boolean {
    if (!this.stream || !this.connected) return false;
    if (!this.stream.write(req)) this.blocked = true;
    return true;
  }

  /** Asks the server for no new jobs on this session; a session that opens later starts draining (see stopping()). */
  drain(): void {
    if (!this.state.is('open')) return;
    this.state.to('draining');
    this.write({ msg: { $case: 'drain', value: {} } });
  }

  /** Drops the current stream (it is dead); the next one comes after the backoff. */
  cancel(): void {
    this.stream?.cancel();
  }

  /** Half-closes the stream and waits (briefly) for the server to end it; no reconnect follows. */
  async close(): Promise<void> {
    if (this.state.is('stopped', 'closing')) return;
    this.reconnectTimer = this.opts.timers.clear(this.reconnectTimer);
    const stream = this.stream;
    if (!stream) {
      this.state.to('stopped');
      return;
    }
    this.state.to('closing');
    const ended = new Promise<void>((resolve) => (this.closed = resolve));
    stream.end();
    const timer = setTimeout(() => stream.cancel(), CLOSE_TIMEOUT_MS);
    await ended;
    clearTimeout(timer);
  }

  private connect(): void {
    this.reconnectTimer = null;
    this.state.to('connecting');
    const gen = ++this.gen;
    const stream = this.opts.client.work();
    this.stream = stream;
    this.welcome = null;
    this.blocked = false;
    let lastError: Error | null = null;
    stream.on('data', (res: WorkResponse) => this.onData(res, gen));
    stream.on('error', (err: Error) => {
      lastError = err;
    });
    stream.on('status', (s: grpc.StatusObject) => {
      if (gen !== this.gen) return;
      const error =
        s.code === grpc.status.OK
          ? new Error('the server closed the Work stream')
          : (EvoraApiError.from(lastError ?? Object.assign(new Error(s.details), { code: s.code, details: s.details }), 'Work') as Error);
      this.onEnd(error);
    });
    stream.on('drain', () => {
      if (gen !== this.gen || !this.blocked) return;
      this.blocked = false;
      if (this.connected) this.opts.events.writable();
    });
    const held = this.opts.events.helloLeases();
    const jobTypes = this.opts.events.helloJobTypes();
    const { workerId, queues, slots } = this.opts;
    if (!stream.write({ msg: { $case: 'hello', value: { workerId, queues: [...queues], slots, held, acceptsBatches: true, jobTypes, payloadsAsJson: true } } })) this.blocked = true;
    this.welcomeTimer = this.opts.timers.after(WELCOME_TIMEOUT_MS, () => {
      if (gen !== this.gen || !this.state.is('connecting')) return;
      this.opts.log.warn({ address: this.opts.address }, 'no welcome from the server; reconnecting');
      stream.cancel();
    });
    this.opts.log.debug({ address: this.opts.address, held: held.length }, 'hello sent');
  }

  private onData(res: WorkResponse, gen: number): void {
    const m = res.msg;
    if (!m) return;
    const late = gen !== this.gen;
    if (late) {
      // From a stream that has ended: session messages are void, lease messages still apply.
      if (this.state.is('closing', 'stopped') || m.$case === 'welcome' || m.$case === 'drain') return;
    } else {
      this.lastHeard = Date.now();
    }
    if (m.$case === 'welcome') this.onWelcome(m.value);
    else if (m.$case === 'drain') this.onServerDrain(m.value);
    else this.opts.events.message(m, late);
  }

  private onWelcome(w: ServerWelcome): void {
    if (!this.state.is('connecting')) {
      this.opts.log.debug({ state: this.state.current }, 'ignoring a welcome outside connecting');
      return;
    }
    this.welcomeTimer = this.opts.timers.clear(this.welcomeTimer);
    const reconnect = this.everWelcomed;
    if (reconnect) this.reconnectCount++;
    this.everWelcomed = true;
    this.failures = 0;
    this.welcome = w;
    if (this.opts.events.stopping()) {
      this.state.to('draining');
      this.write({ msg: { $case: 'drain', value: {} } });
    } else {
      this.state.to('open');
    }
    // Reports waiting since the last stream go out first, then the session is announced.
    if (this.writable) this.opts.events.writable();
    this.opts.events.opened(w, reconnect);
  }

  private onServerDrain(d: ServerDrain): void {
    if (!this.connected) return;
    const cause = drainCauseOf(d.code);
    this.opts.log.info({ code: cause, reason: d.reason }, 'the server asked this worker to drain');
    this.drain();
    this.opts.events.serverDrain(cause, d.reason);
  }

  private onEnd(error: Error): void {
    const wasOpen = this.connected;
    this.gen++;
    this.stream = null;
    this.welcome = null;
    this.blocked = false;
    this.welcomeTimer = this.opts.timers.clear(this.welcomeTimer);
    if (this.state.is('closing')) {
      this.state.to('stopped');
      this.closed?.();
      return;
    }
    this.opts.events.lost();
    const code = error instanceof EvoraApiError ? error.code : undefined;
    if (code !== undefined && (FATAL_ALWAYS.has(code) || (!this.everWelcomed && FATAL_BEFORE_WELCOME.has(code)))) {
      // The server refuses this worker as configured: retrying cannot help.
      this.state.to('stopped');
      this.opts.events.refused(error);
      return;
    }
    const retryInMs = this.nextDelay();
    if (wasOpen) this.opts.log.warn({ err: error, retry_in_ms: retryInMs }, 'Work stream lost; reconnecting');
    else this.opts.log.debug({ err: error, retry_in_ms: retryInMs }, 'cannot open the Work stream; retrying');
    this.state.to('backoff');
    this.reconnectTimer = this.opts.timers.after(retryInMs, () => this.connect());
    this.connectOnChannelChange(retryInMs);
    this.opts.events.disconnected(error, retryInMs);
  }

  /**
   * While the channel is in TRANSIENT_FAILURE (the server cannot be reached), a new stream
   * fails at once without trying: only the channel's own reconnect attempts (every
   * `maxDelayMs` at most, the same backoff) can find the server back. Were the next stream
   * left to our timer alone, it could miss the moment by up to a whole delay each time, the
   * two schedules adding up (restarts took up to ~20 s). So the next stream also starts as
   * soon as the channel leaves TRANSIENT_FAILURE (it is connecting, or connected), whichever
   * comes first. What must stay true: it acts only in the backoff it was set for (the
   * generation is unchanged), and it ends with the delay or with the channel's close.
   */
  private connectOnChannelChange(withinMs: number): void {
    const channel = this.opts.client.getChannel();
    const state = channel.getConnectivityState(false);
    if (state !== grpc.connectivityState.TRANSIENT_FAILURE) return;
    const gen = this.gen;
    channel.watchConnectivityState(state, Date.now() + withinMs, (err?: Error) => {
      if (err || gen !== this.gen || !this.state.is('backoff')) return;
      this.reconnectTimer = this.opts.timers.clear(this.reconnectTimer);
      this.connect();
    });
  }

  private nextDelay(): number {
    const { initialDelayMs, maxDelayMs, jitter } = this.opts.backoff;
    const delay = Math.min(maxDelayMs, initialDelayMs * 2 ** Math.min(this.failures++, 30));
    return Math.max(0, Math.round(delay * (1 + jitter * (2 * Math.random() - 1))));
  }
}

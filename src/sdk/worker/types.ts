import type { ConnectionOptions } from '../connection.js';
import type { AbortCause } from '../errors.js';
import type { Job, JsonObject, ProgressInput } from '../types.js';

/**
 * The public types of EvoraWorker: its options, what a handler gets, its events and its
 * stats. They are re-exported from src/sdk/index.ts; changing one changes the SDK's API.
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
  /** Reconnect backoff: delay = min(max, initial * 2^n) +/- jitter. Defaults 200 ms, 2 000 ms, 0.3. */
  reconnect?: { initialDelayMs?: number; maxDelayMs?: number; jitter?: number };
  /** Where to log. Default: nowhere (listen to the events instead). */
  logger?: WorkerLogger;
}

/** What a handler gets besides the job. */
export interface JobContext<P = JsonObject> {
  /** The job as leased (state RUNNING, attempt = this attempt's number). */
  readonly job: Job<P>;
  /** Fires when an operator cancels the job, its timeout passes (the server failed the attempt), the lease is lost, or a stop times out; its `reason` is a JobAbortedError. */
  readonly signal: AbortSignal;
  /** This worker's id. */
  readonly workerId: string;
  /** The lease token (reports carry it; handlers rarely need it). */
  readonly leaseToken: string;
  /** When the lease ends unless renewed (the worker renews it on its own). */
  readonly leaseExpiresAt: Date | null;
  /**
   * The results of the job's parents (`job.dependsOn`), by parent id: each the object its
   * parent completed with ({} if none). Empty for a job without parents.
   */
  readonly parentResults: Readonly<Record<string, JsonObject>>;
  /**
   * Gives the job back to run again at `when` (a Date, or ms from now) without counting a
   * failure; 0 ms or less means now by the server's clock. Throws; never returns.
   */
  snooze(when: Date | number): never;
  /** Fails this attempt and retries at `when` (a Date, or ms from now) instead of after the queue's backoff. Throws; never returns. */
  retryAt(when: Date | number, message?: string): never;
  /**
   * The checkpoint an earlier attempt of this job reported (ctx.progress({ checkpoint })),
   * to resume from; null = none (a first attempt, or none was reported).
   */
  readonly checkpoint: JsonObject | null;
  /**
   * Reports progress: `percent` (0..100) or `done` and `total`, a short `message`, and a
   * `checkpoint` (a JSON object) the next attempt gets as ctx.checkpoint if this one fails.
   * Fire and forget: call it as often as you like, the server stores about one report per
   * second (the latest); a report still waiting when the handler throws is stored before
   * the failure. Throws TypeError/RangeError for a malformed report, and RangeError for a
   * checkpoint larger than the server takes (ServerWelcome.max_result_bytes, or a message
   * over its max_message_bytes); does nothing once the job is no longer held or while the
   * worker is disconnected.
   */
  progress(report: ProgressInput): void;
}

/**
 * A job handler. Its return value becomes the job's result (an object is stored as is;
 * any other value except undefined, null too, as `{ value }`; undefined as no result). A thrown error fails the attempt
 * (retried per the queue's backoff); NonRetryableError sends the job to the DLQ;
 * RetryAtError / SnoozeError (or ctx.retryAt / ctx.snooze) choose when it runs again.
 *
 * `P` defaults to `any` so that a handler written without a type argument reads its
 * payload's fields without casts (the payload is whatever JSON the producer sent); give `P`
 * to have them checked.
 */
export type JobHandler<P = any> = (job: Job<P>, ctx: JobContext<P>) => unknown;

/**
 * What the server's ack said about a report (the wire's AckResult): 'accepted' (applied),
 * 'lease_lost' (not applied: the lease is no longer this worker's), 'retry_later' (not
 * applied now; the worker resent it until its bound ran out), 'invalid' (the report itself
 * is malformed and can never be applied: see JobOutcome.refused).
 */
export type AckResultName = 'accepted' | 'lease_lost' | 'retry_later' | 'invalid';

/** Why the server asked this worker to drain (the wire's DrainReason); 'unspecified' from servers that send no code. */
export type DrainCause = 'server_shutdown' | 'unspecified';

/** What the worker reported for a job, and what the server said. */
export interface JobOutcome {
  job: Job;
  /** 'lost': the lease was lost while the handler ran; nothing was reported. */
  outcome: 'completed' | 'failed' | 'snoozed' | 'lost';
  /** The server applied the report (ackResult 'accepted'); false may still be applied when `maybeApplied`. */
  accepted: boolean;
  /** The server's words when not accepted; for people and logs (act on `accepted` / `ackResult`). */
  reason: string;
  /** The error reported with a failure. */
  error: string | null;
  /**
   * The code of the last ack for the report, or 'lease_lost' when the server said the lease
   * was lost while the report waited to be (re)sent (it is then never sent); null when
   * nothing was reported (outcome 'lost'). A 'lease_lost' may hide an applied report: see
   * `maybeApplied`.
   */
  ackResult: AckResultName | null;
  /**
   * The handler's own report when the server refused it as invalid (a result too large or
   * with a NUL, a retry time out of range): its `outcome` and the server's `reason`. The
   * worker then failed the job instead, non-retryable, under the same lease: `outcome` is
   * 'failed' and `error` "<complete, snooze or fail> refused: <reason>" (accepted: the job
   * is in the DLQ; not accepted, ackResult 'invalid': that fail was refused too and the job
   * was given up, so its lease expires and the server retries it). Null otherwise.
   */
  refused: { outcome: 'completed' | 'failed' | 'snoozed'; reason: string } | null;
  /**
   * True when `accepted` is false but the report may have been applied all the same: it was
   * written on a stream that ended before its ack, and then the server answered lease_lost
   * (the resend on the next stream met the earlier write, applied meanwhile, which ended
   * the lease) or the stream ended after the server said the lease was lost. Read the job
   * (EvoraClient.get) to know. False whenever an ack answered the report's only write.
   */
  maybeApplied: boolean;
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
  /** The server asked this stream to drain: `code` says why; `reason` is its text, for logs. */
  drain: [{ reason: string; code: DrainCause }];
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

/** The worker's logger with every level present (the missing ones do nothing). */
export type WorkerLog = Required<WorkerLogger>;

/** Fills in the levels a logger lacks. */
export function workerLogOf(l: WorkerLogger = {}): WorkerLog {
  const noop = () => undefined;
  return {
    debug: l.debug?.bind(l) ?? noop,
    info: l.info?.bind(l) ?? noop,
    warn: l.warn?.bind(l) ?? noop,
    error: l.error?.bind(l) ?? noop,
  };
}

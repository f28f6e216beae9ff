import { status, type ServiceError } from '@grpc/grpc-js';
import { dateCheck } from './checks.js';

/** The name of a gRPC status code, e.g. 'NOT_FOUND'. */
export type StatusName =
  | 'OK'
  | 'CANCELLED'
  | 'UNKNOWN'
  | 'INVALID_ARGUMENT'
  | 'DEADLINE_EXCEEDED'
  | 'NOT_FOUND'
  | 'ALREADY_EXISTS'
  | 'PERMISSION_DENIED'
  | 'RESOURCE_EXHAUSTED'
  | 'FAILED_PRECONDITION'
  | 'ABORTED'
  | 'OUT_OF_RANGE'
  | 'UNIMPLEMENTED'
  | 'INTERNAL'
  | 'UNAVAILABLE'
  | 'DATA_LOSS'
  | 'UNAUTHENTICATED';

/** gRPC status codes by name (the numbers are the standard ones). */
export const StatusCode = status;

/** The name of a gRPC status code number ('UNKNOWN' for numbers outside the standard set). */
export function statusName(code: number): StatusName {
  return ((status as unknown as Record<number, string>)[code] ?? 'UNKNOWN') as StatusName;
}

/**
 * An RPC failed: carries the gRPC status (`code`, `codeName`) and the server's one-line
 * message (`message`, also as `details`).
 *
 * ```ts
 * try { await client.get(id) } catch (err) {
 *   if (err instanceof EvoraApiError && err.codeName === 'NOT_FOUND') ...
 * }
 * ```
 */
export class EvoraApiError extends Error {
  /** The gRPC status code number (5 for NOT_FOUND ...). */
  readonly code: number;
  /** The status code's name, e.g. 'NOT_FOUND'. */
  readonly codeName: StatusName;
  /** The server's message (for UNAVAILABLE and DEADLINE_EXCEEDED, grpc-js's). */
  readonly details: string;
  /** The RPC that failed, e.g. 'GetJob'. */
  readonly method: string;
  /**
   * True when the SDK knows the request never left this process (a submit given up by its
   * deadline or signal while it waited for its turn on the submit stream): nothing was
   * applied, and submitting again cannot make a duplicate. False means the outcome is what
   * the status says (for DEADLINE_EXCEEDED, CANCELLED or UNAVAILABLE: unknown).
   */
  readonly notSent: boolean;
  /**
   * True when the Evora server itself answered with this status (a unary call's status with
   * the server's metadata, or a refusal of one request on a SubmitJobStream): the call
   * reached it and what the status says is what happened, e.g. UNAVAILABLE because its
   * database is away (nothing was written). False when grpc-js or the SDK made the status:
   * no connection, a connection that broke during the call, a deadline; a write's outcome
   * is then unknown.
   */
  readonly answered: boolean;

  constructor(params: { code: number; details: string; method: string; cause?: unknown; notSent?: boolean; answered?: boolean }) {
    super(params.details || statusName(params.code), { cause: params.cause });
    this.name = 'EvoraApiError';
    this.code = params.code;
    this.codeName = statusName(params.code);
    this.details = params.details;
    this.method = params.method;
    this.notSent = params.notSent ?? false;
    this.answered = params.answered ?? hasServerMetadata(params.cause);
  }

  /**
   * The server needs a token and this call's is missing, malformed, unknown, expired or
   * revoked (UNAUTHENTICATED). Retrying with the same token cannot help.
   */
  get isUnauthenticated(): boolean {
    return this.code === status.UNAUTHENTICATED;
  }

  /**
   * The token is valid but its role may not call this method, or its queues do not include
   * a queue the call names or touches (PERMISSION_DENIED). Nothing was changed.
   */
  get isPermissionDenied(): boolean {
    return this.code === status.PERMISSION_DENIED;
  }

  /** Turns a grpc-js error into an EvoraApiError (other errors pass through unchanged). */
  static from(err: unknown, method: string): unknown {
    if (err instanceof EvoraApiError) return err;
    const e = err as Partial<ServiceError> | null;
    if (e && typeof e === 'object' && typeof e.code === 'number') {
      return new EvoraApiError({ code: e.code, details: oneLine(e.details ?? e.message ?? ''), method, cause: err });
    }
    return err;
  }
}

/** The server's message on one line, for display only (nothing in the SDK decides on it). */
function oneLine(text: string): string {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .join(' ');
}

/**
 * Thrown by a job handler: the attempt failed and must not be retried; the job goes to the
 * DLQ with this message as its last error.
 */
export class NonRetryableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NonRetryableError';
  }
}

/**
 * Thrown by a job handler (or by `ctx.retryAt()`): the attempt failed; retry it at `retryAt`
 * instead of after the queue's backoff. If no attempts are left, the job goes to the DLQ.
 */
export class RetryAtError extends Error {
  constructor(
    readonly retryAt: Date,
    message?: string,
    options?: { cause?: unknown },
  ) {
    super(retryAtMessage(retryAt, message), options);
    this.name = 'RetryAtError';
  }
}

/**
 * RetryAtError's message; a TypeError for a `retryAt` that is no valid Date, which would
 * otherwise fail the attempt with toISOString's bare "Invalid time value".
 */
function retryAtMessage(retryAt: Date, message: string | undefined): string {
  dateCheck(retryAt, 'RetryAtError: retryAt');
  return message ?? `retry at ${retryAt.toISOString()}`;
}

/**
 * Thrown by a job handler (or by `ctx.snooze()`): give the job back, to run again at
 * `runAt`, without counting a failed attempt. `runAt` null (or left out): at once, by the
 * server's clock (the snooze then carries no time, so a worker clock running ahead of the
 * database's cannot delay the job).
 */
export class SnoozeError extends Error {
  constructor(readonly runAt: Date | null = null) {
    super(runAt ? `snoozed until ${dateCheck(runAt, 'SnoozeError: runAt').toISOString()}` : 'snoozed until now');
    this.name = 'SnoozeError';
  }
}

/** Why a handler's `ctx.signal` fired. */
export type AbortCause = 'cancelled' | 'timed_out' | 'lease_lost' | 'shutdown';

/**
 * The reason of an aborted `ctx.signal`: an operator cancelled the job ('cancelled'), the
 * attempt ran past the job's timeout and the server already failed it ('timed_out'; the
 * retry rules apply, and any report about it is answered lease_lost), the worker no
 * longer holds its lease ('lease_lost'), or the worker is stopping and the handler
 * outlived the stop timeout ('shutdown').
 */
export class JobAbortedError extends Error {
  constructor(
    /** Why the signal fired. */
    readonly kind: AbortCause,
    message: string,
  ) {
    super(message);
    this.name = 'JobAbortedError';
  }
}

/**
 * Whether a grpc-js error carries the server's metadata: a status the server sent (grpc-js
 * sends its own without any, for a connection that failed or broke, or a deadline).
 */
function hasServerMetadata(cause: unknown): boolean {
  const metadata = (cause as { metadata?: { getMap?: () => Record<string, unknown> } } | undefined)?.metadata;
  return typeof metadata?.getMap === 'function' && Object.keys(metadata.getMap()).length > 0;
}

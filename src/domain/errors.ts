/**
 * Domain errors. Every layer throws these; the gRPC layer maps each code to a status in
 * one place (src/grpc/status.ts). Anything else that escapes is a bug: it is logged with
 * detail and answered as INTERNAL.
 */
export type EvoraErrorCode =
  | 'INVALID_ARGUMENT'
  | 'NOT_FOUND'
  | 'ALREADY_EXISTS'
  | 'FAILED_PRECONDITION'
  | 'UNAVAILABLE'
  | 'UNAUTHENTICATED'
  | 'PERMISSION_DENIED';

/** A failure the caller can act on; its message is one readable line meant for them. */
export class EvoraError extends Error {
  constructor(
    readonly code: EvoraErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'EvoraError';
  }
}

// Shorthands that keep call sites short and the code explicit.

/** The request is malformed (a field out of range, not a UUID, ...); nothing was changed. */
export const invalidArgument = (message: string, options?: { cause?: unknown }) => new EvoraError('INVALID_ARGUMENT', message, options);
/** What the request names (a job, a queue) does not exist. */
export const notFound = (message: string, options?: { cause?: unknown }) => new EvoraError('NOT_FOUND', message, options);
/** The request conflicts with what exists (an idempotency key reused with another job). */
export const alreadyExists = (message: string, options?: { cause?: unknown }) => new EvoraError('ALREADY_EXISTS', message, options);
/** The thing is not in a state that allows this (a lease no longer current, a finished job cancelled). */
export const failedPrecondition = (message: string, options?: { cause?: unknown }) => new EvoraError('FAILED_PRECONDITION', message, options);
/**
 * The call carries no token, or one that is malformed, unknown, expired or revoked. The
 * message never contains the token.
 */
export const unauthenticated = (message: string, options?: { cause?: unknown }) => new EvoraError('UNAUTHENTICATED', message, options);
/** The token is valid but its role or its queues do not allow this; nothing was changed. */
export const permissionDenied = (message: string, options?: { cause?: unknown }) => new EvoraError('PERMISSION_DENIED', message, options);
/**
 * The database cannot be reached or is restarting (refused, reset, terminated, recovering).
 * Answered UNAVAILABLE: the caller retries later. A write in flight when the connection
 * broke may or may not have committed; submits with an idempotency key are safe to retry.
 */
export const unavailable = (message: string, options?: { cause?: unknown }) => new EvoraError('UNAVAILABLE', message, options);

/**
 * What a call gets while its server is bound but not yet serving (it waits for the database
 * and migrates first): one answer for gRPC and HTTP, so that a client sees the same line on both.
 */
export const serverStarting = () => unavailable('the server is starting: waiting for the database');

/** What a call gets once its server has begun to shut down; the caller retries on another. */
export const serverStopping = () => unavailable('the server is stopping');

/**
 * Whether `err` is an UNAVAILABLE domain error: an expected outage, which the store's
 * availability tracker has logged once; callers must not log it again at error level.
 */
export function isUnavailable(err: unknown): boolean {
  return err instanceof EvoraError && err.code === 'UNAVAILABLE';
}

import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { EvoraError, type EvoraErrorCode } from '../domain/errors.js';
import type { Logger } from '../logger.js';

const CODES: Record<EvoraErrorCode, status> = {
  INVALID_ARGUMENT: status.INVALID_ARGUMENT,
  NOT_FOUND: status.NOT_FOUND,
  ALREADY_EXISTS: status.ALREADY_EXISTS,
  FAILED_PRECONDITION: status.FAILED_PRECONDITION,
  UNAVAILABLE: status.UNAVAILABLE,
  UNAUTHENTICATED: status.UNAUTHENTICATED,
  PERMISSION_DENIED: status.PERMISSION_DENIED,
};

/**
 * The one place where errors become gRPC statuses. Domain errors keep their readable
 * message; anything else is logged with its detail and answered as INTERNAL with a message
 * that leaks nothing.
 */
export function toServiceError(err: unknown, logger: Logger, context: Record<string, unknown> = {}): Partial<ServiceError> {
  if (err instanceof EvoraError) {
    return { code: CODES[err.code], details: err.message, metadata: new Metadata() };
  }
  logger.error({ err, ...context }, 'unexpected error');
  return { code: status.INTERNAL, details: 'internal error (logged by the server)', metadata: new Metadata() };
}

/** A gRPC status as the HTTP API answers it: the code's name (the error body's `code`) and the HTTP status. */
export interface HttpStatusOfCode {
  name: string;
  http: number;
}

/**
 * The one table from gRPC status codes to HTTP (src/http answers `{ code: name, message }`
 * with `http`), next to the domain-error table above so both mappings change together.
 * A code missing here (none is) would be answered 500.
 */
export const STATUS_HTTP: Readonly<Record<status, HttpStatusOfCode>> = {
  [status.OK]: { name: 'OK', http: 200 },
  [status.CANCELLED]: { name: 'CANCELLED', http: 499 },
  [status.UNKNOWN]: { name: 'UNKNOWN', http: 500 },
  [status.INVALID_ARGUMENT]: { name: 'INVALID_ARGUMENT', http: 400 },
  [status.DEADLINE_EXCEEDED]: { name: 'DEADLINE_EXCEEDED', http: 504 },
  [status.NOT_FOUND]: { name: 'NOT_FOUND', http: 404 },
  [status.ALREADY_EXISTS]: { name: 'ALREADY_EXISTS', http: 409 },
  [status.PERMISSION_DENIED]: { name: 'PERMISSION_DENIED', http: 403 },
  [status.RESOURCE_EXHAUSTED]: { name: 'RESOURCE_EXHAUSTED', http: 429 },
  [status.FAILED_PRECONDITION]: { name: 'FAILED_PRECONDITION', http: 409 },
  [status.ABORTED]: { name: 'ABORTED', http: 409 },
  [status.OUT_OF_RANGE]: { name: 'OUT_OF_RANGE', http: 400 },
  [status.UNIMPLEMENTED]: { name: 'UNIMPLEMENTED', http: 501 },
  [status.INTERNAL]: { name: 'INTERNAL', http: 500 },
  [status.UNAVAILABLE]: { name: 'UNAVAILABLE', http: 503 },
  [status.DATA_LOSS]: { name: 'DATA_LOSS', http: 500 },
  [status.UNAUTHENTICATED]: { name: 'UNAUTHENTICATED', http: 401 },
};

/**
 * The HTTP answer to a request body over the server's limit: RESOURCE_EXHAUSTED as grpc-js
 * answers an oversized message, but 413 rather than the table's 429, since retrying the same
 * body will not help. The one exception to STATUS_HTTP.
 */
export const HTTP_BODY_TOO_LARGE: HttpStatusOfCode = { name: 'RESOURCE_EXHAUSTED', http: 413 };

/**
 * The HTTP answer to a known /v1 path asked with a method it does not serve (PATCH
 * /v1/jobs): 405 with an Allow header, named UNIMPLEMENTED as gRPC names a method that does
 * not exist (and as grpc-gateway answers it). Not in STATUS_HTTP: no RPC answers it.
 */
export const HTTP_METHOD_NOT_ALLOWED: HttpStatusOfCode = { name: 'UNIMPLEMENTED', http: 405 };

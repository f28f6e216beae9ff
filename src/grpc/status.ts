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

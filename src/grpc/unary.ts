import type { sendUnaryData, ServerUnaryCall } from '@grpc/grpc-js';
import type { Logger } from '../logger.js';
import { toServiceError } from './status.js';

/**
 * Wraps a unary handler so that it can be written as an async function of the request:
 * its result is the response, and anything it throws becomes a status through
 * toServiceError (domain errors keep their code and message; anything else is logged and
 * answered INTERNAL). Nothing escapes as an unhandled rejection.
 */
export function unary<Req, Res>(
  logger: Logger,
  method: string,
  fn: (req: Req, call: ServerUnaryCall<Req, Res>) => Promise<Res>,
): (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void {
  return (call, callback) => {
    fn(call.request, call).then(
      (res) => callback(null, res),
      (err: unknown) => callback(toServiceError(err, logger, { method })),
    );
  };
}

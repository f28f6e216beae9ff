import type { sendUnaryData, ServerUnaryCall } from '@grpc/grpc-js';
import type { Principal } from '../domain/auth.js';
import { authRefusalLog, callAuthenticate, methodAuthorize, methodName, methodPermission, type AuthContext } from './auth.js';
import { requestDecoded } from './request-decode.js';
import { toServiceError } from './status.js';

/**
 * Wraps a unary handler so that it can be written as an async function of the request and
 * its caller: every call is first authenticated (`authorization` metadata) and its role
 * checked against the method's permission (METHOD_PERMISSIONS in ./auth.ts); the handler
 * gets the Principal and checks queue scopes itself. Its result is the response, and
 * anything thrown becomes a status through toServiceError (domain errors keep their code
 * and message; anything else is logged and answered INTERNAL). A refusal
 * (UNAUTHENTICATED, PERMISSION_DENIED) is also logged as one warn line without the
 * secret. Nothing escapes as an unhandled rejection.
 *
 * `method` is the full path ("/evora.v1.JobService/SubmitJob", the definition's `path`);
 * a method without a permission fails here, when the service is built.
 */
export function unary<Req, Res>(
  ctx: AuthContext,
  method: string,
  fn: (req: Req, call: ServerUnaryCall<Req, Res>, principal: Principal) => Promise<Res>,
): (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void {
  methodPermission(method);
  const { logger } = ctx;
  const name = methodName(method);
  return (call, callback) => {
    let principal: Principal | null = null;
    callAuthenticate(ctx, call.metadata)
      .then((p) => {
        principal = p;
        methodAuthorize(p, method);
        return fn(requestDecoded(call.request), call, p);
      })
      .then(
        (res) => callback(null, res),
        (err: unknown) => {
          authRefusalLog(logger, method, principal, err, call.getPeer());
          callback(toServiceError(err, logger, { method: name }));
        },
      );
  };
}

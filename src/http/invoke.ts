import { EventEmitter } from 'node:events';
import { Metadata, status, type sendUnaryData, type ServerUnaryCall, type ServiceError } from '@grpc/grpc-js';

/**
 * The in-process door from an HTTP request to a gRPC unary handler: the very function the
 * gRPC server runs for the method (built by jobService(deps), queueService(deps), ... in
 * src/server/server.ts), given a call object shaped as grpc-js gives it. So
 * authentication, permissions, queue scopes, validation, audit and error mapping happen
 * once, inside the handler, for both transports. The call carries:
 *  - `request`: the ts-proto request (decoded by the method's own requestDeserialize);
 *  - `metadata`: the HTTP Authorization header as `authorization`;
 *  - `getPeer()`: the HTTP client's address (for the refusal log);
 *  - `'cancelled'`, emitted when the HTTP request is aborted (a bulk action stops between
 *    batches, a long-poll claim ends), and `cancelled` set then.
 * What must stay true: the handler answers through the callback exactly once; anything
 * else (a throw) is the adapter's bug and becomes INTERNAL, logged by the caller.
 */

/** A unary handler as grpc-js registers it (UntypedServiceImplementation's values). */
export type UnaryHandler = (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => void;

/** What the handler answered instead of a response: a gRPC status code and its details. */
export class RpcStatusError extends Error {
  constructor(
    readonly code: status,
    readonly details: string,
  ) {
    super(details);
    this.name = 'RpcStatusError';
  }
}

/** Where the call comes from and when it ends early. */
export interface InvokeContext {
  /** The Authorization header as received (undefined: none). */
  authorization: string | undefined;
  /** "ip:port" of the HTTP client. */
  peer: string;
  /** Aborted when the HTTP request is aborted (the client went away). */
  signal: AbortSignal;
}

/** What gRPC metadata may carry as text (grpc-js refuses anything else). */
const METADATA_TEXT = /^[ -~]*$/;

/**
 * What an Authorization header that is not printable ASCII goes on as. grpc-js's
 * Metadata.set throws on it with an error that repeats the value (a secret, into the error
 * log, answered 500); no bearer token has such a character, so the handler gets a value its
 * authenticator refuses as malformed (401) with auth on and ignores with auth off.
 */
const AUTHORIZATION_NOT_TEXT = 'malformed';

/** Runs `handler` on `request`; resolves with its response, rejects with RpcStatusError for a status it answered. */
export function invokeUnary(handler: UnaryHandler, request: unknown, ctx: InvokeContext): Promise<unknown> {
  const metadata = new Metadata();
  if (ctx.authorization !== undefined) {
    metadata.set('authorization', METADATA_TEXT.test(ctx.authorization) ? ctx.authorization : AUTHORIZATION_NOT_TEXT);
  }
  const emitter = new EventEmitter();
  const call = Object.assign(emitter, {
    request,
    metadata,
    cancelled: false,
    getPeer: () => ctx.peer,
    getPath: () => '',
    getDeadline: () => Infinity,
  });
  return new Promise<unknown>((resolve, reject) => {
    const onAbort = () => {
      call.cancelled = true;
      emitter.emit('cancelled', 'cancelled');
    };
    if (ctx.signal.aborted) onAbort();
    else ctx.signal.addEventListener('abort', onAbort, { once: true });
    const done = () => ctx.signal.removeEventListener('abort', onAbort);
    const callback: sendUnaryData<unknown> = (err, value) => {
      done();
      if (err) {
        const e = err as Partial<ServiceError>;
        reject(new RpcStatusError(e.code ?? status.UNKNOWN, e.details ?? e.message ?? 'error'));
      } else resolve(value);
    };
    try {
      handler(call as unknown as ServerUnaryCall<unknown, unknown>, callback);
    } catch (err) {
      done();
      reject(err instanceof Error ? err : new Error(String(err)));
    }
  });
}

import type * as grpc from '@grpc/grpc-js';
import { invalidArgument } from '../domain/errors.js';

/**
 * A request whose bytes did not decode into its message (an int64 beyond 2^53 where the
 * code reads a number, a Timestamp out of range, bytes that are not the message). grpc-js
 * answers a deserializer that throws with INTERNAL, which is for the server's own bugs; so
 * every method's deserializer returns this instead, and the handler refuses the request
 * with INVALID_ARGUMENT: a unary call in `unary()`, a stream message where the stream reads
 * it (and the HTTP API, which runs the same deserializers and handlers, alike).
 */
export class UndecodableRequest {
  constructor(readonly reason: string) {}
}

/** `req`, unless it did not decode: then INVALID_ARGUMENT saying why. */
export function requestDecoded<T>(req: T | UndecodableRequest): T {
  if (req instanceof UndecodableRequest) throw invalidArgument(`the request could not be decoded: ${req.reason}`);
  return req;
}

/** The definition with every method's request deserializer made tolerant (see UndecodableRequest). */
export function definitionTolerant<D extends grpc.ServiceDefinition>(definition: D): D {
  const out: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(definition) as [string, grpc.MethodDefinition<unknown, unknown>][]) {
    const decode = method.requestDeserialize;
    out[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        try {
          return decode(bytes);
        } catch (err) {
          const message = err instanceof Error ? err.message.split('\n')[0]!.slice(0, 200) : 'malformed message';
          return new UndecodableRequest(message);
        }
      },
    };
  }
  return out as D;
}

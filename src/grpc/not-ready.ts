import type { ServerDuplexStream, ServerUnaryCall, ServiceDefinition, UntypedServiceImplementation, sendUnaryData } from '@grpc/grpc-js';
import { serverStarting } from '../domain/errors.js';
import type { Logger } from '../logger.js';
import { toServiceError } from './status.js';

/**
 * Handlers for every method of a service that answer UNAVAILABLE with one readable line: what
 * a server serves while it is bound but not ready (it waits for the database and migrates
 * before its services start). Binding the port first makes a taken port fail before
 * anything else starts; registering these, rather than nothing, keeps early calls from
 * being answered UNIMPLEMENTED, a code clients do not retry. The server swaps in the real
 * implementation (removeService, addService, in one tick) once it is ready.
 */
export function serviceNotReady(definition: ServiceDefinition, logger: Logger): UntypedServiceImplementation {
  const answer = () => toServiceError(serverStarting(), logger);
  const handlers: UntypedServiceImplementation = {};
  for (const [name, method] of Object.entries(definition)) {
    // A streaming call ends with the status (as the Work stream ends one); a unary or
    // client-streaming call is answered with it.
    handlers[name] = method.responseStream
      ? (call: ServerDuplexStream<unknown, unknown>) => call.emit('error', answer())
      : (_call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => callback(answer());
  }
  return handlers;
}

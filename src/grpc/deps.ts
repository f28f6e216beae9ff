import type { Authenticator } from '../auth/authenticator.js';
import type { Dispatcher } from '../dispatcher/dispatcher.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import type { TelemetrySink } from '../telemetry/projection.js';
import type { ServerMetrics } from '../telemetry/metrics.js';
import type { OpenStreams } from './open-streams.js';

/**
 * What the gRPC services need from the composition root (src/server/server.ts). The
 * services translate protobuf to store and dispatcher calls and back; they own nothing
 * here but the streams they open.
 */
export interface ServiceDeps {
  store: Store;
  dispatcher: Dispatcher;
  logger: Logger;
  /** Authenticates every call (the token cache); the handlers authorize with src/grpc/auth.ts. */
  auth: Authenticator;
  maxPayloadBytes: number;
  /** The largest gRPC message the server receives (told to workers in the welcome, so they never write a larger one). */
  maxMessageBytes: number;
  /** How long a Work stream may stay open without its hello (EVORA_HELLO_TIMEOUT_MS). */
  helloTimeoutMs: number;
  /** Lease length told to workers whose queues are not configured yet. */
  defaultLeaseSeconds: number;
  /** Counters for submits (the dispatcher counts the rest). */
  metrics: ServerMetrics;
  /** Where stats are read from (never the queue tables). */
  telemetry: TelemetrySink;
  /** Open Work streams and SubmitJobStreams, so shutdown can end them after the drain. */
  streams: OpenStreams;
}

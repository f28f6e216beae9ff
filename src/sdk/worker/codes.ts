import { AckResult, DrainReason, LeaseLostReason, type ServerAck } from '../../gen/evora/v1/worker.js';
import type { AckResultName, DrainCause } from './types.js';

/**
 * The Work stream's codes as the worker acts on them. Protocol meaning travels in these
 * enums; the `reason` texts next to them are for logs only, and nothing in the SDK reads
 * them to decide anything.
 */

/**
 * What an ack means for its report. An older server sends no result (UNSPECIFIED): then
 * `accepted` decides, true = accepted and false = lease lost (what such a server meant by
 * every rejection). A result newer than this SDK is read the same way.
 */
export function ackResultOf(ack: ServerAck): AckResultName {
  switch (ack.result) {
    case AckResult.ACK_RESULT_ACCEPTED:
      return 'accepted';
    case AckResult.ACK_RESULT_LEASE_LOST:
      return 'lease_lost';
    case AckResult.ACK_RESULT_RETRY_LATER:
      return 'retry_later';
    case AckResult.ACK_RESULT_INVALID:
      return 'invalid';
    default:
      return ack.accepted ? 'accepted' : 'lease_lost';
  }
}

/** Why the server asked for a drain, as the `drain` event names it. */
export function drainCauseOf(code: DrainReason): DrainCause {
  return code === DrainReason.DRAIN_REASON_SERVER_SHUTDOWN ? 'server_shutdown' : 'unspecified';
}

/** The SDK's own words for a lost lease (the JobAbortedError message), by code. */
export function leaseLostText(code: LeaseLostReason): string {
  switch (code) {
    case LeaseLostReason.LEASE_LOST_REASON_NOT_HELD_ON_RECONNECT:
      return 'the lease was lost: it was no longer current when the worker reconnected';
    case LeaseLostReason.LEASE_LOST_REASON_EXPIRED:
      return 'the lease was lost: it expired or the job was given to another worker';
    default:
      return 'the lease was lost';
  }
}

/** The name of a lease-lost code, for logs. */
export function leaseLostName(code: LeaseLostReason): string {
  switch (code) {
    case LeaseLostReason.LEASE_LOST_REASON_EXPIRED:
      return 'expired';
    case LeaseLostReason.LEASE_LOST_REASON_NOT_HELD_ON_RECONNECT:
      return 'not_held_on_reconnect';
    default:
      return 'unspecified';
  }
}

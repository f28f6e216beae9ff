/**
 * What the server tells a worker, as codes. Protocol meaning travels in these (the gRPC
 * layer maps each to its proto enum in one place, src/grpc/convert.ts); the English text
 * that goes with them is for people and logs only, and no client may parse it.
 */

/** What became of one complete, fail or snooze report (proto AckResult). */
export type AckResult =
  /** Applied and committed. */
  | 'accepted'
  /** The lease is not current; nothing changed; the worker drops the job. */
  | 'lease_lost'
  /** Not applied now (e.g. the database is unavailable); the worker sends it again. */
  | 'retry_later'
  /** The report itself is malformed; resending it unchanged cannot succeed. */
  | 'invalid';

/** Why a worker no longer holds a lease (proto LeaseLostReason). */
export type LeaseLostReason =
  /** A heartbeat found the lease no longer current (expired, reclaimed, or the job finished). */
  | 'expired'
  /** A lease named in hello.held after a reconnect was no longer current. */
  | 'not_held_on_reconnect';

/**
 * Why a running job is being cancelled (proto CancelReason): an operator's CancelJob, or
 * its attempt ran past the job's timeout (the server already failed it).
 */
export type CancelReason = 'operator' | 'timeout';

/** Why the server asks a worker to drain (proto DrainReason). */
export type DrainReason = 'server_shutdown';

/** The words that go with each code in logs and in the proto's `reason` text fields. */
export const LEASE_LOST_TEXT: Record<LeaseLostReason, string> = {
  expired: 'the lease expired or the job was given to another worker',
  not_held_on_reconnect: 'the lease named in hello.held is no longer current',
};

/** The words that go with a drain. */
export const DRAIN_TEXT: Record<DrainReason, string> = {
  server_shutdown: 'server shutting down',
};

/** Queues as every layer sees them: their policy and the settings an operator changes. */

/** How a queue spaces out retries. */
export type BackoffKind = 'exponential' | 'linear' | 'fixed';

/** A queue's policy row. */
export interface Queue {
  name: string;
  maxAttempts: number;
  backoffKind: BackoffKind;
  backoffBaseSeconds: number;
  backoffCapSeconds: number;
  /** 0..1: the delay is spread uniformly over d*(1-jitter) .. d*(1+jitter), then capped. */
  backoffJitter: number;
  leaseSeconds: number;
  paused: boolean;
  maxConcurrency: number | null;
  createdAt: Date;
  updatedAt: Date;
  /**
   * Retention: how long a finished job of this queue is kept after it finished, per state,
   * in seconds; null = forever. The leader's pruner deletes it after that (never before).
   */
  completedRetentionSeconds: number | null;
  cancelledRetentionSeconds: number | null;
  dlqRetentionSeconds: number | null;
  /** The attempt timeout of jobs submitted without one, in seconds; null = none (0007_job_policy.sql). */
  attemptTimeoutSeconds: number | null;
  /** Job starts per second across all servers (a token bucket of `burst`); null = none. */
  rateLimit: RateLimit | null;
  /** At most this many RUNNING jobs per concurrency key, claims rotating across keys; null = none. */
  maxConcurrencyPerKey: number | null;
  /**
   * A completing job is deleted instead of kept COMPLETED (its `completed` event is still
   * written); one with dependents is kept. completedRetentionSeconds then applies only to
   * those (0015_delete_on_complete.sql).
   */
  deleteOnComplete: boolean;
}

/**
 * A rate limit: at most `burst` starts at once, refilled at `perSecond` (a token bucket that
 * starts full). Must stay true: perSecond is finite and > 0, burst >= 1 (validate.ts).
 */
export interface RateLimit {
  perSecond: number;
  burst: number;
}

/** Settings for queueUpsert; absent fields keep their current value (or the default on create). */
export interface QueueUpsertInput {
  name: string;
  maxAttempts?: number | null;
  backoffKind?: BackoffKind | null;
  backoffBaseSeconds?: number | null;
  backoffCapSeconds?: number | null;
  backoffJitter?: number | null;
  leaseSeconds?: number | null;
  /** null keeps the current value; 0 clears the limit. */
  maxConcurrency?: number | null;
  /** Retentions in seconds: null keeps the current value; 0 keeps finished jobs forever. */
  completedRetentionSeconds?: number | null;
  cancelledRetentionSeconds?: number | null;
  dlqRetentionSeconds?: number | null;
  /** null keeps the current value; 0 clears it (no default timeout). */
  attemptTimeoutSeconds?: number | null;
  /** null/absent keeps the current value; `{ perSecond: 0 }` clears the limit. */
  rateLimit?: RateLimit | null;
  /** null keeps the current value; 0 clears the per-key limit. */
  maxConcurrencyPerKey?: number | null;
  /** null keeps the current value (false for a new queue). */
  deleteOnComplete?: boolean | null;
}


/**
 * Jobs as every layer sees them: the states a job moves through, its row, and the inputs and
 * outcomes of the operations on it. The store maps rows to these; nothing here knows SQL or
 * protobuf.
 */

import type { BackoffKind } from './queue.js';

/**
 * The lifecycle states a job moves through; the database rejects any other change. WAITING:
 * a job whose parents have not all completed (docs/api.md "Dependencies").
 */
export type JobState = 'PENDING' | 'RUNNING' | 'COMPLETED' | 'DLQ' | 'CANCELLED' | 'WAITING';

/** All job states, in the order of the proto's JobState numbers (WAITING last); do not reorder. */
export const JOB_STATES: readonly JobState[] = ['PENDING', 'RUNNING', 'COMPLETED', 'DLQ', 'CANCELLED', 'WAITING'];

/** A JSON object, as job payloads and results are. */
export type JsonObject = { [key: string]: unknown };

/** A job row as the rest of the server sees it. */
export interface Job {
  id: string;
  queue: string;
  type: string;
  payload: JsonObject;
  state: JobState;
  priority: number;
  runAt: Date;
  attempt: number;
  maxAttempts: number;
  /** The fencing token of the current (or last) lease; a fresh value on every claim. */
  leaseToken: string | null;
  lockedUntil: Date | null;
  workerId: string | null;
  idempotencyKey: string | null;
  result: JsonObject | null;
  lastError: string | null;
  cancelRequestedAt: Date | null;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  /** The job's own backoff (null: the queue's); each null field is the queue's. */
  backoff: JobBackoff | null;
  /** The longest one attempt may run, heartbeats or not; null = no limit. */
  timeoutSeconds: number | null;
  /** The job's concurrency key (e.g. a tenant id); null = none (docs/api.md "Concurrency keys"). */
  concurrencyKey: string | null;
  // ----- dependencies (docs/api.md "Dependencies") -----
  /** The job's parents; null = none. */
  parentIds: JobParentIds;
  /** Set only on a claimed job with parents: each parent's result (null if it reported none), by parent id. */
  parentResults?: Record<string, JsonObject | null>;
  // Progress and checkpoints (docs/api.md "Progress and checkpoints").
  /** The last progress report stored (coalesced: at most about one a second); null = none. */
  progress?: JobProgress | null;
  /** The last checkpoint reported; it outlives its attempt and is handed to the next one. null = none. */
  checkpoint?: JsonObject | null;
  /**
   * The payload's JSON text as the store read it, when it read it as text (a claim does):
   * a push to a worker that takes payloads as JSON sends this text as it is, without
   * parsing it (docs/api.md "Payloads as JSON text"). Equal to `payload` as JSON.
   */
  payloadJson?: string;
}

/** A job's parents (distinct ids), or null for a job without parents. */
export type JobParentIds = string[] | null;

/**
 * A job's own retry delay policy (SubmitJobRequest.backoff). Each null field takes the
 * queue's value when the job fails, so a job can change only the kind, say.
 */
export interface JobBackoff {
  kind: BackoffKind | null;
  baseSeconds: number | null;
  capSeconds: number | null;
  /** 0..1, as Queue.backoffJitter. */
  jitter: number | null;
}


/** One job to submit. Absent fields take the queue's or the table's defaults. */
export interface JobSubmitInput {
  queue: string;
  type: string;
  payload?: JsonObject;
  /**
   * The payload as JSON object text, stored as sent (checkPayloadJson); when set, `payload`
   * is ignored. PostgreSQL parses it; text that is not JSON is INVALID_ARGUMENT.
   */
  payloadJson?: string | null;
  priority?: number;
  runAt?: Date | null;
  idempotencyKey?: string | null;
  /** 0 or absent: the queue's max_attempts. */
  maxAttempts?: number | null;
  /** Absent or null: the queue's backoff. */
  backoff?: JobBackoff | null;
  /** The attempt timeout in seconds (> 0); absent or null: none. */
  timeoutSeconds?: number | null;
  /** Groups the job for its queue's max_concurrency_per_key; absent, null or '': none. */
  concurrencyKey?: string | null;
  /** Ids of existing jobs this one runs after (checked UUIDs, distinct); absent or empty: none. */
  dependsOn?: string[] | null;
  /** This job's name within one SubmitJobs call, for its siblings' dependsOnRefs; absent or '': none. */
  ref?: string | null;
  /** Refs of jobs of the same call this one runs after (checked by checkDependencyRefs). */
  dependsOnRefs?: string[] | null;
}

/**
 * A batch submit answered with ids only: ids[i] and created[i] for the i-th job submitted
 * (the existing job's id on an idempotent replay, with created false).
 */
export interface JobSubmitIds {
  ids: string[];
  created: boolean[];
}

/** A submitted job and whether this call created it (false on an idempotent replay). */
export interface JobSubmitResult {
  job: Job;
  created: boolean;
}

/** A lease as a worker presents it: the job and the fencing token it was handed. */
export interface LeaseRef {
  id: string;
  token: string;
}

/**
 * A lease a heartbeat extended: the lease (one job may be named twice, by a stale and by
 * its current lease, so the token is part of what was extended), its new expiry, and
 * whether an operator asked to cancel its job.
 */
export interface LeaseExtended extends LeaseRef {
  lockedUntil: Date;
  cancelRequested: boolean;
}

/** What a heartbeat did: the leases it extended and, in input order, those that are lost. */
export interface HeartbeatOutcome {
  extended: LeaseExtended[];
  lost: LeaseRef[];
}

/** The answer to one worker write (complete, fail, snooze). */
export type LeaseWriteOutcome<J = Job> =
  | { id: string; accepted: true; job: J }
  | { id: string; accepted: false; reason: 'lease_lost' };

/**
 * What a worker's write reports about the job it changed: enough to acknowledge, count and
 * log it. A completion returns only this (reading back whole rows, timestamps and all, made
 * the completion statement ~30% more expensive); fail and snooze return the whole Job.
 */
export type JobWritten = Pick<Job, 'id' | 'queue' | 'type' | 'state' | 'attempt' | 'workerId' | 'lastError'> & { runAt?: Date };

/** Filters and page position for jobList. */
export interface JobListParams {
  queue?: string | null;
  states?: JobState[] | null;
  type?: string | null;
  /** Exact idempotency key; null or empty: any. */
  idempotencyKey?: string | null;
  /** Error group (evora.error_group of last_error, as checkErrorGroup allows); '' = jobs without an error; null or undefined: any. */
  errorGroup?: string | null;
  limit: number;
  /** Keyset cursor: the id of the last job of the previous page. */
  afterId?: string | null;
}


/** What one sweep did. */
export interface SweepResult {
  requeued: number;
  deadLettered: number;
  cancelled: number;
  jobs: Job[];
}

/** The states a job ends in; only these are ever pruned (retention, src/maintenance/pruner.ts). */
export type FinishedJobState = Extract<JobState, 'COMPLETED' | 'DLQ' | 'CANCELLED'>;

/** Jobs the pruner deleted in one batch, per queue and finished state (only non-zero counts). */
export interface PruneCount {
  queue: string;
  state: FinishedJobState;
  jobs: number;
}

/**
 * The states an operator's retry (RetryJob, RetryJobs) moves back to PENDING. The SQL of
 * both retries names the same list (sql/job-retry.sql, sql/job-retry-many.sql).
 */
export const RETRYABLE_STATES: readonly JobState[] = ['DLQ', 'CANCELLED'];

/**
 * The states an operator's cancel (CancelJob) takes: PENDING and WAITING end CANCELLED at
 * once, RUNNING when its worker gives it up. sql/job-cancel.sql names the same list.
 */
export const CANCELLABLE_STATES: readonly JobState[] = ['PENDING', 'WAITING', 'RUNNING'];

/**
 * The states a purge (PurgeJobs) or retention may delete: the finished ones, named one by
 * one so that a state added later (one a job waits in) is never purged by default.
 */
export const FINISHED_STATES: readonly FinishedJobState[] = ['COMPLETED', 'DLQ', 'CANCELLED'];

/**
 * Which jobs a bulk operator action (RetryJobs, PurgeJobs) touches, checked
 * (checkBulkFilter). Parts are ANDed; null = not filtered on that part. `states` is never
 * null: an unset state filter is every state the action may touch.
 */
export interface JobBulkFilter {
  queue: string | null;
  states: JobState[];
  type: string | null;
  /** Only jobs whose error group (evora.error_group of last_error) is this; null or absent: any. */
  errorGroup?: string | null;
  /** Only jobs that finished before this time. */
  finishedBefore: Date | null;
  /** Only these jobs. */
  ids: string[] | null;
}

/**
 * Dead-lettered jobs of one queue and type sharing an error group (ListDeadLetterGroups):
 * `error` is the group key, the first line of last_error cut to 200 characters ('' when none),
 * the value JobBulkFilter.errorGroup takes to act on the group.
 */
export interface DeadLetterGroup {
  queue: string;
  type: string;
  error: string;
  count: number;
  newestFinishedAt: Date;
}

/** One live worker session of some server (ListWorkers; 0014_worker_sessions.sql). */
export interface WorkerSessionInfo {
  sessionId: string;
  workerId: string;
  serverId: string;
  serverAddress: string;
  queues: string[];
  /** Empty: any type. */
  jobTypes: string[];
  slots: number;
  heldJobs: number;
  freeSlots: number;
  connectedAt: Date;
  lastSeenAt: Date;
}

// Progress and checkpoints, and attempt history (docs/api.md).

/** A job's last stored progress report (Job.progress). Either percent or done/total is set. */
export interface JobProgress {
  /** 0..100. */
  percent: number | null;
  done: number | null;
  total: number | null;
  /** Short text for people (at most MAX_PROGRESS_MESSAGE_LENGTH characters); '' = none. */
  message: string;
  /** The attempt that reported it (a report from an earlier attempt stays until a new one comes). */
  attempt: number;
  /** When the server received the report. */
  reportedAt: Date;
}

/** One progress report as a lease holder sends it (checked by checkProgressReport). */
export interface ProgressReport extends LeaseRef {
  percent: number | null;
  done: number | null;
  total: number | null;
  message: string;
  /** null = keep the stored checkpoint. */
  checkpoint: JsonObject | null;
  reportedAt: Date;
}

/** How an attempt ended (AttemptOutcome); RUNNING is the attempt still under way. */
export type AttemptOutcome = 'RUNNING' | 'COMPLETED' | 'FAILED' | 'TIMED_OUT' | 'LEASE_EXPIRED' | 'SNOOZED' | 'CANCELLED';

/** One attempt of a job, as the history shows it (oldest first). */
export interface JobAttempt {
  attempt: number;
  workerId: string | null;
  startedAt: Date | null;
  /** null while it runs. */
  finishedAt: Date | null;
  outcome: AttemptOutcome;
  /** The error it ended with; null = none. */
  error: string | null;
}

/**
 * The API's JSON shapes as the dashboard reads them: the proto3 JSON mapping of
 * proto/evora/v1 (lowerCamelCase, enums by name, int64 as strings, Timestamps RFC 3339,
 * Durations like "30s", unset fields omitted — so every field is optional here).
 */

/** A proto int64: a decimal string on the wire (a number is accepted too). */
export type Int64 = string | number;

export type JobState =
  | 'JOB_STATE_PENDING'
  | 'JOB_STATE_RUNNING'
  | 'JOB_STATE_COMPLETED'
  | 'JOB_STATE_DLQ'
  | 'JOB_STATE_CANCELLED'
  | 'JOB_STATE_WAITING';

/** Every state, in the order the UI lists them. */
export const JOB_STATES: readonly JobState[] = [
  'JOB_STATE_PENDING',
  'JOB_STATE_WAITING',
  'JOB_STATE_RUNNING',
  'JOB_STATE_COMPLETED',
  'JOB_STATE_DLQ',
  'JOB_STATE_CANCELLED',
];

export type BackoffKind = 'BACKOFF_KIND_EXPONENTIAL' | 'BACKOFF_KIND_LINEAR' | 'BACKOFF_KIND_FIXED';

export interface Backoff {
  kind?: BackoffKind;
  base?: string;
  cap?: string;
  jitter?: number;
}

export interface RateLimit {
  perSecond?: number;
  burst?: number;
}

export interface Queue {
  name: string;
  maxAttempts?: number;
  backoff?: Backoff;
  leaseSeconds?: number;
  paused?: boolean;
  maxConcurrency?: number;
  createdAt?: string;
  updatedAt?: string;
  rateLimit?: RateLimit;
  attemptTimeout?: string;
  maxConcurrencyPerKey?: number;
  completedRetention?: string;
  cancelledRetention?: string;
  dlqRetention?: string;
  deleteOnComplete?: boolean;
}

export interface Percentiles {
  p50Ms?: number;
  p95Ms?: number;
  p99Ms?: number;
}

export interface QueueStats {
  queue: string;
  pending?: Int64;
  running?: Int64;
  completed?: Int64;
  dlq?: Int64;
  cancelled?: Int64;
  waiting?: Int64;
  throughput?: { last1m?: number; last5m?: number; last60m?: number };
  wait?: Percentiles;
  run?: Percentiles;
  failureRate?: number;
  connectedWorkers?: number;
  freeSlots?: number;
  outboxLagEvents?: Int64;
  outboxLagEstimated?: boolean;
}

export interface SeriesPoint {
  minute: string;
  submitted?: Int64;
  completed?: Int64;
  failed?: Int64;
  deadLettered?: Int64;
  waitP50Ms?: number;
  waitP95Ms?: number;
  waitP99Ms?: number;
  runP50Ms?: number;
  runP95Ms?: number;
  runP99Ms?: number;
}

export interface JobProgress {
  percent?: number;
  done?: Int64;
  total?: Int64;
  message?: string;
  attempt?: number;
  reportedAt?: string;
}

export interface Job {
  id: string;
  queue?: string;
  type?: string;
  payload?: unknown;
  state?: JobState;
  priority?: number;
  attempt?: number;
  maxAttempts?: number;
  runAt?: string;
  createdAt?: string;
  startedAt?: string;
  finishedAt?: string;
  idempotencyKey?: string;
  workerId?: string;
  result?: unknown;
  lastError?: string;
  cancelRequested?: boolean;
  leaseExpiresAt?: string;
  concurrencyKey?: string;
  dependsOn?: string[];
  progress?: JobProgress;
}

export type AttemptOutcome =
  | 'ATTEMPT_OUTCOME_RUNNING'
  | 'ATTEMPT_OUTCOME_COMPLETED'
  | 'ATTEMPT_OUTCOME_FAILED'
  | 'ATTEMPT_OUTCOME_TIMED_OUT'
  | 'ATTEMPT_OUTCOME_LEASE_EXPIRED'
  | 'ATTEMPT_OUTCOME_SNOOZED'
  | 'ATTEMPT_OUTCOME_CANCELLED';

export interface JobAttempt {
  attempt?: number;
  workerId?: string;
  startedAt?: string;
  finishedAt?: string;
  outcome?: AttemptOutcome;
  error?: string;
}

/** GET /v1/jobs/{id}. */
export interface GetJobResponse {
  job: Job;
  attempts?: JobAttempt[];
  dependents?: string[];
}

export interface ListJobsResponse {
  jobs?: Job[];
  nextPageToken?: string;
}

/** The selection of a bulk retry or purge; at least one part must be set. */
export interface JobFilter {
  queue?: string;
  states?: JobState[];
  type?: string;
  ids?: string[];
  errorGroup?: string;
  /** RFC 3339; only jobs that finished before it (a dry run's answer bounds its confirm so). */
  finishedBefore?: string;
}

export interface DeadLetterGroup {
  queue: string;
  type?: string;
  error?: string;
  count?: Int64;
  newestFinishedAt?: string;
}

/**
 * ListDeadLetterGroups' answer. `truncated`: more DLQ jobs exist than the server groups (only
 * the newest 10,000), so every count covers only those and is a lower bound.
 */
export interface ListDeadLetterGroupsResponse {
  groups?: DeadLetterGroup[];
  truncated?: boolean;
  /** How many groups there were before the limit cut the list. */
  totalGroups?: number;
}

export interface Worker {
  workerId: string;
  serverId?: string;
  queues?: string[];
  jobTypes?: string[];
  slots?: number;
  heldJobs?: number;
  connectedAt?: string;
  lastSeenAt?: string;
}

export interface Schedule {
  name: string;
  cron?: string;
  timezone?: string;
  queue?: string;
  type?: string;
  paused?: boolean;
  nextRunAt?: string;
  lastRunAt?: string;
  lastJobId?: string;
}

export type TokenRole = 'TOKEN_ROLE_PRODUCER' | 'TOKEN_ROLE_WORKER' | 'TOKEN_ROLE_VIEWER' | 'TOKEN_ROLE_ADMIN';

/** GET /v1/caller: who the server thinks we are. */
export interface Caller {
  authOn?: boolean;
  kind?: string;
  name?: string;
  role?: TokenRole;
  queues?: string[];
}

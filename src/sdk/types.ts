// Over 400 lines on purpose: every SDK type and its one translation from and to protobuf, in one
// place, so that a field is added in one file.
import {
  AttemptOutcome as PbAttemptOutcome,
  JobState as PbJobState,
  type DeadLetterGroup as PbDeadLetterGroup,
  type Job as PbJob,
  type JobAttempt as PbJobAttempt,
} from '../gen/evora/v1/job.js';
import { BackoffKind as PbBackoffKind, type Queue as PbQueue, type QueueSeriesPoint as PbQueueSeriesPoint, type QueueStats as PbQueueStats } from '../gen/evora/v1/queue.js';
import type { WorkerInfo as PbWorkerInfo } from '../gen/evora/v1/worker.js';
import { MisfirePolicy as PbMisfirePolicy, type Schedule as PbSchedule } from '../gen/evora/v1/schedule.js';
import type { Duration } from '../gen/google/protobuf/duration.js';
import { int32Check } from './checks.js';
import {
  AuditAction as PbAuditAction,
  AuditActorKind as PbAuditActorKind,
  TokenRole as PbTokenRole,
  type AuditEvent as PbAuditEvent,
  type GetCallerResponse as PbGetCallerResponse,
  type Token as PbToken,
} from '../gen/evora/v1/auth.js';

/**
 * The SDK's domain types: plain objects with string states, `Date`s and `null` for
 * "not set", translated from the generated protobuf types in one place.
 */

/** A JSON value, as payloads and results carry. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
/** A JSON object: what a job's payload and result are. */
export type JsonObject = { [key: string]: JsonValue };

/** The lifecycle state of a job. */
export type JobStateName = 'PENDING' | 'RUNNING' | 'COMPLETED' | 'DLQ' | 'CANCELLED' | 'WAITING';
/** Every state, in lifecycle order (WAITING, for unfinished parents, last as on the wire). */
export const JOB_STATES: readonly JobStateName[] = ['PENDING', 'RUNNING', 'COMPLETED', 'DLQ', 'CANCELLED', 'WAITING'];

/** A job as the server reports it. */
export interface Job<P = JsonObject, R = JsonObject> {
  id: string;
  queue: string;
  type: string;
  payload: P;
  state: JobStateName;
  /** Smaller runs first. */
  priority: number;
  /** Attempts started so far (1 while the first attempt runs). */
  attempt: number;
  maxAttempts: number;
  /** Earliest time the job may run (next run or retry while PENDING). */
  runAt: Date | null;
  createdAt: Date | null;
  /** When the current (or last) attempt was leased. */
  startedAt: Date | null;
  finishedAt: Date | null;
  idempotencyKey: string | null;
  /** The concurrency key it was submitted with, or null (not sent to workers with a lease). */
  concurrencyKey: string | null;
  /** The worker that holds (or last held) the job. */
  workerId: string | null;
  /** What the worker reported on completion. */
  result: R | null;
  /** The error of the most recent failed attempt. */
  lastError: string | null;
  /** An operator asked to cancel the job while it was RUNNING. */
  cancelRequested: boolean;
  /** When the current lease ends (RUNNING only). */
  leaseExpiresAt: Date | null;
  /** The ids of the jobs this one runs after (its parents); empty for none. */
  dependsOn: string[];
  /** The last stored progress report (coalesced: about one a second is stored); null = none. */
  progress: JobProgress | null;
}

// Progress and attempt history (docs/api.md "Progress and checkpoints", "Attempt history").

/** A job's last stored progress report. */
export interface JobProgress {
  /** 0..100, or null when counts were reported. */
  percent: number | null;
  done: number | null;
  total: number | null;
  message: string;
  /** The attempt that reported it. */
  attempt: number;
  reportedAt: Date | null;
}

/** What a worker reports: percent (0..100) or done/total, a short message, a checkpoint. */
export interface ProgressInput {
  percent?: number;
  done?: number;
  total?: number;
  /** At most PROGRESS_MESSAGE_MAX characters. */
  message?: string;
  /** A JSON object the next attempt gets as ctx.checkpoint if this one fails. */
  checkpoint?: unknown;
}

/** Longest progress message the server takes. */
export const PROGRESS_MESSAGE_MAX = 256;

/** How an attempt ended ('RUNNING': it still runs). */
export type AttemptOutcomeName = 'RUNNING' | 'COMPLETED' | 'FAILED' | 'TIMED_OUT' | 'LEASE_EXPIRED' | 'SNOOZED' | 'CANCELLED';

/** One attempt of a job (EvoraClient.attempts). */
export interface JobAttempt {
  attempt: number;
  workerId: string | null;
  startedAt: Date | null;
  /** null while it runs. */
  finishedAt: Date | null;
  outcome: AttemptOutcomeName;
  /** The error it ended with; null = none. */
  error: string | null;
}

/**
 * A job with what GetJob answers beside it (EvoraClient.getDetails): its attempts, oldest
 * first, and the ids of its direct children (jobs whose dependsOn names it), oldest first, at
 * most 1,000.
 */
export interface JobDetails<P = JsonObject, R = JsonObject> {
  job: Job<P, R>;
  attempts: JobAttempt[];
  dependents: string[];
}

const ATTEMPT_OUTCOME_FROM_PB = new Map<PbAttemptOutcome, AttemptOutcomeName>([
  [PbAttemptOutcome.ATTEMPT_OUTCOME_RUNNING, 'RUNNING'],
  [PbAttemptOutcome.ATTEMPT_OUTCOME_COMPLETED, 'COMPLETED'],
  [PbAttemptOutcome.ATTEMPT_OUTCOME_FAILED, 'FAILED'],
  [PbAttemptOutcome.ATTEMPT_OUTCOME_TIMED_OUT, 'TIMED_OUT'],
  [PbAttemptOutcome.ATTEMPT_OUTCOME_LEASE_EXPIRED, 'LEASE_EXPIRED'],
  [PbAttemptOutcome.ATTEMPT_OUTCOME_SNOOZED, 'SNOOZED'],
  [PbAttemptOutcome.ATTEMPT_OUTCOME_CANCELLED, 'CANCELLED'],
]);

/** The wire's JobAttempt as the SDK's plain object. */
export function jobAttemptFromPb(pb: PbJobAttempt): JobAttempt {
  const outcome = ATTEMPT_OUTCOME_FROM_PB.get(pb.outcome);
  if (!outcome) throw new Error(`the server sent an unknown attempt outcome (${pb.outcome}); this SDK is older than the server`);
  return {
    attempt: pb.attempt,
    workerId: pb.workerId || null,
    startedAt: pb.startedAt ?? null,
    finishedAt: pb.finishedAt ?? null,
    outcome,
    error: pb.error || null,
  };
}

/**
 * A progress report as the wire's fields; throws TypeError/RangeError for what the server
 * would refuse (percent outside 0..100, done > total, both kinds, a long message, nothing at all).
 */
export function progressToPb(p: ProgressInput): {
  percent?: number;
  done?: number;
  total?: number;
  message: string;
  checkpoint?: JsonObject;
} {
  if (p.percent !== undefined && (p.done !== undefined || p.total !== undefined)) throw new TypeError('progress takes percent or done/total, not both');
  if (p.percent !== undefined && !(p.percent >= 0 && p.percent <= 100)) throw new RangeError(`percent must be from 0 to 100, got ${p.percent}`);
  if ((p.done === undefined) !== (p.total === undefined)) throw new TypeError('done and total must be given together');
  if (p.done !== undefined && p.total !== undefined) {
    if (!Number.isSafeInteger(p.done) || !Number.isSafeInteger(p.total) || p.done < 0 || p.done > p.total) {
      throw new RangeError(`done and total must be integers with 0 <= done <= total, got ${p.done}/${p.total}`);
    }
  }
  const message = p.message ?? '';
  if (p.percent === undefined && p.done === undefined && p.total === undefined && message === '' && p.checkpoint === undefined) {
    throw new TypeError('progress report is empty: give percent, done and total, a message or a checkpoint');
  }
  // Characters are code points, as the server counts them (an emoji is one, not two).
  if (message.length > PROGRESS_MESSAGE_MAX && [...message].length > PROGRESS_MESSAGE_MAX) throw new RangeError(`progress message is longer than ${PROGRESS_MESSAGE_MAX} characters`);
  return {
    ...(p.percent !== undefined ? { percent: p.percent } : {}),
    ...(p.done !== undefined ? { done: p.done, total: p.total } : {}),
    message,
    ...(p.checkpoint !== undefined ? { checkpoint: toJsonObject(p.checkpoint, 'checkpoint') } : {}),
  };
}

/** How the delay before a retry grows with the attempt number. */
export type BackoffKindName = 'exponential' | 'linear' | 'fixed';
/** Every backoff kind, as the SDK names them. */
export const BACKOFF_KINDS: readonly BackoffKindName[] = ['exponential', 'linear', 'fixed'];

/** A queue's retry delay policy. */
export interface Backoff {
  kind: BackoffKindName;
  /** Delay before the first retry, in seconds. */
  baseSeconds: number;
  /** Upper bound of any delay, in seconds. */
  capSeconds: number;
  /** Random spread as a fraction of the delay (0..1). */
  jitter: number;
}

/** A queue and its settings. */
export interface Queue {
  name: string;
  /** Default max attempts for jobs submitted without one. */
  maxAttempts: number;
  backoff: Backoff;
  leaseSeconds: number;
  paused: boolean;
  /** Maximum RUNNING jobs across all workers and servers; 0 = unlimited. Enforced by every lease. */
  maxConcurrency: number;
  /** Job starts per second across all servers, or null for none (see RateLimit). */
  rateLimit: RateLimit | null;
  createdAt: Date | null;
  updatedAt: Date | null;
  /**
   * Retention, in seconds: a COMPLETED, CANCELLED or DLQ job is kept at least this long after
   * it finished, then the server deletes it; 0 = kept forever.
   */
  completedRetentionSeconds: number;
  cancelledRetentionSeconds: number;
  dlqRetentionSeconds: number;
  /** The attempt timeout of jobs submitted without `timeoutSeconds`, in seconds; 0 = none. */
  attemptTimeoutSeconds: number;
  /** Most RUNNING jobs per concurrency key; 0 = no per-key limit. */
  maxConcurrencyPerKey: number;
  /** Jobs are deleted at completion (but those with dependents); completedRetentionSeconds applies to those kept. */
  deleteOnComplete: boolean;
}

/**
 * A queue's rate limit: at most `burst` starts at once, refilled at `perSecond` (a token
 * bucket that starts full); every start counts, on every server. Held-back jobs stay PENDING.
 */
export interface RateLimit {
  /** Starts per second (> 0; 0 in settings clears the limit). */
  perSecond: number;
  /** Most starts at once (>= 1 with a rate). */
  burst: number;
}

/** Latency percentiles in milliseconds (0 without data). */
export interface Percentiles {
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
}

/** A queue's telemetry, as GetQueueStats reports it (eventually consistent). */
export interface QueueStats {
  queue: string;
  counts: Record<JobStateName, number>;
  /** Completed jobs per second over the last 1, 5 and 60 minutes. */
  throughput: { last1m: number; last5m: number; last60m: number };
  /** Claimable to claimed, over the last 60 minutes. */
  wait: Percentiles;
  /** Claimed to finished, over the last 60 minutes. */
  run: Percentiles;
  /** Failed attempts / (completed + failed attempts) over the last 60 minutes. */
  failureRate: number;
  /**
   * Work-stream sessions taking jobs from this queue on every server of the cluster, and
   * their free slots, as last recorded (up to about 5 s old; listWorkers lists them).
   */
  connectedWorkers: number;
  freeSlots: number;
  submitted60m: number;
  completed60m: number;
  failed60m: number;
  deadLettered60m: number;
  /** Events not yet projected: how far these numbers may lag (an estimate when outboxLagEstimated). */
  outboxLagEvents: number;
  /** outboxLagEvents is an estimate: the outbox is long (the telemetry store has been away). */
  outboxLagEstimated: boolean;
}

/** Converts the protobuf QueueStats. */
export function queueStatsFromPb(pb: PbQueueStats): QueueStats {
  const pct = (p: PbQueueStats['wait']) => ({ p50Ms: p?.p50Ms ?? 0, p95Ms: p?.p95Ms ?? 0, p99Ms: p?.p99Ms ?? 0 });
  return {
    queue: pb.queue,
    counts: { PENDING: pb.pending, RUNNING: pb.running, COMPLETED: pb.completed, DLQ: pb.dlq, CANCELLED: pb.cancelled, WAITING: pb.waiting },
    throughput: { last1m: pb.throughput?.last1m ?? 0, last5m: pb.throughput?.last5m ?? 0, last60m: pb.throughput?.last60m ?? 0 },
    wait: pct(pb.wait),
    run: pct(pb.run),
    failureRate: pb.failureRate,
    connectedWorkers: pb.connectedWorkers,
    freeSlots: pb.freeSlots,
    submitted60m: pb.submitted60m,
    completed60m: pb.completed60m,
    failed60m: pb.failed60m,
    deadLettered60m: pb.deadLettered60m,
    outboxLagEvents: pb.outboxLagEvents,
    outboxLagEstimated: pb.outboxLagEstimated,
  };
}

/**
 * One minute of a queue's telemetry (EvoraClient.queueSeries), from the telemetry store:
 * eventually consistent, as QueueStats. Percentiles are histogram bin edges (within about
 * 19%), 0 when the minute had no such event.
 */
export interface QueueSeriesPoint {
  /** Start of the minute (UTC). */
  minute: Date;
  submitted: number;
  completed: number;
  /** Failed attempts (retried, expired, dead-lettered). */
  failed: number;
  deadLettered: number;
  /** Claimable to claimed, of the jobs claimed in the minute. */
  wait: Percentiles;
  /** Claimed to finished, of the attempts finished in the minute. */
  run: Percentiles;
}

/** Converts the protobuf QueueSeriesPoint; a point without its minute is a server fault, and throws. */
export function queueSeriesPointFromPb(pb: PbQueueSeriesPoint): QueueSeriesPoint {
  if (!pb.minute) throw new Error("GetQueueSeries: the server's answer has a point without its minute");
  return {
    minute: pb.minute,
    submitted: pb.submitted,
    completed: pb.completed,
    failed: pb.failed,
    deadLettered: pb.deadLettered,
    wait: { p50Ms: pb.waitP50Ms, p95Ms: pb.waitP95Ms, p99Ms: pb.waitP99Ms },
    run: { p50Ms: pb.runP50Ms, p95Ms: pb.runP95Ms, p99Ms: pb.runP99Ms },
  };
}

/**
 * One worker's open Work stream (EvoraClient.listWorkers), as the server holding it last
 * recorded it (every 5 s while it lives): `heldJobs` and `lastSeenAt` may be that old.
 */
export interface WorkerInfo {
  /** The id the worker chose (its hello), as jobs' `workerId` names it. */
  workerId: string;
  /** The stream's session; a reconnecting worker gets a new one. */
  sessionId: string;
  /** The server holding the stream (made at that server's start) and its gRPC address. */
  serverId: string;
  serverAddress: string;
  /** The queues it takes jobs from (for a token limited to queues: only those of its queues). */
  queues: string[];
  /** The job types it runs; empty = any. */
  jobTypes: string[];
  /** Jobs it may hold at once, and those it held when last recorded. */
  slots: number;
  heldJobs: number;
  connectedAt: Date | null;
  lastSeenAt: Date | null;
}

/** Converts the protobuf WorkerInfo. */
export function workerInfoFromPb(pb: PbWorkerInfo): WorkerInfo {
  return {
    workerId: pb.workerId,
    sessionId: pb.sessionId,
    serverId: pb.serverId,
    serverAddress: pb.serverAddress,
    queues: pb.queues,
    jobTypes: pb.jobTypes,
    slots: pb.slots,
    heldJobs: pb.heldJobs,
    connectedAt: pb.connectedAt ?? null,
    lastSeenAt: pb.lastSeenAt ?? null,
  };
}

/**
 * The DLQ jobs of one queue and type that failed with the same error
 * (EvoraClient.deadLetterGroups). `error` is the group's key: pass it as
 * `BulkJobFilter.errorGroup` (with the queue, the type and `states: 'DLQ'`) to retry or
 * purge exactly this group.
 */
export interface DeadLetterGroup {
  queue: string;
  type: string;
  /** The first line of the jobs' last error, at most 200 characters; '' for jobs without one. */
  error: string;
  /** Its jobs among the newest 10,000 DLQ jobs grouped. */
  count: number;
  /** When the newest of them was dead-lettered. */
  newestFinishedAt: Date | null;
}

/** Converts the protobuf DeadLetterGroup. */
export function deadLetterGroupFromPb(pb: PbDeadLetterGroup): DeadLetterGroup {
  return { queue: pb.queue, type: pb.type, error: pb.error, count: pb.count, newestFinishedAt: pb.newestFinishedAt ?? null };
}

const STATE_FROM_PB = new Map<PbJobState, JobStateName>([
  [PbJobState.JOB_STATE_PENDING, 'PENDING'],
  [PbJobState.JOB_STATE_RUNNING, 'RUNNING'],
  [PbJobState.JOB_STATE_COMPLETED, 'COMPLETED'],
  [PbJobState.JOB_STATE_DLQ, 'DLQ'],
  [PbJobState.JOB_STATE_CANCELLED, 'CANCELLED'],
  [PbJobState.JOB_STATE_WAITING, 'WAITING'],
]);
const STATE_TO_PB = new Map<JobStateName, PbJobState>([...STATE_FROM_PB].map(([k, v]) => [v, k]));

/** Parses a state name, case-insensitively ('dlq', 'Running'). Throws TypeError for unknown names. */
export function jobStateParse(name: string): JobStateName {
  const upper = name.trim().toUpperCase();
  const state = JOB_STATES.find((s) => s === upper);
  if (!state) throw new TypeError(`unknown job state "${name}" (expected one of ${JOB_STATES.join(', ')})`);
  return state;
}

/** A state name as the wire's enum; throws TypeError for a name that is not a state. */
export function jobStateToPb(state: JobStateName): PbJobState {
  const pb = STATE_TO_PB.get(state);
  if (pb === undefined) throw new TypeError(`unknown job state "${String(state)}"`);
  return pb;
}

/** The wire's state enum as a name; a value this SDK does not know means the server is newer, and throws. */
export function jobStateFromPb(state: PbJobState): JobStateName {
  const name = STATE_FROM_PB.get(state);
  if (!name) throw new Error(`the server sent an unknown job state (${state}); this SDK is older than the server`);
  return name;
}

/** The wire's Job as the SDK's plain object: empty strings and unset messages become null. */
export function jobFromPb<P = JsonObject, R = JsonObject>(pb: PbJob, payloadJson?: Uint8Array): Job<P, R> {
  return {
    id: pb.id,
    queue: pb.queue,
    type: pb.type,
    // A push to a worker that asked for payloads as JSON text carries it beside the job (LeasedJob.payload_json).
    payload: (payloadJson === undefined ? (pb.payload ?? {}) : JSON.parse(utf8Text(payloadJson))) as P,
    state: jobStateFromPb(pb.state),
    priority: pb.priority,
    attempt: pb.attempt,
    maxAttempts: pb.maxAttempts,
    runAt: pb.runAt ?? null,
    createdAt: pb.createdAt ?? null,
    startedAt: pb.startedAt ?? null,
    finishedAt: pb.finishedAt ?? null,
    idempotencyKey: pb.idempotencyKey || null,
    concurrencyKey: pb.concurrencyKey || null,
    workerId: pb.workerId || null,
    result: (pb.result ?? null) as R | null,
    lastError: pb.lastError || null,
    cancelRequested: pb.cancelRequested,
    leaseExpiresAt: pb.leaseExpiresAt ?? null,
    dependsOn: pb.dependsOn,
    progress: pb.progress
      ? {
          percent: pb.progress.percent ?? null,
          done: pb.progress.done ?? null,
          total: pb.progress.total ?? null,
          message: pb.progress.message,
          attempt: pb.progress.attempt,
          reportedAt: pb.progress.reportedAt ?? null,
        }
      : null,
  };
}

const BACKOFF_FROM_PB = new Map<PbBackoffKind, BackoffKindName>([
  [PbBackoffKind.BACKOFF_KIND_EXPONENTIAL, 'exponential'],
  [PbBackoffKind.BACKOFF_KIND_LINEAR, 'linear'],
  [PbBackoffKind.BACKOFF_KIND_FIXED, 'fixed'],
]);

/** A backoff kind as the wire's enum (undefined = unspecified: the server decides). */
export function backoffKindToPb(kind: BackoffKindName | undefined): PbBackoffKind {
  if (kind === undefined) return PbBackoffKind.BACKOFF_KIND_UNSPECIFIED;
  for (const [pb, name] of BACKOFF_FROM_PB) if (name === kind) return pb;
  throw new TypeError(`unknown backoff kind "${String(kind)}" (expected one of ${BACKOFF_KINDS.join(', ')})`);
}

/** Seconds (fractions allowed) as a protobuf Duration. */
export function secondsToDuration(seconds: number): Duration {
  const whole = Math.floor(seconds);
  return { seconds: whole, nanos: Math.round((seconds - whole) * 1e9) };
}

/** A protobuf Duration as seconds (unset = 0). */
export function durationToSeconds(d: Duration | undefined): number {
  return d ? d.seconds + d.nanos / 1e9 : 0;
}

/** The wire's Queue as the SDK's plain object (an unset backoff kind reads as exponential, the server's default). */
export function queueFromPb(pb: PbQueue): Queue {
  return {
    name: pb.name,
    maxAttempts: pb.maxAttempts,
    backoff: {
      kind: (pb.backoff && BACKOFF_FROM_PB.get(pb.backoff.kind)) || 'exponential',
      baseSeconds: durationToSeconds(pb.backoff?.base),
      capSeconds: durationToSeconds(pb.backoff?.cap),
      jitter: pb.backoff?.jitter ?? 0,
    },
    leaseSeconds: pb.leaseSeconds,
    paused: pb.paused,
    maxConcurrency: pb.maxConcurrency,
    rateLimit: pb.rateLimit && pb.rateLimit.perSecond > 0 ? { perSecond: pb.rateLimit.perSecond, burst: pb.rateLimit.burst } : null,
    createdAt: pb.createdAt ?? null,
    updatedAt: pb.updatedAt ?? null,
    completedRetentionSeconds: durationToSeconds(pb.completedRetention),
    cancelledRetentionSeconds: durationToSeconds(pb.cancelledRetention),
    dlqRetentionSeconds: durationToSeconds(pb.dlqRetention),
    attemptTimeoutSeconds: durationToSeconds(pb.attemptTimeout),
    maxConcurrencyPerKey: pb.maxConcurrencyPerKey,
    deleteOnComplete: pb.deleteOnComplete,
  };
}

/**
 * A value as the JSON object the wire carries: Dates become ISO strings, undefined
 * properties disappear. Throws TypeError if it is not a JSON object (or not serializable).
 */
export function toJsonObject(value: unknown, what: string): JsonObject {
  return toJsonObjectSized(value, what).json;
}

/** toJsonObject, and the length of the JSON text (a cheap bound on its size on the wire). */
export function toJsonObjectSized(value: unknown, what: string): { json: JsonObject; length: number; text: string } {
  let json: unknown;
  let text: string;
  try {
    text = JSON.stringify(value) ?? 'null';
    json = JSON.parse(text);
  } catch (err) {
    throw new TypeError(`${what} is not JSON-serializable: ${(err as Error).message}`);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new TypeError(`${what} must be a JSON object`);
  }
  return { json: json as JsonObject, length: text.length, text };
}

/** UTF-8 bytes as text (a Buffer's own decoder when they are one, as the Work stream's are). */
function utf8Text(bytes: Uint8Array): string {
  return (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)).toString('utf8');
}

/**
 * A payload as the JSON object text a submit sends (SubmitJobRequest.payload_json): one
 * JSON.stringify, no round trip through a Struct. TypeError when it is not an object.
 */
export function toJsonObjectText(value: unknown, what: string): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new TypeError(`${what} is not JSON-serializable: ${(err as Error).message}`);
  }
  if (text === undefined || text.charCodeAt(0) !== 0x7b /* { */) throw new TypeError(`${what} must be a JSON object`);
  return text;
}

/** What a schedule does with fire times it reaches late (docs/api.md, "Schedules"). */
export type MisfirePolicyName = 'skip' | 'run_once' | 'run_each';
/** Every misfire policy. */
export const MISFIRE_POLICIES: readonly MisfirePolicyName[] = ['skip', 'run_once', 'run_each'];

const MISFIRE_TO_PB: Record<MisfirePolicyName, PbMisfirePolicy> = {
  skip: PbMisfirePolicy.MISFIRE_POLICY_SKIP,
  run_once: PbMisfirePolicy.MISFIRE_POLICY_RUN_ONCE,
  run_each: PbMisfirePolicy.MISFIRE_POLICY_RUN_EACH,
};

/** A recurring schedule as the server reports it. */
export interface Schedule<P = JsonObject> {
  name: string;
  /** 5 fields, or 6 with leading seconds. */
  cron: string;
  /** IANA time zone the cron expression is read in. */
  timezone: string;
  queue: string;
  type: string;
  payload: P;
  priority: number;
  /** 0 = the queue's default. */
  maxAttempts: number;
  misfirePolicy: MisfirePolicyName;
  /** RUN_EACH submits at most this many missed fires. */
  misfireCap: number;
  paused: boolean;
  nextRunAt: Date | null;
  lastRunAt: Date | null;
  lastJobId: string | null;
  createdAt: Date | null;
  updatedAt: Date | null;
}

/** What upsertSchedule sets; unset fields take their defaults (the schedule is replaced whole). */
export interface ScheduleInput<P = JsonObject> {
  name: string;
  cron: string;
  /** Default "UTC". */
  timezone?: string;
  queue: string;
  type: string;
  /** Default {}. */
  payload?: P;
  priority?: number;
  maxAttempts?: number;
  /** Default 'run_once'. */
  misfirePolicy?: MisfirePolicyName;
  /** Default 100 (1..1000). */
  misfireCap?: number;
}

/** A schedule's input as the wire's Schedule. */
export function scheduleToPb<P>(s: ScheduleInput<P>): PbSchedule {
  return {
    name: s.name,
    cron: s.cron,
    timezone: s.timezone ?? '',
    queue: s.queue,
    type: s.type,
    payload: s.payload === undefined ? {} : toJsonObject(s.payload, 'schedule.payload'),
    priority: s.priority === undefined ? 0 : int32Check(s.priority, 'schedule.priority'),
    maxAttempts: s.maxAttempts === undefined ? 0 : int32Check(s.maxAttempts, 'schedule.maxAttempts'),
    misfirePolicy: s.misfirePolicy === undefined ? PbMisfirePolicy.MISFIRE_POLICY_UNSPECIFIED : MISFIRE_TO_PB[s.misfirePolicy],
    misfireCap: s.misfireCap === undefined ? 0 : int32Check(s.misfireCap, 'schedule.misfireCap'),
    paused: false,
    lastJobId: '',
  };
}

/** A schedule from the wire. */
export function scheduleFromPb<P = JsonObject>(pb: PbSchedule): Schedule<P> {
  const policy = (Object.keys(MISFIRE_TO_PB) as MisfirePolicyName[]).find((k) => MISFIRE_TO_PB[k] === pb.misfirePolicy);
  return {
    name: pb.name,
    cron: pb.cron,
    timezone: pb.timezone,
    queue: pb.queue,
    type: pb.type,
    payload: (pb.payload ?? {}) as P,
    priority: pb.priority,
    maxAttempts: pb.maxAttempts,
    misfirePolicy: policy ?? 'run_once',
    misfireCap: pb.misfireCap,
    paused: pb.paused,
    nextRunAt: pb.nextRunAt ?? null,
    lastRunAt: pb.lastRunAt ?? null,
    lastJobId: pb.lastJobId || null,
    createdAt: pb.createdAt ?? null,
    updatedAt: pb.updatedAt ?? null,
  };
}

// ----- API tokens and the audit log (docs/security.md) --------------------------------

/** What a token may do (TokenRole in auth.proto). */
export type TokenRoleName = 'producer' | 'worker' | 'viewer' | 'admin';
/** Every role, weakest first. */
export const TOKEN_ROLES: readonly TokenRoleName[] = ['producer', 'worker', 'viewer', 'admin'];

const TOKEN_ROLE_TO_PB: Record<TokenRoleName, PbTokenRole> = {
  producer: PbTokenRole.TOKEN_ROLE_PRODUCER,
  worker: PbTokenRole.TOKEN_ROLE_WORKER,
  viewer: PbTokenRole.TOKEN_ROLE_VIEWER,
  admin: PbTokenRole.TOKEN_ROLE_ADMIN,
};

/** A role name as the proto enum; throws on an unknown name (case-insensitive). */
export function tokenRoleToPb(role: string): PbTokenRole {
  const pb = TOKEN_ROLE_TO_PB[role.toLowerCase() as TokenRoleName];
  if (pb === undefined) throw new TypeError(`unknown token role "${role}" (expected ${TOKEN_ROLES.join(', ')})`);
  return pb;
}

/** An API token as listed: never its secret. */
export interface Token {
  id: string;
  name: string;
  /** null when the server sent a role this SDK does not know. */
  role: TokenRoleName | null;
  /** Queue patterns ("billing.*"); empty: every queue. */
  queues: string[];
  createdAt: Date | null;
  /** null: never expires. */
  expiresAt: Date | null;
  /** null: not revoked. */
  revokedAt: Date | null;
  /** Name of the token that created it; '' for direct database access or the bootstrap token. */
  createdBy: string;
}

/** The proto's role as its name; null for UNSPECIFIED or a role this SDK does not know. */
function tokenRoleFromPb(role: PbTokenRole): TokenRoleName | null {
  return (Object.entries(TOKEN_ROLE_TO_PB).find(([, v]) => v === role)?.[0] as TokenRoleName | undefined) ?? null;
}

/** A token from its protobuf form. */
export function tokenFromPb(pb: PbToken): Token {
  return {
    id: pb.id,
    name: pb.name,
    role: tokenRoleFromPb(pb.role),
    queues: pb.queues,
    createdAt: pb.createdAt ?? null,
    expiresAt: pb.expiresAt ?? null,
    revokedAt: pb.revokedAt ?? null,
    createdBy: pb.createdBy,
  };
}

/** An administrative change the audit log records (AuditAction in auth.proto). */
export type AuditActionName =
  | 'queue.upsert'
  | 'queue.pause'
  | 'queue.resume'
  | 'job.cancel'
  | 'job.retry'
  | 'jobs.retry'
  | 'jobs.purge'
  | 'schedule.upsert'
  | 'schedule.delete'
  | 'schedule.pause'
  | 'schedule.resume'
  | 'schedule.trigger'
  | 'token.create'
  | 'token.revoke'
  | 'jobs.cancel'
  | 'queue.delete';

/** Every action, in the proto enum's order (AUDIT_ACTION_QUEUE_UPSERT = 1, ...). */
export const AUDIT_ACTIONS: readonly AuditActionName[] = [
  'queue.upsert',
  'queue.pause',
  'queue.resume',
  'job.cancel',
  'job.retry',
  'jobs.retry',
  'jobs.purge',
  'schedule.upsert',
  'schedule.delete',
  'schedule.pause',
  'schedule.resume',
  'schedule.trigger',
  'token.create',
  'token.revoke',
  'jobs.cancel',
  'queue.delete',
];

/** An action name as the proto enum; throws on an unknown name. */
export function auditActionToPb(action: string): PbAuditAction {
  const i = AUDIT_ACTIONS.indexOf(action.toLowerCase() as AuditActionName);
  if (i < 0) throw new TypeError(`unknown audit action "${action}" (expected one of ${AUDIT_ACTIONS.join(', ')})`);
  return (i + 1) as PbAuditAction;
}

/** Who made a change: a token's holder, a caller of a server without auth, or direct database access. */
export type AuditActorKindName = 'token' | 'anonymous' | 'database';

const ACTOR_KIND_FROM_PB: Partial<Record<PbAuditActorKind, AuditActorKindName>> = {
  [PbAuditActorKind.AUDIT_ACTOR_KIND_TOKEN]: 'token',
  [PbAuditActorKind.AUDIT_ACTOR_KIND_ANONYMOUS]: 'anonymous',
  [PbAuditActorKind.AUDIT_ACTOR_KIND_DATABASE]: 'database',
};

/**
 * Who the server takes the caller for (EvoraClient.whoAmI, GetCaller): what a user
 * interface reads to show only what the caller may do.
 */
export interface Caller {
  /** True when the server checks tokens (any token exists, or it was started with a bootstrap token). */
  authOn: boolean;
  /** 'token' (a token's holder) or 'anonymous' (auth off); null when the server sent a kind this SDK does not know. */
  kind: AuditActorKindName | null;
  /** The token's name; null without a token. */
  name: string | null;
  /** The token's role; 'admin' when auth is off (every method is allowed); null for a role this SDK does not know. */
  role: TokenRoleName | null;
  /** Queue patterns the token is limited to ("billing.*"); empty: every queue. */
  queues: string[];
  /** The token's id; null without a token. */
  tokenId: string | null;
  /** When the token stops working; null: never (or no token). */
  expiresAt: Date | null;
}

/** A caller from GetCaller's answer. */
export function callerFromPb(pb: PbGetCallerResponse): Caller {
  return {
    authOn: pb.authOn,
    kind: ACTOR_KIND_FROM_PB[pb.kind] ?? null,
    name: pb.name || null,
    role: tokenRoleFromPb(pb.role),
    queues: pb.queues,
    tokenId: pb.tokenId || null,
    expiresAt: pb.expiresAt ?? null,
  };
}

/** One administrative change. */
export interface AuditEvent {
  id: number;
  at: Date | null;
  /** null when the server sent a kind this SDK does not know. */
  actorKind: AuditActorKindName | null;
  /** The token's id (actor kind 'token'); null otherwise. */
  tokenId: string | null;
  /** The token's name; "role (user)" for database access; '' for anonymous. */
  tokenName: string;
  /** null when the server sent an action this SDK does not know. */
  action: AuditActionName | null;
  target: string;
  change: JsonObject;
}

/** An audit event from its protobuf form. */
export function auditEventFromPb(pb: PbAuditEvent): AuditEvent {
  return {
    id: pb.id,
    at: pb.at ?? null,
    actorKind: ACTOR_KIND_FROM_PB[pb.actorKind] ?? null,
    tokenId: pb.tokenId || null,
    tokenName: pb.tokenName,
    action: AUDIT_ACTIONS[pb.action - 1] ?? null,
    target: pb.target,
    change: (pb.change ?? {}) as JsonObject,
  };
}

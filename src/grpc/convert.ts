import { AttemptOutcome as PbAttemptOutcome, JobState as PbJobState, type Job as PbJob, type DeadLetterGroup as PbDeadLetterGroup, type JobAttempt as PbJobAttempt, type JobProgress as PbJobProgress } from '../gen/evora/v1/job.js';
import { BackoffKind as PbBackoffKind, type Queue as PbQueue, type QueueSeriesPoint } from '../gen/evora/v1/queue.js';
import { AckResult as PbAckResult, CancelReason as PbCancelReason, DrainReason as PbDrainReason, LeaseLostReason as PbLeaseLostReason, type LeasedJob, type ReportProgressRequest, type WorkerInfo, type WorkerProgress } from '../gen/evora/v1/worker.js';
import type { AckResult, CancelReason, DrainReason, LeaseLostReason } from '../domain/codes.js';
import type { Duration } from '../gen/google/protobuf/duration.js';
import type { AttemptOutcome, DeadLetterGroup, Job, JobAttempt, JobProgress, JobState, JsonObject, WorkerSessionInfo } from '../domain/job.js';
import type { SeriesPoint } from '../telemetry/projection.js';
import type { BackoffKind, Queue } from '../domain/queue.js';
import type { ProgressInput } from '../domain/validate.js';
import { invalidArgument } from '../domain/errors.js';
import type { ApiToken, Principal, PrincipalKind, TokenRole } from '../domain/auth.js';
import type { AuditAction, AuditEvent } from '../domain/audit.js';
import {
  AuditAction as PbAuditAction,
  AuditActorKind as PbAuditActorKind,
  TokenRole as PbTokenRole,
  type AuditEvent as PbAuditEvent,
  type GetCallerResponse,
  type Token as PbToken,
} from '../gen/evora/v1/auth.js';

/** Translation between the domain types and the generated protobuf types. */

/** An ack's result as the proto enum. */
export const ACK_RESULT_TO_PB: Record<AckResult, PbAckResult> = {
  accepted: PbAckResult.ACK_RESULT_ACCEPTED,
  lease_lost: PbAckResult.ACK_RESULT_LEASE_LOST,
  retry_later: PbAckResult.ACK_RESULT_RETRY_LATER,
  invalid: PbAckResult.ACK_RESULT_INVALID,
};

/** A lease-lost reason as the proto enum. */
export const LEASE_LOST_REASON_TO_PB: Record<LeaseLostReason, PbLeaseLostReason> = {
  expired: PbLeaseLostReason.LEASE_LOST_REASON_EXPIRED,
  not_held_on_reconnect: PbLeaseLostReason.LEASE_LOST_REASON_NOT_HELD_ON_RECONNECT,
};

/** A cancel reason as the proto enum. */
export const CANCEL_REASON_TO_PB: Record<CancelReason, PbCancelReason> = {
  operator: PbCancelReason.CANCEL_REASON_OPERATOR,
  timeout: PbCancelReason.CANCEL_REASON_TIMEOUT,
};

/** A drain reason as the proto enum. */
export const DRAIN_REASON_TO_PB: Record<DrainReason, PbDrainReason> = {
  server_shutdown: PbDrainReason.DRAIN_REASON_SERVER_SHUTDOWN,
};

/** A job state as the proto enum. */
export const STATE_TO_PB: Record<JobState, PbJobState> = {
  PENDING: PbJobState.JOB_STATE_PENDING,
  RUNNING: PbJobState.JOB_STATE_RUNNING,
  COMPLETED: PbJobState.JOB_STATE_COMPLETED,
  DLQ: PbJobState.JOB_STATE_DLQ,
  CANCELLED: PbJobState.JOB_STATE_CANCELLED,
  WAITING: PbJobState.JOB_STATE_WAITING,
};

const STATE_FROM_PB = new Map<PbJobState, JobState>(
  Object.entries(STATE_TO_PB).map(([k, v]) => [v, k as JobState]),
);

/** A protobuf JobState as a domain state; undefined for UNSPECIFIED or unknown values. */
export function jobStateFromPb(state: PbJobState): JobState | undefined {
  return STATE_FROM_PB.get(state);
}

/** A job as clients see it. The lease token is never part of it: only the holder gets that. */
export function jobToPb(job: Job): PbJob {
  return jobWithPayloadToPb(job, job.payload);
}

/** jobToPb with the given payload (undefined: unset, for a payload sent as JSON text). */
function jobWithPayloadToPb(job: Job, payload: JsonObject | undefined): PbJob {
  return {
    id: job.id,
    queue: job.queue,
    type: job.type,
    payload,
    state: STATE_TO_PB[job.state],
    priority: job.priority,
    attempt: job.attempt,
    maxAttempts: job.maxAttempts,
    runAt: job.runAt,
    createdAt: job.createdAt,
    startedAt: job.startedAt ?? undefined,
    finishedAt: job.finishedAt ?? undefined,
    idempotencyKey: job.idempotencyKey ?? '',
    workerId: job.workerId ?? '',
    result: job.result ?? undefined,
    lastError: job.lastError ?? '',
    cancelRequested: job.cancelRequestedAt !== null,
    leaseExpiresAt: job.state === 'RUNNING' ? (job.lockedUntil ?? undefined) : undefined,
    concurrencyKey: job.concurrencyKey ?? undefined,
    dependsOn: job.parentIds ?? [],
    progress: job.progress ? progressToPb(job.progress) : undefined,
  };
}

/**
 * A freshly claimed job with the lease its holder must present on every write, and its
 * parents' results when it has parents (a parent without a result: an empty object).
 */
export function leasedJobToPb(job: Job): LeasedJob {
  return leasedToPb(job, jobToPb(job), undefined);
}

/**
 * leasedJobToPb for a worker that takes payloads as JSON text (WorkerHello.payloads_as_json):
 * the payload in payload_json, the text the store read when it read it so (a claim: the
 * payload is then never parsed), and job.payload unset.
 */
export function leasedJobToPbJson(job: Job): LeasedJob {
  return leasedToPb(job, jobWithPayloadToPb(job, undefined), Buffer.from(job.payloadJson ?? JSON.stringify(job.payload)));
}

function leasedToPb(job: Job, pb: PbJob, payloadJson: Buffer | undefined): LeasedJob {
  const parentResults: LeasedJob['parentResults'] = {};
  if (job.parentResults) for (const [id, result] of Object.entries(job.parentResults)) parentResults[id] = result ?? {};
  return {
    job: pb,
    leaseToken: job.leaseToken ?? '',
    leaseExpiresAt: job.lockedUntil ?? undefined,
    parentResults,
    checkpoint: job.checkpoint ?? undefined,
    payloadJson,
  };
}

// Progress and attempt history (docs/api.md "Progress and checkpoints", "Attempt history").

/** A job's stored progress as clients see it. */
export function progressToPb(p: JobProgress): PbJobProgress {
  return {
    percent: p.percent ?? undefined,
    done: p.done ?? undefined,
    total: p.total ?? undefined,
    message: p.message,
    attempt: p.attempt,
    reportedAt: p.reportedAt,
  };
}

/** A progress report as the wire carries it (WorkerProgress, ReportProgressRequest), for checkProgressReport. */
export function progressInput(p: WorkerProgress | ReportProgressRequest): ProgressInput {
  return {
    jobId: p.jobId,
    leaseToken: p.leaseToken,
    percent: p.percent,
    done: p.done,
    total: p.total,
    message: p.message,
    checkpoint: p.checkpoint,
  };
}

/** An attempt's outcome as the proto enum. */
export const ATTEMPT_OUTCOME_TO_PB: Record<AttemptOutcome, PbAttemptOutcome> = {
  RUNNING: PbAttemptOutcome.ATTEMPT_OUTCOME_RUNNING,
  COMPLETED: PbAttemptOutcome.ATTEMPT_OUTCOME_COMPLETED,
  FAILED: PbAttemptOutcome.ATTEMPT_OUTCOME_FAILED,
  TIMED_OUT: PbAttemptOutcome.ATTEMPT_OUTCOME_TIMED_OUT,
  LEASE_EXPIRED: PbAttemptOutcome.ATTEMPT_OUTCOME_LEASE_EXPIRED,
  SNOOZED: PbAttemptOutcome.ATTEMPT_OUTCOME_SNOOZED,
  CANCELLED: PbAttemptOutcome.ATTEMPT_OUTCOME_CANCELLED,
};

/** One attempt of a job as clients see it. */
export function attemptToPb(a: JobAttempt): PbJobAttempt {
  return {
    attempt: a.attempt,
    workerId: a.workerId ?? '',
    startedAt: a.startedAt ?? undefined,
    finishedAt: a.finishedAt ?? undefined,
    outcome: ATTEMPT_OUTCOME_TO_PB[a.outcome],
    error: a.error ?? '',
  };
}

const BACKOFF_TO_PB: Record<BackoffKind, PbBackoffKind> = {
  exponential: PbBackoffKind.BACKOFF_KIND_EXPONENTIAL,
  linear: PbBackoffKind.BACKOFF_KIND_LINEAR,
  fixed: PbBackoffKind.BACKOFF_KIND_FIXED,
};

/**
 * A protobuf BackoffKind as a domain kind; undefined for UNSPECIFIED (keep / the queue's).
 * A number the proto does not define is INVALID_ARGUMENT, never read as "unset".
 */
export function backoffKindFromPb(kind: PbBackoffKind): BackoffKind | undefined {
  if (kind === PbBackoffKind.BACKOFF_KIND_UNSPECIFIED) return undefined;
  const found = Object.entries(BACKOFF_TO_PB).find(([, v]) => v === kind)?.[0] as BackoffKind | undefined;
  if (!found) throw invalidArgument(`backoff.kind ${kind} is not a known kind`);
  return found;
}

/** Seconds (fractional) as a protobuf Duration. */
export function secondsToDuration(seconds: number): Duration {
  const whole = Math.floor(seconds);
  return { seconds: whole, nanos: Math.round((seconds - whole) * 1e9) };
}

/** A protobuf Duration in seconds (fractional). */
export function durationToSeconds(d: Duration): number {
  return d.seconds + d.nanos / 1e9;
}

/** A queue's settings as clients see them. */
export function queueToPb(q: Queue): PbQueue {
  return {
    name: q.name,
    maxAttempts: q.maxAttempts,
    backoff: {
      kind: BACKOFF_TO_PB[q.backoffKind],
      base: secondsToDuration(q.backoffBaseSeconds),
      cap: secondsToDuration(q.backoffCapSeconds),
      jitter: q.backoffJitter,
    },
    leaseSeconds: q.leaseSeconds,
    paused: q.paused,
    maxConcurrency: q.maxConcurrency ?? 0,
    maxConcurrencyPerKey: q.maxConcurrencyPerKey ?? 0,
    deleteOnComplete: q.deleteOnComplete,
    createdAt: q.createdAt,
    updatedAt: q.updatedAt,
    // null (kept forever) is 0 on the wire.
    completedRetention: secondsToDuration(q.completedRetentionSeconds ?? 0),
    cancelledRetention: secondsToDuration(q.cancelledRetentionSeconds ?? 0),
    dlqRetention: secondsToDuration(q.dlqRetentionSeconds ?? 0),
    attemptTimeout: q.attemptTimeoutSeconds === null ? undefined : secondsToDuration(q.attemptTimeoutSeconds),
    rateLimit: q.rateLimit ? { perSecond: q.rateLimit.perSecond, burst: q.rateLimit.burst } : undefined,
  };
}

/** A series minute as the proto message (a percentile without data is 0). */
export function seriesPointToPb(p: SeriesPoint): QueueSeriesPoint {
  return {
    minute: p.minute,
    submitted: p.submitted,
    completed: p.completed,
    failed: p.failed,
    deadLettered: p.deadLettered,
    waitP50Ms: p.waitMs.p50 ?? 0,
    waitP95Ms: p.waitMs.p95 ?? 0,
    waitP99Ms: p.waitMs.p99 ?? 0,
    runP50Ms: p.runMs.p50 ?? 0,
    runP95Ms: p.runMs.p95 ?? 0,
    runP99Ms: p.runMs.p99 ?? 0,
  };
}

/** A dead-letter group as the proto message. */
export function deadLetterGroupToPb(g: DeadLetterGroup): PbDeadLetterGroup {
  return { queue: g.queue, type: g.type, error: g.error, count: g.count, newestFinishedAt: g.newestFinishedAt };
}

/** A live worker session as the proto message. */
export function workerInfoToPb(w: WorkerSessionInfo): WorkerInfo {
  return {
    workerId: w.workerId,
    sessionId: w.sessionId,
    serverId: w.serverId,
    serverAddress: w.serverAddress,
    queues: w.queues,
    jobTypes: w.jobTypes,
    slots: w.slots,
    heldJobs: w.heldJobs,
    connectedAt: w.connectedAt,
    lastSeenAt: w.lastSeenAt,
  };
}

/** The caller as GetCaller answers: its token's details, or none (auth off, database). */
export function callerToPb(p: Principal, authOn: boolean): GetCallerResponse {
  return {
    authOn,
    kind: AUDIT_ACTOR_KIND_TO_PB[p.kind],
    name: p.name,
    role: TOKEN_ROLE_TO_PB[p.role],
    queues: [...p.queues],
    tokenId: p.tokenId ?? '',
    expiresAt: p.expiresAt ?? undefined,
  };
}

/** A token role as the proto enum. */
export const TOKEN_ROLE_TO_PB: Record<TokenRole, PbTokenRole> = {
  producer: PbTokenRole.TOKEN_ROLE_PRODUCER,
  worker: PbTokenRole.TOKEN_ROLE_WORKER,
  viewer: PbTokenRole.TOKEN_ROLE_VIEWER,
  admin: PbTokenRole.TOKEN_ROLE_ADMIN,
};

/** A protobuf TokenRole as a domain role; undefined for UNSPECIFIED or an unknown value. */
export function tokenRoleFromPb(role: PbTokenRole): TokenRole | undefined {
  return (Object.entries(TOKEN_ROLE_TO_PB).find(([, v]) => v === role)?.[0] as TokenRole | undefined) ?? undefined;
}

/** A token as clients see it: never its secret or hash. */
export function tokenToPb(t: ApiToken): PbToken {
  return {
    id: t.id,
    name: t.name,
    role: TOKEN_ROLE_TO_PB[t.role],
    queues: t.queues,
    createdAt: t.createdAt,
    expiresAt: t.expiresAt ?? undefined,
    revokedAt: t.revokedAt ?? undefined,
    createdBy: t.createdBy,
  };
}

/** An audit action as the proto enum. */
export const AUDIT_ACTION_TO_PB: Record<AuditAction, PbAuditAction> = {
  'queue.upsert': PbAuditAction.AUDIT_ACTION_QUEUE_UPSERT,
  'queue.pause': PbAuditAction.AUDIT_ACTION_QUEUE_PAUSE,
  'queue.resume': PbAuditAction.AUDIT_ACTION_QUEUE_RESUME,
  'job.cancel': PbAuditAction.AUDIT_ACTION_JOB_CANCEL,
  'job.retry': PbAuditAction.AUDIT_ACTION_JOB_RETRY,
  'jobs.retry': PbAuditAction.AUDIT_ACTION_JOBS_RETRY,
  'jobs.purge': PbAuditAction.AUDIT_ACTION_JOBS_PURGE,
  'schedule.upsert': PbAuditAction.AUDIT_ACTION_SCHEDULE_UPSERT,
  'schedule.delete': PbAuditAction.AUDIT_ACTION_SCHEDULE_DELETE,
  'schedule.pause': PbAuditAction.AUDIT_ACTION_SCHEDULE_PAUSE,
  'schedule.resume': PbAuditAction.AUDIT_ACTION_SCHEDULE_RESUME,
  'schedule.trigger': PbAuditAction.AUDIT_ACTION_SCHEDULE_TRIGGER,
  'token.create': PbAuditAction.AUDIT_ACTION_TOKEN_CREATE,
  'token.revoke': PbAuditAction.AUDIT_ACTION_TOKEN_REVOKE,
  'jobs.cancel': PbAuditAction.AUDIT_ACTION_JOBS_CANCEL,
  'queue.delete': PbAuditAction.AUDIT_ACTION_QUEUE_DELETE,
};

/** A protobuf AuditAction as a domain action; undefined for UNSPECIFIED or an unknown value. */
export function auditActionFromPb(action: PbAuditAction): AuditAction | undefined {
  return (Object.entries(AUDIT_ACTION_TO_PB).find(([, v]) => v === action)?.[0] as AuditAction | undefined) ?? undefined;
}

/** Who made a change, as the proto enum. */
export const AUDIT_ACTOR_KIND_TO_PB: Record<PrincipalKind, PbAuditActorKind> = {
  token: PbAuditActorKind.AUDIT_ACTOR_KIND_TOKEN,
  anonymous: PbAuditActorKind.AUDIT_ACTOR_KIND_ANONYMOUS,
  database: PbAuditActorKind.AUDIT_ACTOR_KIND_DATABASE,
};

/** An audit event as clients see it. */
export function auditEventToPb(e: AuditEvent): PbAuditEvent {
  return {
    id: e.id,
    at: e.at,
    actorKind: AUDIT_ACTOR_KIND_TO_PB[e.actor.kind],
    tokenId: e.actor.tokenId ?? '',
    tokenName: e.actor.name,
    action: AUDIT_ACTION_TO_PB[e.action],
    target: e.target,
    change: e.change,
  };
}

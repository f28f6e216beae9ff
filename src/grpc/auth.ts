import type { Metadata } from '@grpc/grpc-js';
import { toServiceError } from './status.js';
import type { Authenticator } from '../auth/authenticator.js';
import { authorize, principalLabel, queueInScope, requireQueueForScoped, scoped, TokenRefusedError, type Permission, type Principal } from '../domain/auth.js';
import { EvoraError, permissionDenied } from '../domain/errors.js';
import { CANCELLABLE_STATES, RETRYABLE_STATES, type JobBulkFilter } from '../domain/job.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';

/**
 * Authorization of the gRPC API: which permission each method needs (one table for every
 * method of every Evora service), and the queue-scope checks the handlers share. The rules
 * are those of proto/evora/v1/auth.proto's top comment and src/domain/auth.ts's
 * ROLE_PERMISSIONS; a test (test/grpc/auth-matrix.test.ts) checks the table covers every
 * method of every service definition. Health and reflection are not ours and stay open.
 */

/** The permission each method needs, by its full path ("/evora.v1.JobService/SubmitJob"). */
export const METHOD_PERMISSIONS: Readonly<Record<string, Permission>> = {
  '/evora.v1.JobService/SubmitJob': 'job.submit',
  '/evora.v1.JobService/SubmitJobs': 'job.submit',
  '/evora.v1.JobService/SubmitJobStream': 'job.submit',
  '/evora.v1.JobService/GetJob': 'job.read',
  '/evora.v1.JobService/ListJobs': 'job.read',
  '/evora.v1.JobService/ListJobAttempts': 'job.read',
  '/evora.v1.JobService/CancelJob': 'job.manage',
  '/evora.v1.JobService/RetryJob': 'job.manage',
  '/evora.v1.JobService/RetryJobs': 'job.manage',
  '/evora.v1.JobService/PurgeJobs': 'job.manage',
  '/evora.v1.JobService/CancelJobs': 'job.manage',
  '/evora.v1.JobService/ListDeadLetterGroups': 'job.read',
  '/evora.v1.WorkerService/Work': 'work',
  '/evora.v1.WorkerService/ClaimJobs': 'work',
  '/evora.v1.WorkerService/ExtendLease': 'work',
  '/evora.v1.WorkerService/CompleteJob': 'work',
  '/evora.v1.WorkerService/FailJob': 'work',
  '/evora.v1.WorkerService/SnoozeJob': 'work',
  '/evora.v1.WorkerService/ReportProgress': 'work',
  '/evora.v1.WorkerService/ListWorkers': 'queue.read',
  '/evora.v1.QueueService/GetQueue': 'queue.read',
  '/evora.v1.QueueService/ListQueues': 'queue.read',
  '/evora.v1.QueueService/GetQueueStats': 'queue.read',
  '/evora.v1.QueueService/ListQueueStats': 'queue.read',
  '/evora.v1.QueueService/GetQueueSeries': 'queue.read',
  '/evora.v1.QueueService/UpsertQueue': 'queue.manage',
  '/evora.v1.QueueService/PauseQueue': 'queue.manage',
  '/evora.v1.QueueService/ResumeQueue': 'queue.manage',
  '/evora.v1.QueueService/DeleteQueue': 'queue.manage',
  '/evora.v1.ScheduleService/GetSchedule': 'schedule.read',
  '/evora.v1.ScheduleService/ListSchedules': 'schedule.read',
  '/evora.v1.ScheduleService/UpsertSchedule': 'schedule.manage',
  '/evora.v1.ScheduleService/DeleteSchedule': 'schedule.manage',
  '/evora.v1.ScheduleService/PauseSchedule': 'schedule.manage',
  '/evora.v1.ScheduleService/ResumeSchedule': 'schedule.manage',
  '/evora.v1.ScheduleService/TriggerSchedule': 'schedule.manage',
  '/evora.v1.TokenService/CreateToken': 'token.manage',
  '/evora.v1.TokenService/ListTokens': 'token.manage',
  '/evora.v1.TokenService/RevokeToken': 'token.manage',
  '/evora.v1.TokenService/GetCaller': 'caller.read',
  '/evora.v1.AuditService/ListAuditEvents': 'audit.read',
};

/** What a handler needs to authenticate and authorize its calls (ServiceDeps has both). */
export interface AuthContext {
  logger: Logger;
  auth: Authenticator;
}

/** The method's short name for messages ("SubmitJob"). */
export function methodName(method: string): string {
  return method.slice(method.lastIndexOf('/') + 1);
}

/** The permission `method` needs; throws (a bug, at wrap time) for a method missing from the table. */
export function methodPermission(method: string): Permission {
  const permission = METHOD_PERMISSIONS[method];
  if (!permission) throw new Error(`${method} has no entry in METHOD_PERMISSIONS (src/grpc/auth.ts)`);
  return permission;
}

/** The call's `authorization` header (a binary value is not a bearer token: undefined). */
function authorizationHeader(metadata: Metadata): string | undefined {
  const v = metadata.get('authorization')[0];
  return typeof v === 'string' ? v : undefined;
}

/**
 * Authenticates a call from its metadata: UNAUTHENTICATED, or UNAVAILABLE (stale token
 * cache). The caller then checks the method's permission (methodAuthorize), answers a
 * refusal through toServiceError and logs it with authRefusalLog.
 */
export function callAuthenticate(ctx: AuthContext, metadata: Metadata): Promise<Principal> {
  return ctx.auth.authenticateAsync(authorizationHeader(metadata));
}

/** The part of a server stream that streamAuthenticated uses (grpc-js's duplex streams have it). */
export interface AuthenticatedStreamCall {
  readonly metadata: Metadata;
  readonly cancelled: boolean;
  getPeer(): string;
  emit(event: 'error', err: unknown): boolean;
}

/**
 * Authenticates a streaming call when it opens and checks its method's permission, then
 * hands the Principal to `start` (unless the caller went away meanwhile). A refusal ends
 * the stream at once with its status (UNAUTHENTICATED, PERMISSION_DENIED, or UNAVAILABLE
 * for a stale token cache) and is logged as for unary calls.
 */
export function streamAuthenticated<C extends AuthenticatedStreamCall>(ctx: AuthContext, method: string, call: C, start: (principal: Principal) => void): void {
  methodPermission(method);
  let principal: Principal | null = null;
  callAuthenticate(ctx, call.metadata)
    .then((p) => {
      principal = p;
      methodAuthorize(p, method);
      if (!call.cancelled) start(p);
    })
    .catch((err: unknown) => {
      authRefusalLog(ctx.logger, method, principal, err, call.getPeer());
      call.emit('error', toServiceError(err, ctx.logger, { method: methodName(method) }));
    });
}

/** Permissions over every queue at once: a token limited to queues may not use them. */
const UNSCOPED_ONLY: ReadonlySet<Permission> = new Set<Permission>(['token.manage', 'audit.read']);

/**
 * PERMISSION_DENIED unless the principal's role has the method's permission. Token
 * management and the audit log span every queue, so they also need a token without queue
 * limits (else a limited admin could make itself an unlimited token).
 */
export function methodAuthorize(principal: Principal, method: string): void {
  const permission = methodPermission(method);
  authorize(principal, permission, methodName(method));
  if (UNSCOPED_ONLY.has(permission) && scoped(principal)) {
    throw permissionDenied(`${principalLabel(principal)} is limited to queues ${principal.queues.join(', ')}; ${methodName(method)} needs a token of every queue`);
  }
}

/**
 * Logs one warn line for a refused call (UNAUTHENTICATED or PERMISSION_DENIED), without the
 * secret or the header; other errors are not refusals and are left to toServiceError.
 */
export function authRefusalLog(logger: Logger, method: string, principal: Principal | null, err: unknown, peer: string): void {
  if (!(err instanceof EvoraError) || (err.code !== 'UNAUTHENTICATED' && err.code !== 'PERMISSION_DENIED')) return;
  // A known token refused (revoked, expired) has no principal, but the error names it.
  const refused = err instanceof TokenRefusedError ? err : null;
  logger.warn(
    {
      method: methodName(method),
      token_id: principal?.tokenId ?? refused?.tokenId ?? null,
      token_name: principal?.name ?? refused?.tokenName ?? null,
      reason: err.message,
      peer,
    },
    err.code === 'UNAUTHENTICATED' ? 'call refused: not authenticated' : 'call refused: permission denied',
  );
}

/** PERMISSION_DENIED unless every queue is in the principal's scope (the role was checked already). */
export function scopeCheck(p: Principal, method: string, queues: readonly string[]): void {
  authorize(p, methodPermission(method), methodName(method), queues);
}

/**
 * PERMISSION_DENIED unless `queue`, the stored queue of what the call names by id or by name
 * (`what`: "job <id>", 'schedule "nightly"'), is in the principal's scope. The line does not
 * name that queue: the caller did not, and the names of queues outside its scope are not its
 * to read (ListQueues, ListSchedules and ListWorkers leave them out), while a job id or a
 * schedule name (guessable: "nightly") would otherwise tell them.
 */
export function storedScopeCheck(p: Principal, method: string, what: string, queue: string): void {
  if (queueInScope(p.queues, queue)) return;
  throw permissionDenied(`${principalLabel(p)} may not ${methodName(method)} ${what}: its queue is outside the token's queues (${p.queues.join(', ')})`);
}

/** PERMISSION_DENIED when a scoped principal names no queue, or one outside its scope. */
export function scopeCheckFilter(p: Principal, method: string, queue: string | null | undefined): void {
  requireQueueForScoped(p, methodName(method), queue);
  if (queue) scopeCheck(p, method, [queue]);
}

/** The items whose queue is in the principal's scope (lists answer only those). */
export function scopeFilter<T>(p: Principal, items: T[], queueOf: (item: T) => string): T[] {
  return scoped(p) ? items.filter((i) => queueInScope(p.queues, queueOf(i))) : items;
}

/**
 * For a scoped principal, reads the job first and refuses PERMISSION_DENIED (nothing
 * changed) when its queue is out of scope; a job that does not exist is left to the
 * handler (NOT_FOUND, or lease lost). Unscoped principals cost nothing (the hot path).
 */
export async function jobScopeCheck(store: Pick<Store, 'jobGet'>, p: Principal, method: string, id: string): Promise<void> {
  if (!scoped(p)) return;
  let queue: string;
  try {
    queue = (await store.jobGet({ id })).queue;
  } catch (err) {
    if (err instanceof EvoraError && err.code === 'NOT_FOUND') return;
    throw err;
  }
  storedScopeCheck(p, method, `job ${id}`, queue);
}

/**
 * For a scoped principal, PERMISSION_DENIED (nothing written) when a job it submits would
 * depend on a job of a queue outside its scope: a child's state tells its parent's outcome,
 * so depending on a job is reading it. Ids that do not exist are left to the submit
 * (NOT_FOUND), as jobScopeCheck leaves them. Unscoped principals cost nothing.
 */
export async function parentsScopeCheck(store: Pick<Store, 'jobQueues'>, p: Principal, method: string, parentIds: readonly string[]): Promise<void> {
  if (!scoped(p) || parentIds.length === 0) return;
  const queues = await store.jobQueues({ ids: [...new Set(parentIds)] });
  for (const [id, queue] of queues) {
    if (!queueInScope(p.queues, queue)) {
      throw permissionDenied(`${principalLabel(p)} may not depend on job ${id}: its queue is outside the token's queues (${p.queues.join(', ')})`);
    }
  }
}

/**
 * For a scoped principal, PERMISSION_DENIED (nothing changed) when a cancel or a retry would
 * reach, through the dependents, jobs of queues outside its scope: a job's cancel cancels
 * its WAITING descendants and its retry restores those its end cancelled, in whatever queue
 * they are (the dependents trigger, 0011_dependencies.sql), so a token of queue A could
 * otherwise change jobs of queue B it may not touch. `target` is one job's id (CancelJob,
 * RetryJob) or a bulk filter (RetryJobs, dry runs too: they answer as the run would). The
 * whole walk is counted, grandchildren and further, as far as the cascade goes
 * (Store.jobCascadeQueues); the line names how many dependents in which outside queues.
 * Unscoped principals cost nothing; so do jobs without children (one probe).
 *
 * The check and the action are two statements, not one transaction. Acceptable: in between,
 * a dependent of another queue joins the walk only through a submit naming a job of the walk
 * as its parent, which needs a token of that parent's queue as well as its own
 * (parentsScopeCheck), so whoever tied the new job to the parent's outcome may act on both
 * queues, and that job would be cancelled as well by the parent dead-lettering. The scoped
 * caller can neither make nor choose such a dependent. (A RUNNING job's cancel reaches its
 * dependents later still, when its worker gives it up.) Holding the whole graph locked from
 * the check to the action would close that window at the price of locking every
 * descendant on every scoped cancel and retry.
 */
export async function cascadeScopeCheck(
  store: Pick<Store, 'jobCascadeQueues'>,
  p: Principal,
  action: 'cancel' | 'retry',
  target: string | JobBulkFilter,
): Promise<void> {
  if (!scoped(p)) return;
  const filter: JobBulkFilter =
    typeof target === 'string'
      ? { queue: null, states: [...(action === 'retry' ? RETRYABLE_STATES : CANCELLABLE_STATES)], type: null, finishedBefore: null, ids: [target] }
      : target;
  const outside = (await store.jobCascadeQueues({ action, filter })).filter((r) => !queueInScope(p.queues, r.queue));
  if (outside.length === 0) return;
  const n = outside.reduce((sum, r) => sum + r.jobs, 0);
  const where = outside.length === 1 ? `queue "${outside[0]!.queue}"` : `queues ${outside.map((r) => `"${r.queue}" (${r.jobs})`).join(', ')}`;
  const what = typeof target === 'string' ? `job ${target}` : 'these jobs';
  throw permissionDenied(
    `${principalLabel(p)} may not ${action} ${what}: that would also ${action === 'retry' ? 'restore' : 'cancel'} ${n} dependent job${n === 1 ? '' : 's'} in ${where}, outside the token's queues (${p.queues.join(', ')})`,
  );
}

/** As jobScopeCheck, for a schedule by name: its queue must be in scope. */
export async function scheduleScopeCheck(store: Pick<Store, 'scheduleGet'>, p: Principal, method: string, name: string): Promise<void> {
  if (!scoped(p)) return;
  let queue: string;
  try {
    queue = (await store.scheduleGet({ name })).queue;
  } catch (err) {
    if (err instanceof EvoraError && err.code === 'NOT_FOUND') return;
    throw err;
  }
  storedScopeCheck(p, method, `schedule "${name}"`, queue);
}

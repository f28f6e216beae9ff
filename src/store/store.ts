// Over 400 lines on purpose: the store's facade documents every operation's contract where
// callers look; the code of each is one line.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { OutboxEvents } from '../domain/events.js';
import type { Queue, QueueUpsertInput } from '../domain/queue.js';
import type { ApiToken } from '../domain/auth.js';
import type { AuditActor, AuditEvent, AuditListParams } from '../domain/audit.js';
import { auditList, auditPrune } from './audit.js';
import { adminSessionCheck, tokenCreate, tokenRevoke, tokensList, type TokenCreateInput } from './tokens.js';
import type {
  HeartbeatOutcome,
  DeadLetterGroup,
  Job,
  JobAttempt,
  JobBulkFilter,
  JobListParams,
  JobSubmitInput,
  JobSubmitIds,
  JobSubmitResult,
  JobWritten,
  JsonObject,
  LeaseRef,
  LeaseWriteOutcome,
  ProgressReport,
  PruneCount,
  SweepResult,
  WorkerSessionInfo,
} from '../domain/job.js';
import { dbNow, healthCheck } from './health.js';
import { tokenBootstrapEnsure, tokensAuthList } from './tokens-auth.js';
import { jobsSubmit, jobsSubmitIds } from './jobs-submit.js';
import { type ClaimedJobs, jobsClaim, jobsQueuesDue } from './jobs-claim.js';
import type { LimitedQueues, PlainQueues } from './limited-queues.js';
import { jobsComplete, jobsFail, jobsHeartbeat, jobsProgress, jobsSnooze, jobsSweepExpired, jobsSweepTimedOut, jobsWaitingRepair } from './jobs-lease.js';
import { jobAttemptsRead, jobCancel, jobDeadLetterGroups, jobDependents, jobQueuesRead, jobRead, jobRetry, jobsList } from './jobs-operator.js';
import {
  jobCascadeQueuesRead,
  jobsCancelCount,
  jobsCancelMany,
  jobsPurgeCount,
  jobsPurgeMany,
  jobsRetryCount,
  jobsRetryMany,
  type JobBulkCount,
  type JobBulkParams,
} from './jobs-bulk.js';
import { workerSessionDelete, workerSessionList, workerSessionPrune, workerSessionSync, type WorkerSessionWrite } from './worker-sessions.js';
import { jobsPrune } from './jobs-prune.js';
import { OUTBOX_LAG_EXACT_ROWS, outboxLag, projectorBatchClose, projectorBatchOpen, queueDepths, type OutboxLag } from './outbox.js';
import { queueDelete, queueRead, queueSetPaused, queueUpsert, queuesLeaseSeconds, queuesList } from './queues.js';
import {
  scheduleDelete,
  scheduleFireDue,
  scheduleRead,
  scheduleSetPaused,
  scheduleTrigger,
  scheduleUpsert,
  schedulesList,
  type ScheduleFireResult,
} from './schedules.js';
import type { Schedule, ScheduleUpsertInput } from '../domain/schedule.js';
import { telemetryApply, telemetryPrune, telemetryRead, type TelemetryCountDelta, type TelemetryMinute } from './telemetry.js';
import { DIRECT_STARTUP_PARAMETERS, poolerDecide, storeClientClass, type DbPooler, type PoolerDecision } from './connections.js';
import { storeTypes } from './types.js';
import { DatabaseAvailability } from './availability.js';
import { StorePool } from './pool.js';
import { silentLogger, type Logger } from '../logger.js';

export { CHANNEL_JOB_AVAILABLE, CHANNEL_JOB_CANCEL, CHANNEL_SCHEDULE_CHANGED, CHANNEL_TOKENS_CHANGED } from './channels.js';
export type { ScheduleFireResult } from './schedules.js';
export type { JobBulkCount } from './jobs-bulk.js';
export type { TelemetryCountDelta, TelemetryHistogram, TelemetryMinute } from './telemetry.js';
export type { DbPooler } from './connections.js';
export { OUTBOX_LAG_EXACT_ROWS, type OutboxLag } from './outbox.js';

/**
 * The store: the only code in Evora that speaks SQL to the queue's database, and the owner
 * of its connection pools (private: nothing outside the store gets a connection). Every
 * operation is one statement or one short transaction over the statements in ./sql/, takes
 * one params object, and is batch-shaped (unnest over arrays) where the server calls it in
 * bulk. Every time-dependent operation takes an optional `now`; when absent the database
 * clock decides, so that many server processes agree on time.
 *
 * This class is the facade: each method hands its pool to the module of its area
 * (jobs-submit, jobs-lease, jobs-operator, jobs-bulk, outbox, queues, schedules, telemetry), where the
 * statements are declared and run.
 */

/** Connection settings for the store's pool. */
export interface StoreOptions {
  connectionString: string;
  /** Pool size; the dispatcher, the unary API and the maintenance services share it. */
  maxConnections?: number;
  /**
   * How long a statement may go unanswered before the pool gives it up (0 or absent:
   * forever): the caller gets an outage (UNAVAILABLE), PostgreSQL is asked to cancel the
   * statement (connections.ts: its backend would otherwise go on waiting for a lock, holding
   * a connection slot) and the connection is closed, not reused. A database that keeps its
   * connections open without answering (frozen, a network partition) needs it, and so
   * does a statement behind a lock another session holds; a closed connection fails at once
   * anyway. Below 10 s it bounds the wait for a connection too (poolConnectTimeoutMs).
   */
  queryTimeoutMs?: number;
  /** Name shown in pg_stat_activity. */
  applicationName?: string;
  /**
   * Claims commit with synchronous_commit off, on a pool of their own (half the size of
   * the main one, on top of it). Off by default; see Store.claimPool. Refused when pooled.
   */
  claimAsyncCommit?: boolean;
  /**
   * Where the outage tracker logs (once per outage at warn, its end at info); silent when
   * absent.
   */
  logger?: Logger;
  /**
   * The outage tracker to feed, when the caller made one before the store (the server's
   * startup wait); otherwise the store makes its own, logging to `logger`.
   */
  availability?: DatabaseAvailability;
  /**
   * A pooler that shares server connections (pgbouncer in transaction mode) may sit on
   * connectionString: statements run unnamed, and no session setting is used that the
   * pooler does not keep (connections.ts). Default false: named prepared statements.
   */
  pooled?: boolean;
  /**
   * connectionString was found to reach PostgreSQL itself (PoolerDecision.postgresItself):
   * the sessions start READ COMMITTED whatever the database's default
   * (DIRECT_STARTUP_PARAMETERS). Default false: the database's default applies.
   */
  postgresItself?: boolean;
}

/**
 * How long a statement waits for a connection (a new one, or a pooled one to come free)
 * before it is answered UNAVAILABLE, at most. Without a bound, a database host that drops
 * packets holds each call for the TCP connect timeout (about 2 minutes). A query timeout
 * below it bounds the wait too (poolConnectTimeoutMs).
 */
const POOL_CONNECT_TIMEOUT_MS = 10_000;

/**
 * The pool's connect timeout for a query timeout of `queryTimeoutMs` (0 or absent: none):
 * the query timeout when it is shorter than POOL_CONNECT_TIMEOUT_MS. A database that stops
 * answering (a network that drops packets) leaves a call that needs a new connection, or
 * waits for one to come free, without an answer just as it leaves a statement: with a
 * fixed 10 s, such calls were answered after 10 s while the operator had asked for 1.5 s.
 */
function poolConnectTimeoutMs(queryTimeoutMs: number | undefined): number {
  return queryTimeoutMs ? Math.min(queryTimeoutMs, POOL_CONNECT_TIMEOUT_MS) : POOL_CONNECT_TIMEOUT_MS;
}

/** The store. Owns the connection pools; `close()` ends them. Safe for concurrent use. */
export class Store {
  private readonly pool: StorePool;
  /**
   * Where claims run. By default the main pool. With claimAsyncCommit, a pool of sessions
   * with synchronous_commit off, so a claim returns without waiting for its WAL flush.
   * Nothing is lost: if PostgreSQL crashes before the flush, the job is PENDING again
   * after recovery (its claimed event gone with it, one transaction) and is claimed again;
   * the worker that got it holds a token the database never kept, so its writes are
   * refused. A completion commits synchronously and its flush carries the claim's WAL, so
   * a durable completion never outlives its claim. The price (why it is opt-in): the first
   * run may overlap the second until its next heartbeat, and the attempt that claim
   * counted is lost, so a job that crashes the database right after its claim never
   * reaches the DLQ. Submits, completions, failures and operator writes stay synchronous.
   */
  private readonly claimPool: StorePool;
  /** The queues last seen with a limit: which claim statement to try first (jobs-lease.ts). */
  private readonly limitedQueues: LimitedQueues = new Set();
  /** The queues a completion lately found without a concurrency limit (jobs-lease.ts). */
  private readonly plainQueues: PlainQueues = new Map();
  /**
   * Whether the database is reachable as this process sees it: fed by every statement
   * (through the StorePool), the LISTEN connection and the server's startup wait.
   */
  readonly availability: DatabaseAvailability;
  private closed = false;

  /**
   * Makes a store after deciding whether a pooler sits on `connectionString` (`pooler`:
   * auto, the default, asks the server unless `directConnectionString` differs from it; see
   * connections.ts). `decision` says what was decided and why, for the log.
   */
  static async open(
    options: Omit<StoreOptions, 'pooled'> & { pooler?: DbPooler; directConnectionString?: string | null },
  ): Promise<{ store: Store; decision: PoolerDecision }> {
    const { pooler, directConnectionString, ...rest } = options;
    const decision = await poolerDecide({ pooler: pooler ?? 'auto', connectionString: options.connectionString, directConnectionString });
    return { store: new Store({ ...rest, pooled: decision.pooled, postgresItself: decision.postgresItself }), decision };
  }

  constructor(readonly options: StoreOptions) {
    if (options.pooled && options.claimAsyncCommit) {
      throw new Error(
        'asynchronous claim commits (EVORA_CLAIM_ASYNC_COMMIT=1) set synchronous_commit for their sessions, which a ' +
          'transaction pooler does not keep: turn them off, or point the database URL at PostgreSQL itself',
      );
    }
    const common = {
      connectionString: options.connectionString,
      application_name: options.applicationName ?? 'evora',
      types: storeTypes,
      connectionTimeoutMillis: poolConnectTimeoutMs(options.queryTimeoutMs),
      // TCP keepalive, so that a connection whose peer vanished without a reset is found dead
      // by the kernel rather than used for a statement that never gets an answer.
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      // pg gives the query 'Query read timeout' (availability.ts: an outage); the pool then
      // destroys its connection, whose reply would otherwise be read by the next statement.
      query_timeout: options.queryTimeoutMs || undefined,
    };
    this.availability = options.availability ?? new DatabaseAvailability(options.logger ?? silentLogger());
    const namedStatements = !options.pooled;
    const direct = options.postgresItself && !options.pooled ? DIRECT_STARTUP_PARAMETERS : {};
    // UTC sessions with ISO dates (the clients send TimeZone and DateStyle): timestamps arrive in the one form storeTypes reads fast.
    this.pool = new StorePool(
      new pg.Pool({ ...common, max: options.maxConnections ?? 10, Client: storeClientClass({ namedStatements, startupParameters: direct }) }),
      this.availability,
    );
    this.claimPool = options.claimAsyncCommit
      ? new StorePool(
          new pg.Pool({
            ...common,
            max: Math.max(2, Math.ceil((options.maxConnections ?? 10) / 2)),
            Client: storeClientClass({ namedStatements, startupParameters: { ...direct, synchronous_commit: 'off' } }),
          }),
          this.availability,
        )
      : this.pool;
  }

  /** Ends the pools. Safe to call twice. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([this.pool.end(), this.claimPool !== this.pool ? this.claimPool.end() : undefined]);
  }

  /** Resolves when the database answers (the /healthz probe); rejects when it does not. */
  async healthCheck(): Promise<void> {
    await healthCheck(this.pool);
  }

  /**
   * The database's clock (its now()): for spans measured on the clock the rows are judged
   * by (the sweeper's run of reachable ticks).
   */
  async dbNow(): Promise<Date> {
    return dbNow(this.pool);
  }

  // ----- jobs: producers ---------------------------------------------------------------

  /**
   * Submits one job; see jobSubmitMany. With `handoffWorkerId` (a worker of the caller's
   * with a free slot) the job is leased to that worker in the same statement when a claim
   * would pick it now, and comes back RUNNING with its lease; otherwise it comes back as
   * jobSubmitMany leaves it. The caller must push a RUNNING job to that worker or release it.
   */
  async jobSubmit(params: { job: JobSubmitInput; now?: Date; handoffWorkerId?: string }): Promise<JobSubmitResult> {
    const [result] = await jobsSubmit(this.pool, [params.job], params.now ?? null, params.handoffWorkerId ?? null);
    if (!result) throw new Error('evora: submit returned no result');
    return result;
  }

  /**
   * Submits jobs, all or nothing. A job with an idempotency key that its queue already
   * holds is a replay: the existing job is returned with created=false, unless its type or
   * payload differ, which is refused (ALREADY_EXISTS) and changes nothing. Results come
   * in input order.
   */
  async jobSubmitMany(params: { jobs: JobSubmitInput[]; now?: Date }): Promise<JobSubmitResult[]> {
    return jobsSubmit(this.pool, params.jobs, params.now ?? null, null);
  }

  /**
   * jobSubmitMany answering with ids only (SubmitJobs ids_only): ids[i] and created[i] for
   * the i-th job, the existing job's id on a replay. The same inserts, events and refusals;
   * no job row is read back, which is what makes it cheaper for large batches.
   */
  async jobSubmitManyIds(params: { jobs: JobSubmitInput[]; now?: Date }): Promise<JobSubmitIds> {
    return jobsSubmitIds(this.pool, params.jobs, params.now ?? null);
  }

  // ----- jobs: workers -----------------------------------------------------------------

  /**
   * Claims claimable jobs of the given queues, in priority then run_at order, skipping
   * paused queues and rows other claimers hold (SKIP LOCKED). Each claimed job is RUNNING
   * with attempt+1, a fresh lease token, and a lease of its queue's lease_seconds.
   * Either one worker takes up to `limit` jobs, or `workerIds` names one worker per slot:
   * the i-th job returned (in claim order) belongs to workerIds[i]. `types` (job-type
   * routing) claims only jobs of those types; unset, null or empty = any type. `nextTokenAt`
   * is set when a rate limit held jobs back: when the next token is due.
   */
  async jobClaim(
    params: { queues: string[]; types?: string[] | null; now?: Date } & ({ limit: number; workerId: string } | { workerIds: string[] }),
  ): Promise<ClaimedJobs> {
    const workerIds =
      'workerIds' in params ? params.workerIds : Array.from({ length: Math.max(0, params.limit) }, () => params.workerId);
    const types = params.types && params.types.length > 0 ? params.types : null;
    return jobsClaim(this.claimPool, this.limitedQueues, params.queues, workerIds, types, params.now ?? null);
  }

  /**
   * Which of `queues` (not paused) have a PENDING job due at `now`: one cheap probe per queue,
   * for the fallback poll of queues whose workers are busy (a claim per queue to find out cost
   * a statement each, per tick).
   */
  async jobQueuesDue(params: { queues: string[]; now?: Date }): Promise<string[]> {
    return jobsQueuesDue(this.pool, params.queues, params.now ?? null);
  }

  /**
   * Extends the leases whose tokens still match a RUNNING job. Returns each extended lease
   * (id and token) with its new expiry (and whether an operator asked to cancel that job),
   * and the leases that are lost. A lease is the pair (id, token): of a stale and the
   * current lease of one job, only the current one is extended.
   */
  async jobHeartbeatMany(params: { leases: LeaseRef[]; now?: Date }): Promise<HeartbeatOutcome> {
    return jobsHeartbeat(this.pool, params.leases, params.now ?? null);
  }

  /**
   * Completes jobs whose leases are current; the others are answered lease_lost, unchanged.
   * Reports what changed as JobWritten (jobGet reads the whole job).
   */
  async jobCompleteMany(params: {
    /** `resultJson`: the result as JSON object text, stored as it is (checked by the caller). */
    completions: (LeaseRef & { result?: JsonObject | null; resultJson?: string })[];
    now?: Date;
  }): Promise<LeaseWriteOutcome<JobWritten>[]> {
    return jobsComplete(this.pool, this.limitedQueues, this.plainQueues, params.completions, params.now ?? null);
  }

  /**
   * Fails jobs whose leases are current. Retryable with attempts left: back to PENDING at
   * retryAt, or after the queue's backoff. Otherwise: DLQ with the error kept. A job an
   * operator asked to cancel becomes CANCELLED.
   */
  async jobFailMany(params: {
    failures: (LeaseRef & { error: string; retryable: boolean; retryAt?: Date | null })[];
    now?: Date;
  }): Promise<LeaseWriteOutcome[]> {
    return jobsFail(this.pool, params.failures, params.now ?? null);
  }

  /** Puts leased jobs back to PENDING at runAt (null: now, by the database clock) without using up an attempt. */
  async jobSnoozeMany(params: { snoozes: (LeaseRef & { runAt: Date | null })[]; now?: Date }): Promise<LeaseWriteOutcome[]> {
    return jobsSnooze(this.pool, params.snoozes, params.now ?? null);
  }

  /**
   * Stores progress reports (one per lease; the dispatcher coalesces them) on jobs whose
   * leases are current; the others change nothing and are answered lease_lost.
   */
  async jobProgressMany(params: { reports: ProgressReport[]; now?: Date }): Promise<LeaseWriteOutcome<null>[]> {
    return jobsProgress(this.pool, params.reports, params.now ?? null);
  }

  // ----- jobs: operators ---------------------------------------------------------------

  /**
   * A job's attempts, oldest first: those that ended without success, then its running or
   * completed one. Empty for an unknown id.
   */
  async jobAttempts(params: { id: string }): Promise<JobAttempt[]> {
    return jobAttemptsRead(this.pool, params.id);
  }

  /** Reads one job. NOT_FOUND when there is none with that id. */
  async jobGet(params: { id: string }): Promise<Job> {
    return jobRead(this.pool, params.id);
  }

  /** Jobs newest first, filtered, one page at a time (keyset on id). */
  async jobList(params: JobListParams): Promise<{ jobs: Job[]; nextAfterId: string | null }> {
    return jobsList(this.pool, params);
  }

  /** The queue of each existing job of `ids`, by id (unknown ids are left out). */
  async jobQueues(params: { ids: readonly string[] }): Promise<Map<string, string>> {
    return jobQueuesRead(this.pool, params.ids);
  }

  /** A job's direct children (at most 1,000), oldest first, each with its queue. */
  async jobDependents(params: { id: string }): Promise<{ id: string; queue: string }[]> {
    return jobDependents(this.pool, params.id);
  }

  /**
   * The queues (with job counts) a cancel or a retry of the jobs `filter` matches would reach
   * through their dependents: every job the dependents trigger would change, perhaps more.
   */
  async jobCascadeQueues(params: { action: 'cancel' | 'retry'; filter: JobBulkFilter }): Promise<{ queue: string; jobs: number }[]> {
    return jobCascadeQueuesRead(this.pool, params.action, params.filter);
  }

  /**
   * Dead letters grouped by queue, type and error group, largest first, over the newest
   * DLQ jobs only (`truncated` when there were more); `totalGroups` counts the groups
   * before `limit` kept the largest.
   */
  async jobDeadLetterGroups(params: {
    queue: string | null;
    limit: number;
    scanLimit?: number;
  }): Promise<{ groups: DeadLetterGroup[]; truncated: boolean; totalGroups: number }> {
    return jobDeadLetterGroups(this.pool, params);
  }

  /** Makes this server's rows of the worker-session table exactly `sessions` (last seen now). */
  async workerSessionSync(params: { serverId: string; serverAddress: string; sessions: WorkerSessionWrite[]; now?: Date }): Promise<void> {
    return workerSessionSync(this.pool, { ...params, now: params.now ?? null });
  }

  /** Forgets closed worker sessions by id. */
  async workerSessionDelete(params: { sessionIds: string[] }): Promise<void> {
    return workerSessionDelete(this.pool, params.sessionIds);
  }

  /** The live (fresh) worker sessions of every server, of any of `queues` (null: all). */
  async workerSessionList(params: { queues: string[] | null; now?: Date }): Promise<WorkerSessionInfo[]> {
    return workerSessionList(this.pool, { queues: params.queues, now: params.now ?? null });
  }

  /** Deletes dead servers' stale worker sessions; returns how many. */
  async workerSessionPrune(params: { now?: Date } = {}): Promise<number> {
    return workerSessionPrune(this.pool, params.now ?? null);
  }

  /**
   * Cancels a job: a PENDING one at once; a RUNNING one is flagged (and its holder told)
   * until the worker gives it up or its lease expires. Cancelling a CANCELLED job returns
   * it unchanged; a COMPLETED or DLQ job cannot be cancelled.
   */
  async jobCancel(params: { id: string; now?: Date; actor?: AuditActor }): Promise<Job> {
    return jobCancel(this.pool, params.id, params.now ?? null, params.actor);
  }

  /** Manual retry: a DLQ or CANCELLED job goes back to PENDING with its attempts reset. */
  async jobRetry(params: { id: string; now?: Date; actor?: AuditActor }): Promise<Job> {
    return jobRetry(this.pool, params.id, params.now ?? null, params.actor);
  }

  /**
   * Bulk retry over a filter, in batches (as jobRetry, DLQ and CANCELLED jobs only); the count done.
   * Each batch that retried jobs writes its own audit event (`actor`) in its own transaction.
   */
  async jobRetryMany(params: Omit<JobBulkParams, 'now'> & { now?: Date }): Promise<number> {
    return jobsRetryMany(this.pool, { ...params, now: params.now ?? null });
  }

  /**
   * The dry run of jobRetryMany: how many jobs it would retry now, and the finishedBefore
   * that keeps a run of the same filter to those (sql/job-count-many.sql). Changes nothing.
   */
  async jobRetryCount(params: { filter: JobBulkFilter }): Promise<JobBulkCount> {
    return jobsRetryCount(this.pool, params.filter);
  }

  /**
   * Bulk delete of finished jobs over a filter, in batches, never unprojected ones; the count done.
   * Each batch that deleted jobs writes its own audit event (`actor`) in its own transaction.
   */
  async jobPurgeMany(params: Omit<JobBulkParams, 'now'> & { now?: Date }): Promise<number> {
    return jobsPurgeMany(this.pool, { ...params, now: params.now ?? null });
  }

  /** The dry run of jobPurgeMany, as jobRetryCount is jobRetryMany's. Changes nothing. */
  async jobPurgeCount(params: { filter: JobBulkFilter }): Promise<JobBulkCount> {
    return jobsPurgeCount(this.pool, params.filter);
  }

  /**
   * Bulk cancel over a filter, in batches (as jobCancel: PENDING and WAITING cancelled,
   * RUNNING flagged, a flagged one left alone; only jobs created before the run's first
   * batch); the count done. Each batch that changed jobs writes its own audit event.
   */
  async jobCancelMany(params: Omit<JobBulkParams, 'now'> & { now?: Date }): Promise<number> {
    return jobsCancelMany(this.pool, { ...params, now: params.now ?? null });
  }

  /** The dry run of jobCancelMany: how many jobs it would cancel or flag now. Changes nothing. */
  async jobCancelCount(params: { filter: JobBulkFilter }): Promise<JobBulkCount> {
    return jobsCancelCount(this.pool, params.filter);
  }

  /**
   * One batch of the dependencies' repair pass: WAITING jobs none of whose parents is
   * unfinished become PENDING (their queues woken). The parents' trigger does this as the last
   * parent completes; this only catches what slipped through. Returns the released ids.
   */
  async jobWaitingRepair(params: { limit: number; now?: Date }): Promise<string[]> {
    return jobsWaitingRepair(this.pool, params.limit, params.now ?? null);
  }

  // ----- maintenance -------------------------------------------------------------------

  /**
   * One batch of the visibility sweep: RUNNING jobs whose lease expired go back to
   * PENDING after their queue's backoff, to DLQ when their attempts are used up, or to
   * CANCELLED when an operator asked for that. `reachable` (left out: no bound): the caller
   * has reached the database without a break since `since`, the last time at `tickAt` (both
   * by the database's clock, Store.dbNow); only queues whose lease length that run covers
   * are swept, and nothing when this statement starts more than `maxGapSeconds` after
   * `tickAt` (it waited through a break).
   */
  async jobSweepExpired(params: {
    limit: number;
    now?: Date;
    reachable?: { since: Date; tickAt: Date; maxGapSeconds: number };
  }): Promise<SweepResult> {
    return jobsSweepExpired(this.pool, params.limit, params.now ?? null, params.reachable ?? null);
  }

  /**
   * One batch of the timeout sweep: RUNNING jobs whose attempt ran past started_at + their
   * timeout fail (retry after backoff, DLQ, or CANCELLED) with "attempt timed out after ...",
   * and their holders' servers are told on evora_job_cancel ("<id> timeout").
   */
  async jobSweepTimedOut(params: { limit: number; now?: Date }): Promise<SweepResult> {
    return jobsSweepTimedOut(this.pool, params.limit, params.now ?? null);
  }

  /**
   * One batch of retention: deletes up to `limit` COMPLETED, CANCELLED and DLQ jobs whose
   * queue's retention for that state has passed since they finished (oldest first), never
   * one whose events are still waiting in the outbox. Returns the counts per queue and state;
   * fewer than `limit` in all means nothing more is due now.
   */
  async jobPrune(params: { limit: number; now?: Date }): Promise<PruneCount[]> {
    return jobsPrune(this.pool, params.limit, params.now ?? null);
  }

  // ----- the outbox ----------------------------------------------------------------------

  /**
   * Opens the projector's next batch: the open batch (one a crash left open, or one another
   * projector is applying; with exactly the rows it had, and `reopened`), else a new one of
   * whole outbox rows in id order, among those written by transactions that have ended (see
   * sql/projector-batch-open.sql), up to `limit` events (the row that crosses the limit is
   * taken whole). At most one batch is open at a time. Null when there is nothing to project.
   */
  async projectorBatchOpen(params: {
    sink: string;
    limit: number;
    /** Also read each event's job id, type, attempt and worker (for a sink that stores events). */
    details: boolean;
  }): Promise<{ batchId: number; outbox: { hiId: string; horizon: string }; rows: OutboxEvents[]; reopened: boolean } | null> {
    return projectorBatchOpen(this.pool, params);
  }

  /** Closes an applied batch: its outbox rows are deleted, and so is the batch. */
  async projectorBatchClose(params: { batchId: number }): Promise<void> {
    await projectorBatchClose(this.pool, params.batchId);
  }

  /** PENDING jobs claimable now, for every known queue, 0 included (from the claimable index). */
  async queueDepths(params: { now?: Date } = {}): Promise<{ queue: string; depth: number }[]> {
    return queueDepths(this.pool, params.now ?? null);
  }

  /**
   * How far telemetry is behind: outbox events not yet applied (exact over the first
   * `exactRows` outbox rows, default OUTBOX_LAG_EXACT_ROWS; an estimate, marked `estimated`,
   * beyond), and the age of the oldest. Costs the same at any outbox size (sql/outbox-lag.sql).
   */
  async outboxLag(params: { now?: Date; exactRows?: number } = {}): Promise<OutboxLag> {
    return outboxLag(this.pool, { exactRows: params.exactRows ?? OUTBOX_LAG_EXACT_ROWS, now: params.now ?? null });
  }

  // ----- the embedded telemetry sink's tables ------------------------------------------

  /**
   * Applies a projector batch to the embedded telemetry tables in one transaction that
   * records its id: `applied` is false (and nothing changes) when it was applied before,
   * or when the batch is no longer open (closed after it was applied). Also copies the batch's outbox rows as recent events
   * (telemetryPrune deletes old ones).
   */
  async telemetryApply(params: {
    batchId: number;
    counts: TelemetryCountDelta[];
    minutes: TelemetryMinute[];
    outbox: { hiId: string; horizon: string };
  }): Promise<{ applied: boolean }> {
    return telemetryApply(this.pool, params);
  }

  /**
   * One bounded pass of the embedded telemetry tables' retention: deletes up to `limit`
   * minute buckets that start more than `keepMinutes` before `now`, up to `limit`
   * applied-batch markers of closed batches (an open batch's marker is kept: it is what
   * makes a re-applied batch a no-op), and up to `limit` recent events older than
   * `eventRetentionSeconds` (oldest first). Returns how many of each; `limit` means more may be due.
   */
  async telemetryPrune(params: {
    keepMinutes: number;
    eventRetentionSeconds: number;
    limit: number;
    now?: Date;
  }): Promise<{ minutes: number; batches: number; events: number }> {
    return telemetryPrune(this.pool, { ...params, now: params.now ?? null });
  }

  /** The embedded telemetry tables: counts of the given queues (null: all), minutes after `since`. */
  async telemetryRead(params: { queues: string[] | null; since: Date }): Promise<{ counts: TelemetryCountDelta[]; minutes: TelemetryMinute[] }> {
    return telemetryRead(this.pool, params);
  }

  // ----- queues ------------------------------------------------------------------------

  /**
   * Creates a queue or changes the given settings of an existing one; `created` says which
   * (decided by the upsert itself, so two callers racing to create a queue learn that one
   * created it).
   */
  async queueUpsert(params: QueueUpsertInput & { now?: Date; actor?: AuditActor }): Promise<{ queue: Queue; created: boolean }> {
    const { now, actor, ...input } = params;
    return queueUpsert(this.pool, input, now ?? null, actor);
  }

  /** Reads one queue. NOT_FOUND when it does not exist. */
  async queueGet(params: { name: string }): Promise<Queue> {
    return queueRead(this.pool, params.name);
  }

  /** All queues by name. */
  async queueList(): Promise<Queue[]> {
    return queuesList(this.pool);
  }

  /**
   * The lease seconds of each of `queues` that exists (a queue not there has no entry). Reads
   * only those rows: a worker's hello must not cost more as the database holds more queues.
   */
  async queueLeaseSeconds(params: { queues: string[] }): Promise<Map<string, number>> {
    return queuesLeaseSeconds(this.pool, params.queues);
  }

  /**
   * Pauses or resumes a queue. A paused queue keeps accepting submits; nothing is claimed
   * from it. Resuming wakes the dispatchers of every server.
   */
  async queueSetPaused(params: { name: string; paused: boolean; now?: Date; actor?: AuditActor }): Promise<Queue> {
    return queueSetPaused(this.pool, params.name, params.paused, params.now ?? null, params.actor);
  }

  /**
   * Deletes an empty queue and its settings (no job of any state, no schedule into it), with
   * its audit event. NOT_FOUND when there is none; FAILED_PRECONDITION saying what is in it
   * otherwise. A submit under way either commits first (then this refuses) or waits and
   * makes the queue row again: no job is left without its queue (queue-delete-lock.sql).
   */
  async queueDelete(params: { name: string; now?: Date; actor?: AuditActor }): Promise<void> {
    return queueDelete(this.pool, params.name, params.now ?? null, params.actor);
  }

  // ----- schedules ---------------------------------------------------------------------

  /**
   * Creates a schedule or replaces its settings (paused and the last run are kept);
   * `nextRunAt` is its first fire time after now, used when it is new or its cron or time
   * zone changed. Wakes the leader's scheduler.
   */
  async scheduleUpsert(
    params: ScheduleUpsertInput & { nextRunAt: Date; now?: Date; actor?: AuditActor },
  ): Promise<{ schedule: Schedule; created: boolean }> {
    const { nextRunAt, now, actor, ...input } = params;
    return scheduleUpsert(this.pool, input, nextRunAt, now ?? null, actor);
  }

  /** Reads one schedule. NOT_FOUND when it does not exist. */
  async scheduleGet(params: { name: string }): Promise<Schedule> {
    return scheduleRead(this.pool, params.name);
  }

  /** All schedules by name. */
  async scheduleList(): Promise<Schedule[]> {
    return schedulesList(this.pool);
  }

  /** Deletes a schedule (its jobs stay). NOT_FOUND when it does not exist. */
  async scheduleDelete(params: { name: string; now?: Date; actor?: AuditActor }): Promise<void> {
    return scheduleDelete(this.pool, { name: params.name, now: params.now ?? null, actor: params.actor });
  }

  /**
   * Pauses or resumes a schedule; resuming a paused one sets next_run_at to `nextRunAt`
   * (the first fire time after now: fires missed while paused are skipped).
   */
  async scheduleSetPaused(params: { name: string; paused: boolean; nextRunAt?: Date | null; now?: Date; actor?: AuditActor }): Promise<Schedule> {
    return scheduleSetPaused(this.pool, {
      name: params.name,
      paused: params.paused,
      nextRunAt: params.nextRunAt ?? null,
      now: params.now ?? null,
      actor: params.actor,
    });
  }

  /** Submits one job of a schedule now, paused or not, and records it as its last run (see schedules.ts). */
  async scheduleTrigger(params: {
    name: string;
    triggerId?: string | null;
    now?: Date;
    actor?: AuditActor;
  }): Promise<{ schedule: Schedule; result: JobSubmitResult }> {
    return scheduleTrigger(this.pool, { name: params.name, triggerId: params.triggerId ?? null, now: params.now ?? null, actor: params.actor });
  }

  /**
   * One scheduler pass: the jobs of up to `limit` due schedules, submitted with their
   * per-fire keys in the transaction that moves the schedules on (see schedules.ts).
   */
  async scheduleFireDue(params: { limit: number; now?: Date }): Promise<ScheduleFireResult> {
    return scheduleFireDue(this.pool, { limit: params.limit, now: params.now ?? null });
  }

  // ----- tokens: the auth cache's reads ------------------------------------------------

  /**
   * Every API token with its secret's SHA-256, revoked and expired ones too: what each
   * server's token cache (src/auth/) holds. Only the cache may see the hashes.
   */
  async tokenAuthList(): Promise<(ApiToken & { secretHash: Buffer })[]> {
    return tokensAuthList(this.pool);
  }

  /**
   * EVORA_BOOTSTRAP_ADMIN_TOKEN at startup: keeps the token with this hash (whatever its
   * name; a revoked one stays revoked), or creates an admin token named "bootstrap" (or
   * "bootstrap-<8 hex of the hash>" when that name is taken), with its audit event and the
   * caches' NOTIFY in the same statement. Safe when servers start at once.
   */
  async tokenBootstrapEnsure(params: { secretHash: Buffer; now?: Date }): Promise<{ token: ApiToken; created: boolean }> {
    return tokenBootstrapEnsure(this.pool, params.secretHash, params.now ?? null);
  }

  // ----- API tokens and the audit log ----------------------------------------------------

  /**
   * Makes an API token from its validated settings and its secret's hash, with the audit
   * event `token.create` and the NOTIFY that refreshes every server's token cache, in one
   * statement. ALREADY_EXISTS (nothing written) when the name is taken.
   */
  async tokenCreate(params: Omit<TokenCreateInput, 'id'> & { id?: string }): Promise<ApiToken> {
    return tokenCreate(this.pool, { ...params, id: params.id ?? randomUUID() });
  }

  /** Tokens, newest first, revoked ones only with `includeRevoked`; never a secret or its hash. */
  async tokenList(params: { includeRevoked: boolean }): Promise<ApiToken[]> {
    return tokensList(this.pool, params.includeRevoked);
  }

  /**
   * Revokes a token named by its id or its name (NOT_FOUND if none), with the audit event
   * `token.revoke` and the NOTIFY, in one statement. A revoked token is returned as it is,
   * with no new event.
   */
  async tokenRevoke(params: { token: string; actor?: AuditActor; now?: Date }): Promise<ApiToken> {
    return tokenRevoke(this.pool, params);
  }

  /**
   * The database role this store connects as, and whether the schema has the token and
   * audit tables: direct database access (`evora token --database-url`) names its actor
   * with the role and refuses an unmigrated database.
   */
  async adminSessionCheck(): Promise<{ role: string; migrated: boolean }> {
    return adminSessionCheck(this.pool);
  }

  /** A page of the audit log, newest first; `nextBeforeId` (the next page's beforeId) is null on the last. */
  async auditList(params: AuditListParams): Promise<{ events: AuditEvent[]; nextBeforeId: number | null }> {
    return auditList(this.pool, params);
  }

  /**
   * One batch of audit retention: deletes up to `limit` events older than `retentionDays`
   * days before `now` (default: the database's clock), oldest first; returns how many
   * (fewer than `limit`: nothing more is due now). Never an event younger than 30 days by
   * the database's clock (0022_audit_retention.sql: the log stays append-only for recent
   * history, whatever the caller passes).
   */
  async auditPrune(params: { retentionDays: number; limit: number; now?: Date }): Promise<number> {
    return auditPrune(this.pool, { retentionDays: params.retentionDays, limit: params.limit, now: params.now ?? null });
  }
}

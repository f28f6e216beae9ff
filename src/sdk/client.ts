// Over 400 lines on purpose: the one EvoraClient class, a short method per RPC of JobService,
// QueueService, ScheduleService, TokenService and AuditService, and of the WorkerService RPCs a
// producer or operator calls (ListWorkers, ReportProgress; the worker's own are EvoraWorker's);
// splitting it would split its API.
import * as grpc from '@grpc/grpc-js';
import {
  JobServiceClient,
  JobServiceService,
  type CancelJobResponse,
  type CancelJobsResponse,
  type GetJobResponse,
  type ListDeadLetterGroupsResponse,
  type ListJobAttemptsResponse,
  type ListJobsResponse,
  type PurgeJobsResponse,
  type RetryJobResponse,
  type RetryJobsResponse,
  type SubmitJobRequest,
  type SubmitJobResponse,
  type SubmitJobsResponse,
} from '../gen/evora/v1/job.js';
import {
  QueueServiceClient,
  type Backoff as PbBackoff,
  type GetQueueResponse,
  type GetQueueSeriesResponse,
  type GetQueueStatsResponse,
  type ListQueueStatsResponse,
  type ListQueuesResponse,
  type DeleteQueueResponse,
  type PauseQueueResponse,
  type ResumeQueueResponse,
  type UpsertQueueRequest,
  type UpsertQueueResponse,
} from '../gen/evora/v1/queue.js';
import {
  ScheduleServiceClient,
  type GetScheduleResponse,
  type ListSchedulesResponse,
  type PauseScheduleResponse,
  type ResumeScheduleResponse,
  type TriggerScheduleResponse,
  type UpsertScheduleResponse,
} from '../gen/evora/v1/schedule.js';
import {
  AuditServiceClient,
  TokenServiceClient,
  type CreateTokenResponse,
  type GetCallerResponse,
  type ListAuditEventsResponse,
  type ListTokensResponse,
  type RevokeTokenResponse,
} from '../gen/evora/v1/auth.js';
import { WorkerServiceClient, type ListWorkersResponse, type ReportProgressResponse } from '../gen/evora/v1/worker.js';
import { dateCheck, durationSecondsCheck, finiteCheck, int32Check, stringCheck } from './checks.js';
import { channelCreate, credentialsFor, resolveAddress, type ConnectionOptions } from './connection.js';
import { EvoraApiError } from './errors.js';
import { SubmitStreamClient } from './submit-stream.js';
import { LongTimer, TIMER_MAX_MS } from './worker/timers.js';
import {
  backoffKindToPb,
  callerFromPb,
  deadLetterGroupFromPb,
  jobAttemptFromPb,
  jobFromPb,
  progressToPb,
  jobStateParse,
  jobStateToPb,
  queueFromPb,
  queueSeriesPointFromPb,
  queueStatsFromPb,
  scheduleFromPb,
  scheduleToPb,
  secondsToDuration,
  toJsonObjectText,
  workerInfoFromPb,
  type Backoff,
  type Caller,
  type DeadLetterGroup,
  type Job,
  type JobAttempt,
  type JobDetails,
  type JobStateName,
  type ProgressInput,
  type JsonObject,
  type Queue,
  type QueueSeriesPoint,
  type QueueStats,
  type Schedule,
  type ScheduleInput,
  auditActionToPb,
  auditEventFromPb,
  tokenFromPb,
  tokenRoleToPb,
  type AuditActionName,
  type AuditEvent,
  type Token,
  type TokenRoleName,
  type WorkerInfo,
} from './types.js';

/** Options of an EvoraClient. */
export interface EvoraClientOptions extends ConnectionOptions {
  /**
   * Deadline of each call unless the call says otherwise, in ms. Default 10 000; Infinity =
   * none; any finite length is kept, however long (none fires early).
   */
  deadlineMs?: number;
  /**
   * How `submit` reaches the server. True (the default): each submit is a request on one
   * SubmitJobStream kept open while submits come (half-closed after a second without any),
   * which saves each submit a call of its own; a server without it is asked by SubmitJob.
   * False: each submit is a unary SubmitJob call (e.g. through a proxy that passes no
   * bidirectional streams).
   */
  submitOverStream?: boolean;
}

/** Per-call options. */
export interface CallOptions {
  /** This call's deadline in ms (overrides the client's default); Infinity = none; any finite length is kept, however long. */
  deadlineMs?: number;
  /** Cancels the call (it then fails with CANCELLED). */
  signal?: AbortSignal;
}

/** One job to submit. */
export interface SubmitJobInput<P = JsonObject> {
  queue: string;
  type: string;
  /** A JSON object (Dates become ISO strings). Default {}. */
  payload?: P;
  /** Smaller runs first, -1000..1000. Default 0. */
  priority?: number;
  /** Earliest time to run. Default now. */
  runAt?: Date;
  /** Deduplication key, unique per queue: a replay returns the existing job (created = false). */
  idempotencyKey?: string;
  /** Attempts before the DLQ. Default: the queue's max_attempts. */
  maxAttempts?: number;
  /**
   * This job's retry delays instead of the queue's. Unset `kind`, `baseSeconds` or
   * `capSeconds` take the queue's; `jitter` unset means 0 (the wire always carries it).
   */
  backoff?: Partial<Backoff>;
  /**
   * The longest one attempt may run, in seconds (> 0), heartbeats or not. When it passes
   * the server fails the attempt ("attempt timed out after ..."; the usual retries apply)
   * and the handler's `ctx.signal` aborts with a JobAbortedError of kind 'timed_out'.
   */
  timeoutSeconds?: number;
  /**
   * Groups the job (e.g. a tenant id) for its queue's `maxConcurrencyPerKey`: at most that
   * many RUNNING jobs per key, claims rotating across keys. Unset or '' = none; at most 255 bytes.
   */
  concurrencyKey?: string;
  /**
   * Ids of existing jobs this one runs after: it is WAITING until they all complete, then
   * runs with their results in `ctx.parentResults`; cancelled if one ends DLQ or CANCELLED.
   */
  dependsOn?: string[];
  /** This job's name within one submitMany call, for the other jobs' `dependsOnRefs`. */
  ref?: string;
  /** Refs of jobs of the same submitMany call this one runs after (a graph in one call). */
  dependsOnRefs?: string[];
}

/** What submitMany answers with `{ idsOnly: true }`: ids[i] and created[i] for inputs[i]. */
export interface SubmitIdsResult {
  /** Each job's id, in input order (the existing job's on an idempotent replay). */
  ids: string[];
  /** False where the idempotency key matched an existing job (nothing new was enqueued). */
  created: boolean[];
}

/** The outcome of a submit. */
export interface SubmitResult<P = JsonObject> {
  job: Job<P>;
  /** False when the idempotency key matched an existing job (nothing new was enqueued). */
  created: boolean;
}

/** Filters of a job listing; filters are ANDed. */
export interface ListJobsFilter {
  queue?: string;
  /** One state or several ('DLQ', ['PENDING', 'RUNNING']); case-insensitive. */
  states?: JobStateName | JobStateName[] | string | string[];
  type?: string;
  /** Only the job with this idempotency key (exact match). */
  idempotencyKey?: string;
  /**
   * Only jobs of this error group, as in `BulkJobFilter.errorGroup` ('' = jobs without an
   * error): with the group's queue, type and `states: 'DLQ'`, the jobs of a dead-letter group.
   */
  errorGroup?: string;
}

// ----- bulk operator actions: types ---------------------------------------------------

/**
 * Which jobs `retryJobs`, `purgeJobs` or `cancelJobs` touches; parts are ANDed and at least
 * one must be set (an empty filter is refused, INVALID_ARGUMENT).
 */
export interface BulkJobFilter {
  queue?: string;
  /**
   * One state or several, case-insensitive; unset = every state the action may touch
   * (retry: DLQ and CANCELLED; purge: COMPLETED, DLQ and CANCELLED; cancel: PENDING,
   * WAITING and RUNNING). Any other is INVALID_ARGUMENT.
   */
  states?: JobStateName | JobStateName[] | string | string[];
  type?: string;
  /** Only jobs that finished before this time (refused by `cancelJobs`: its jobs have not finished). */
  finishedBefore?: Date;
  /** Only these jobs (at most 10,000); unknown ones and ones in other states are skipped. */
  ids?: string[];
  /**
   * Only jobs whose error group is this: a `DeadLetterGroup.error` as `deadLetterGroups`
   * returns it (the first line of the last error, at most 200 characters; '' = jobs without
   * an error). Longer, or more than one line: INVALID_ARGUMENT.
   */
  errorGroup?: string;
}

/** Options of `retryJobs`, `purgeJobs` and `cancelJobs`. */
export interface BulkCallOptions extends CallOptions {
  /** Only count what would be done; change nothing. */
  dryRun?: boolean;
}

/**
 * What `retryJobsCount` and `purgeJobsCount` answer: how many jobs the action would touch
 * now, and the bound that keeps it to them.
 */
export interface BulkCount {
  count: number;
  /**
   * Just after the newest `finishedAt` among the jobs counted (null when none): give it as
   * the filter's `finishedBefore`, the rest of the filter unchanged, and the action takes no
   * job that finished after the count (docs/api.md "Acting on what was counted").
   */
  finishedBefore: Date | null;
}

/** What `deadLetterGroups` answers. */
export interface DeadLetterGroupList {
  /** Largest first (then the newest first). */
  groups: DeadLetterGroup[];
  /** True when more DLQ jobs exist than the newest 10,000 that were grouped: counts cover those only. */
  truncated: boolean;
  /** Groups the grouped jobs make: more than `groups.length` when `limit` left some out. */
  totalGroups: number;
}

/** One page of jobs. */
export interface JobPage {
  /** Newest first. */
  jobs: Job[];
  /** Pass as `pageToken` for the next page; null = no more pages. */
  nextPageToken: string | null;
}

/** Queue settings to create or change; unset fields keep their current value (or the server default). */
export interface QueueSettings {
  maxAttempts?: number;
  leaseSeconds?: number;
  /** Most RUNNING jobs of the queue across all workers and servers; 0 = unlimited. */
  maxConcurrency?: number;
  /**
   * Job starts per second across all servers (a token bucket of `burst`, starting full);
   * `{ perSecond: 0 }` clears the limit. Without `burst` the bucket holds one second of the
   * rate, at least 1 (as `evora queue set --rate` without `--burst`).
   */
  rateLimit?: { perSecond: number; burst?: number };
  /** Unset parts of the backoff keep their current value. */
  backoff?: Partial<Backoff>;
  /** How long COMPLETED jobs are kept after they finish, in seconds; 0 = forever (server default 7 days). */
  completedRetentionSeconds?: number;
  /** How long CANCELLED jobs are kept, in seconds; 0 = forever (server default 7 days). */
  cancelledRetentionSeconds?: number;
  /** How long DLQ jobs are kept, in seconds; 0 = forever (server default 30 days). */
  dlqRetentionSeconds?: number;
  /** The attempt timeout of jobs submitted without `timeoutSeconds`, in seconds; 0 = none (the default). */
  attemptTimeoutSeconds?: number;
  /** Most RUNNING jobs per concurrency key, claims rotating across keys; 0 = no per-key limit. */
  maxConcurrencyPerKey?: number;
  /**
   * Delete jobs at completion instead of keeping them COMPLETED (results not kept; a job
   * with dependents is kept). Server default false; see docs/api.md "Deleting jobs at completion".
   */
  deleteOnComplete?: boolean;
}

// ----- API tokens and the audit log: types --------------------------------------------

/** A token to create (`createToken`). */
export interface CreateTokenInput {
  /** Unique name; unset: "token-" and the first 8 characters of its id. */
  name?: string;
  role: TokenRoleName;
  /** Queue names or prefixes ending in "*" ("billing.*"); unset or empty: every queue. */
  queues?: string[];
  /** How long it works, in seconds (> 0, at most 10 years); unset: until revoked. */
  expiresInSeconds?: number;
}

/** Filters and page of `listAuditEvents`; filters are ANDed. */
export interface ListAuditEventsFilter {
  /** Only these actions. */
  actions?: AuditActionName[];
  /** Only events on this target (a queue, a job id, a schedule, a token id). */
  target?: string;
  /** Only events made with this token (its id or name). */
  token?: string;
  /** Events per page, 1..1000; default 100. */
  pageSize?: number;
  /** `nextPageToken` of the previous page. */
  pageToken?: string;
}

/** One page of the audit log. */
export interface AuditEventPage {
  /** Newest first. */
  events: AuditEvent[];
  /** Pass as `pageToken` for the next (older) page; null = no more pages. */
  nextPageToken: string | null;
}

/**
 * QueueSettings.rateLimit as the wire's RateLimit. A rate without a burst gets one second of
 * the rate, at least 1 (the CLI's default): the type lets `burst` out for `{ perSecond: 0 }`,
 * and sending 0 with a rate was refused as "rate_limit.burst ... got 0", a value the caller
 * never gave. A rate of 0 (clear) sends burst 0.
 */
function rateLimitToPb(r: { perSecond: number }, burst: number | undefined): { perSecond: number; burst: number } {
  const perSecond = finiteCheck(r.perSecond, 'queue.rateLimit.perSecond');
  return { perSecond, burst: burst ?? (perSecond > 0 ? Math.max(1, Math.ceil(perSecond)) : 0) };
}

/**
 * The producer's and operator's client: submit jobs, read and list them, cancel and retry
 * them, configure queues and schedules, and see the workers, the dead letters and the
 * telemetry. Every method returns a Promise that rejects with an
 * EvoraApiError carrying the gRPC status. Call close() when done.
 *
 * ```ts
 * const client = new EvoraClient({ address: '127.0.0.1:50051' });
 * const { job } = await client.submit({ queue: 'emails', type: 'send_email', payload: { to: 'a@example.com' } });
 * ```
 */
export class EvoraClient {
  /** host:port this client talks to. */
  readonly address: string;
  private readonly channel: grpc.Channel;
  private readonly jobs: JobServiceClient;
  private readonly queues: QueueServiceClient;
  private readonly schedules: ScheduleServiceClient;
  private readonly workers: WorkerServiceClient;
  private readonly tokens: TokenServiceClient;
  private readonly audit: AuditServiceClient;
  private readonly deadlineMs: number;
  /** Submits over a SubmitJobStream; null: each submit is a unary SubmitJob. */
  private readonly submitStream: SubmitStreamClient | null;
  private closed = false;

  constructor(opts: EvoraClientOptions = {}) {
    this.address = resolveAddress(opts.address);
    this.deadlineMs = opts.deadlineMs ?? 10_000;
    this.channel = channelCreate(opts);
    const creds = credentialsFor(opts);
    this.jobs = new JobServiceClient(this.address, creds, { channelOverride: this.channel });
    this.queues = new QueueServiceClient(this.address, creds, { channelOverride: this.channel });
    this.schedules = new ScheduleServiceClient(this.address, creds, { channelOverride: this.channel });
    this.workers = new WorkerServiceClient(this.address, creds, { channelOverride: this.channel });
    this.tokens = new TokenServiceClient(this.address, creds, { channelOverride: this.channel });
    this.audit = new AuditServiceClient(this.address, creds, { channelOverride: this.channel });
    this.submitStream = opts.submitOverStream === false
      ? null
      : new SubmitStreamClient(
        // Requests go out as bytes SubmitStreamClient encoded (see SubmitStreamCall).
        () => this.jobs.makeBidiStreamRequest(JobServiceService.submitJobStream.path, (b: Buffer) => b, JobServiceService.submitJobStream.responseDeserialize),
        (req, deadlineMs, signal) => this.submitUnary(req, { deadlineMs, signal }));
  }

  // ----- jobs ---------------------------------------------------------------------------

  /** Enqueues one job. */
  async submit<P = JsonObject>(input: SubmitJobInput<P>, opts?: CallOptions): Promise<SubmitResult<P>> {
    const req = submitRequest(input);
    if (this.closed) throw new Error('EvoraClient.SubmitJob: the client is closed');
    const res = this.submitStream
      ? await this.submitStream.submit(req, opts?.deadlineMs ?? this.deadlineMs, opts?.signal)
      : await this.submitUnary(req, opts);
    return { job: jobFromPb<P>(required(res.job, 'SubmitJob')), created: res.created };
  }

  private submitUnary(req: SubmitJobRequest, opts?: CallOptions): Promise<SubmitJobResponse> {
    return this.unary<SubmitJobResponse>('SubmitJob', (md, o, cb) => this.jobs.submitJob(req, md, o, cb), opts);
  }

  /**
   * Enqueues several jobs atomically: all are accepted or none is. Results are in input order.
   * `{ idsOnly: true }` answers with ids and created flags only (SubmitJobs ids_only): the
   * server neither reads back nor sends the jobs, which is cheaper for large batches.
   */
  submitMany<P = JsonObject>(inputs: SubmitJobInput<P>[], opts?: CallOptions & { idsOnly?: false }): Promise<SubmitResult<P>[]>;
  submitMany<P = JsonObject>(inputs: SubmitJobInput<P>[], opts: CallOptions & { idsOnly: true }): Promise<SubmitIdsResult>;
  async submitMany<P = JsonObject>(
    inputs: SubmitJobInput<P>[],
    opts?: CallOptions & { idsOnly?: boolean },
  ): Promise<SubmitResult<P>[] | SubmitIdsResult> {
    if (!Array.isArray(inputs)) throw new TypeError(`submitMany takes an array of jobs, got ${typeof inputs}`);
    const jobs = inputs.map((input, i) => submitRequest(input, `jobs[${i}]`));
    const idsOnly = opts?.idsOnly === true;
    const res = await this.unary<SubmitJobsResponse>('SubmitJobs', (md, o, cb) => this.jobs.submitJobs({ jobs, idsOnly }, md, o, cb), opts);
    if (idsOnly) return { ids: res.ids, created: res.created };
    return res.results.map((r) => ({ job: jobFromPb<P>(required(r.job, 'SubmitJobs')), created: r.created }));
  }

  /** Reads one job (NOT_FOUND if there is none). */
  async get<P = JsonObject, R = JsonObject>(id: string, opts?: CallOptions): Promise<Job<P, R>> {
    return (await this.getDetails<P, R>(id, opts)).job;
  }

  /**
   * Reads one job with its attempts and the ids of its direct children, from one GetJob call
   * (so the three agree with each other); NOT_FOUND if there is none.
   */
  async getDetails<P = JsonObject, R = JsonObject>(id: string, opts?: CallOptions): Promise<JobDetails<P, R>> {
    const res = await this.unary<GetJobResponse>('GetJob', (md, o, cb) => this.jobs.getJob({ id }, md, o, cb), opts);
    return { job: jobFromPb<P, R>(required(res.job, 'GetJob')), attempts: res.attempts.map(jobAttemptFromPb), dependents: res.dependents };
  }

  /** One page of jobs, newest first. */
  async list(filter: ListJobsFilter & { pageSize?: number; pageToken?: string | null } = {}, opts?: CallOptions): Promise<JobPage> {
    const req = {
      queue: filter.queue ?? '',
      states: statesOf(filter.states).map(jobStateToPb),
      type: filter.type ?? '',
      pageSize: filter.pageSize === undefined ? 0 : int32Check(filter.pageSize, 'pageSize'),
      pageToken: filter.pageToken ?? '',
      idempotencyKey: filter.idempotencyKey ?? '',
      errorGroup: filter.errorGroup,
    };
    const res = await this.unary<ListJobsResponse>('ListJobs', (md, o, cb) => this.jobs.listJobs(req, md, o, cb), opts);
    return { jobs: res.jobs.map((j) => jobFromPb(j)), nextPageToken: res.nextPageToken || null };
  }

  /**
   * Every matching job, newest first, fetched page by page as you iterate:
   * `for await (const job of client.listAll({ queue: 'emails', states: 'DLQ' })) ...`.
   * `limit` stops after that many jobs.
   */
  async *listAll(filter: ListJobsFilter & { pageSize?: number; limit?: number } = {}, opts?: CallOptions): AsyncGenerator<Job> {
    let left = filter.limit ?? Infinity;
    let pageToken: string | null = null;
    while (left > 0) {
      const pageSize = Math.min(filter.pageSize ?? 100, left);
      const page: JobPage = await this.list({ ...filter, pageSize, pageToken }, opts);
      for (const job of page.jobs) {
        if (left-- <= 0) return;
        yield job;
      }
      if (!page.nextPageToken) return;
      pageToken = page.nextPageToken;
    }
  }

  /**
   * Cancels a job: a PENDING job becomes CANCELLED at once; a RUNNING job is flagged
   * (`cancelRequested`) and its worker told to stop. FAILED_PRECONDITION for finished jobs.
   */
  async cancel(id: string, opts?: CallOptions): Promise<Job> {
    const res = await this.unary<CancelJobResponse>('CancelJob', (md, o, cb) => this.jobs.cancelJob({ id }, md, o, cb), opts);
    return jobFromPb(required(res.job, 'CancelJob'));
  }

  /** Runs a DLQ or CANCELLED job again with a fresh attempt budget (FAILED_PRECONDITION otherwise). */
  async retry(id: string, opts?: CallOptions): Promise<Job> {
    const res = await this.unary<RetryJobResponse>('RetryJob', (md, o, cb) => this.jobs.retryJob({ id }, md, o, cb), opts);
    return jobFromPb(required(res.job, 'RetryJob'));
  }

  // ----- bulk operator actions ----------------------------------------------------------

  /**
   * Runs every DLQ or CANCELLED job the filter matches again, each as `retry` does; jobs in
   * other states are left alone. Returns how many were retried (dry run: would be). Done in
   * batches committed one by one: after a deadline or a failure some may be retried; calling
   * again is safe.
   */
  async retryJobs(filter: BulkJobFilter, opts: BulkCallOptions = {}): Promise<number> {
    const req = { filter: bulkFilterToPb(filter), dryRun: opts.dryRun ?? false };
    const res = await this.unary<RetryJobsResponse>('RetryJobs', (md, o, cb) => this.jobs.retryJobs(req, md, o, cb), opts);
    return res.count;
  }

  /**
   * The dry run of `retryJobs`, with the bound that keeps a later `retryJobs` to the jobs
   * counted: `retryJobs({ ...filter, finishedBefore })` retries none that fail after the count.
   */
  async retryJobsCount(filter: BulkJobFilter, opts: CallOptions = {}): Promise<BulkCount> {
    const req = { filter: bulkFilterToPb(filter), dryRun: true };
    const res = await this.unary<RetryJobsResponse>('RetryJobs', (md, o, cb) => this.jobs.retryJobs(req, md, o, cb), opts);
    return { count: res.count, finishedBefore: res.finishedBefore ?? null };
  }

  /** The dry run of `purgeJobs`, with its bound, as `retryJobsCount`. */
  async purgeJobsCount(filter: BulkJobFilter, opts: CallOptions = {}): Promise<BulkCount> {
    const req = { filter: bulkFilterToPb(filter), dryRun: true };
    const res = await this.unary<PurgeJobsResponse>('PurgeJobs', (md, o, cb) => this.jobs.purgeJobs(req, md, o, cb), opts);
    return { count: res.count, finishedBefore: res.finishedBefore ?? null };
  }

  /**
   * Deletes every finished job (COMPLETED, DLQ, CANCELLED) the filter matches, never one in
   * another state, nor (for now) one whose events telemetry has not recorded yet. Returns how
   * many were deleted (dry run: would be). Batched and safe to repeat, as `retryJobs`.
   */
  async purgeJobs(filter: BulkJobFilter, opts: BulkCallOptions = {}): Promise<number> {
    const req = { filter: bulkFilterToPb(filter), dryRun: opts.dryRun ?? false };
    const res = await this.unary<PurgeJobsResponse>('PurgeJobs', (md, o, cb) => this.jobs.purgeJobs(req, md, o, cb), opts);
    return res.count;
  }

  /**
   * Cancels every PENDING, WAITING or RUNNING job the filter matches, each as `cancel` does
   * (a running one is asked to stop: its worker is told, and it becomes CANCELLED when the
   * worker gives it up); a running job already asked to stop, and jobs in other states, are
   * left alone, and so are jobs submitted while the call runs. `finishedBefore` is refused
   * (these jobs have not finished). Returns how many were cancelled or asked to stop (dry
   * run: would be). Batched and safe to repeat, as `retryJobs`.
   */
  async cancelJobs(filter: BulkJobFilter, opts: BulkCallOptions = {}): Promise<number> {
    const req = { filter: bulkFilterToPb(filter), dryRun: opts.dryRun ?? false };
    const res = await this.unary<CancelJobsResponse>('CancelJobs', (md, o, cb) => this.jobs.cancelJobs(req, md, o, cb), opts);
    return res.count;
  }

  /**
   * A job's attempts, oldest first: each one's number, worker, start, end, outcome and error
   * (the running or completed attempt last). NOT_FOUND if there is no such job.
   */
  async attempts(id: string, opts?: CallOptions): Promise<JobAttempt[]> {
    const res = await this.unary<ListJobAttemptsResponse>('ListJobAttempts', (md, o, cb) => this.jobs.listJobAttempts({ id }, md, o, cb), opts);
    return res.attempts.map(jobAttemptFromPb);
  }

  /**
   * The DLQ jobs grouped by queue, type and error (the first line of the last error, at most
   * 200 characters), largest group first: what to look at before retrying or purging a group
   * (`retryJobs({ queue, type, states: 'DLQ', errorGroup: group.error })`). Of one queue, or
   * of every queue without `queue`; only the newest 10,000 DLQ jobs are grouped (`truncated`
   * says when there were more). `limit`: most groups returned, 1..200 (default 50; outside:
   * INVALID_ARGUMENT). A token limited to queues must name one of them: PERMISSION_DENIED
   * otherwise, as for a role that may not read jobs (worker).
   */
  async deadLetterGroups(filter: { queue?: string; limit?: number } = {}, opts?: CallOptions): Promise<DeadLetterGroupList> {
    const req = { queue: filter.queue ?? '', limit: filter.limit === undefined ? 0 : int32Check(filter.limit, 'limit') };
    const res = await this.unary<ListDeadLetterGroupsResponse>('ListDeadLetterGroups', (md, o, cb) => this.jobs.listDeadLetterGroups(req, md, o, cb), opts);
    return { groups: res.groups.map(deadLetterGroupFromPb), truncated: res.truncated, totalGroups: res.totalGroups };
  }

  /**
   * Reports progress of a job this caller leased (ClaimJobs) without a Work stream: resolves
   * once the server stored it (reports are coalesced, so within about a second), rejects with
   * FAILED_PRECONDITION when the lease is not current. EvoraWorker handlers use ctx.progress.
   */
  async reportProgress(lease: { jobId: string; leaseToken: string }, progress: ProgressInput, opts?: CallOptions): Promise<void> {
    const req = { jobId: lease.jobId, leaseToken: lease.leaseToken, ...progressToPb(progress) };
    await this.unary<ReportProgressResponse>('ReportProgress', (md, o, cb) => this.workers.reportProgress(req, md, o, cb), opts);
  }

  // ----- queues -------------------------------------------------------------------------

  /**
   * Creates a queue or changes its settings; settings left unset keep their value (or the
   * server default when the queue is created). When `backoff` is given without `jitter`,
   * the current jitter is read first and kept (the wire format always applies jitter).
   */
  async upsertQueue(name: string, settings: QueueSettings = {}, opts?: CallOptions): Promise<{ queue: Queue; created: boolean }> {
    // Checked here, as submit's are: a number the wire cannot carry throws TypeError before any call.
    const int32 = (v: number | undefined, field: string) => (v === undefined ? undefined : int32Check(v, `queue.${field}`));
    const base: UpsertQueueRequest = {
      name: stringCheck(name, 'queue name'),
      maxAttempts: int32(settings.maxAttempts, 'maxAttempts'),
      leaseSeconds: int32(settings.leaseSeconds, 'leaseSeconds'),
      maxConcurrency: int32(settings.maxConcurrency, 'maxConcurrency'),
      rateLimit: settings.rateLimit ? rateLimitToPb(settings.rateLimit, int32(settings.rateLimit.burst, 'rateLimit.burst')) : undefined,
      completedRetention: durationOf(settings.completedRetentionSeconds, 'queue.completedRetentionSeconds'),
      cancelledRetention: durationOf(settings.cancelledRetentionSeconds, 'queue.cancelledRetentionSeconds'),
      dlqRetention: durationOf(settings.dlqRetentionSeconds, 'queue.dlqRetentionSeconds'),
      attemptTimeout: durationOf(settings.attemptTimeoutSeconds, 'queue.attemptTimeoutSeconds'),
      maxConcurrencyPerKey: int32(settings.maxConcurrencyPerKey, 'maxConcurrencyPerKey'),
      deleteOnComplete: settings.deleteOnComplete,
    };
    const b = settings.backoff;
    const backoffBase = durationOf(b?.baseSeconds, 'queue.backoff.baseSeconds');
    const backoffCap = durationOf(b?.capSeconds, 'queue.backoff.capSeconds');
    if (b?.jitter !== undefined) finiteCheck(b.jitter, 'queue.backoff.jitter');
    if (!b) {
      const res = await this.unary<UpsertQueueResponse>('UpsertQueue', (md, o, cb) => this.queues.upsertQueue(base, md, o, cb), opts);
      return { queue: queueFromPb(required(res.queue, 'UpsertQueue')), created: res.created };
    }
    let jitter = b.jitter;
    let created: boolean | null = null;
    if (jitter === undefined) {
      const current = await this.getQueue(name, opts).catch((err: unknown) => {
        if (err instanceof EvoraApiError && err.codeName === 'NOT_FOUND') return null;
        throw err;
      });
      if (current) jitter = current.backoff.jitter;
      else {
        // Create it with the server's defaults first, so its default jitter is kept.
        const res = await this.unary<UpsertQueueResponse>('UpsertQueue', (md, o, cb) => this.queues.upsertQueue(base, md, o, cb), opts);
        jitter = queueFromPb(required(res.queue, 'UpsertQueue')).backoff.jitter;
        created = res.created;
      }
    }
    const backoff: PbBackoff = {
      kind: backoffKindToPb(b.kind),
      base: backoffBase,
      cap: backoffCap,
      jitter,
    };
    const res = await this.unary<UpsertQueueResponse>('UpsertQueue', (md, o, cb) => this.queues.upsertQueue({ ...base, backoff }, md, o, cb), opts);
    return { queue: queueFromPb(required(res.queue, 'UpsertQueue')), created: created ?? res.created };
  }

  /** Reads one queue (NOT_FOUND if there is none). */
  async getQueue(name: string, opts?: CallOptions): Promise<Queue> {
    const res = await this.unary<GetQueueResponse>('GetQueue', (md, o, cb) => this.queues.getQueue({ name }, md, o, cb), opts);
    return queueFromPb(required(res.queue, 'GetQueue'));
  }

  /** Every queue, by name. */
  async listQueues(opts?: CallOptions): Promise<Queue[]> {
    const res = await this.unary<ListQueuesResponse>('ListQueues', (md, o, cb) => this.queues.listQueues({}, md, o, cb), opts);
    return res.queues.map(queueFromPb);
  }

  /** Stops workers from taking new jobs from the queue (submits are still accepted). */
  async pauseQueue(name: string, opts?: CallOptions): Promise<Queue> {
    const res = await this.unary<PauseQueueResponse>('PauseQueue', (md, o, cb) => this.queues.pauseQueue({ name }, md, o, cb), opts);
    return queueFromPb(required(res.queue, 'PauseQueue'));
  }

  /** Lets workers take jobs from a paused queue again. */
  async resumeQueue(name: string, opts?: CallOptions): Promise<Queue> {
    const res = await this.unary<ResumeQueueResponse>('ResumeQueue', (md, o, cb) => this.queues.resumeQueue({ name }, md, o, cb), opts);
    return queueFromPb(required(res.queue, 'ResumeQueue'));
  }

  /**
   * Deletes an empty queue and its settings (a queue a mistyped name created, one no longer
   * used). Throws FAILED_PRECONDITION (its message says what is in it) when the queue has a
   * job of any state or a schedule submits into it, NOT_FOUND when there is no such queue.
   * A later submit or upsertQueue creates it again with the defaults.
   */
  async deleteQueue(name: string, opts?: CallOptions): Promise<void> {
    await this.unary<DeleteQueueResponse>('DeleteQueue', (md, o, cb) => this.queues.deleteQueue({ name }, md, o, cb), opts);
  }

  /**
   * A queue's telemetry: counts by state, throughput, latency percentiles, failure rate
   * (eventually consistent: read from the telemetry store), and the workers taking jobs from
   * it on every server (listWorkers lists them).
   */
  async queueStats(name: string, opts?: CallOptions): Promise<QueueStats> {
    const res = await this.unary<GetQueueStatsResponse>('GetQueueStats', (md, o, cb) => this.queues.getQueueStats({ name }, md, o, cb), opts);
    return queueStatsFromPb(required(res.stats, 'GetQueueStats'));
  }

  /** The telemetry of every queue, by name. */
  async listQueueStats(opts?: CallOptions): Promise<QueueStats[]> {
    const res = await this.unary<ListQueueStatsResponse>('ListQueueStats', (md, o, cb) => this.queues.listQueueStats({}, md, o, cb), opts);
    return res.stats.map(queueStatsFromPb);
  }

  /**
   * Per-minute telemetry of the last `minutes` minutes (1..1440, default 60; outside:
   * INVALID_ARGUMENT), for charts: exactly that many points, oldest first, the current
   * (partial) minute last; a minute without events is a point of zeros. Of one queue, or
   * without `queue` every queue summed (a token limited to queues: its queues). Eventually
   * consistent, as queueStats. A queue outside the token's queues: PERMISSION_DENIED.
   */
  async queueSeries(params: { queue?: string; minutes?: number } = {}, opts?: CallOptions): Promise<QueueSeriesPoint[]> {
    const req = { queue: params.queue ?? '', minutes: params.minutes === undefined ? 0 : int32Check(params.minutes, 'minutes') };
    const res = await this.unary<GetQueueSeriesResponse>('GetQueueSeries', (md, o, cb) => this.queues.getQueueSeries(req, md, o, cb), opts);
    return res.points.map(queueSeriesPointFromPb);
  }

  // ----- workers ------------------------------------------------------------------------

  /**
   * The workers connected now: one entry per open Work stream on any server of the cluster,
   * ordered by worker id, as each server last recorded it (every 5 s; a stream that ended
   * leaves at once, a server not heard from for 30 s is left out). Long-polling ClaimJobs
   * callers hold no stream and are not listed. With `queue`, only those taking jobs from it.
   * Needs a role that reads queues (viewer, admin: else PERMISSION_DENIED); a token limited
   * to queues sees the workers taking one of its queues, with only those queues named.
   */
  async listWorkers(filter: { queue?: string } = {}, opts?: CallOptions): Promise<WorkerInfo[]> {
    const req = { queue: filter.queue ?? '' };
    const res = await this.unary<ListWorkersResponse>('ListWorkers', (md, o, cb) => this.workers.listWorkers(req, md, o, cb), opts);
    return res.workers.map(workerInfoFromPb);
  }

  // ----- schedules (docs/api.md, "Schedules") ------------------------------------------

  /** Creates a schedule or replaces its settings (pause state and last run are kept). */
  async upsertSchedule<P = JsonObject>(input: ScheduleInput<P>, opts?: CallOptions): Promise<{ schedule: Schedule<P>; created: boolean }> {
    const req = { schedule: scheduleToPb(input) };
    const res = await this.unary<UpsertScheduleResponse>('UpsertSchedule', (md, o, cb) => this.schedules.upsertSchedule(req, md, o, cb), opts);
    return { schedule: scheduleFromPb<P>(required(res.schedule, 'UpsertSchedule')), created: res.created };
  }

  /** Reads one schedule (NOT_FOUND if there is none). */
  async getSchedule<P = JsonObject>(name: string, opts?: CallOptions): Promise<Schedule<P>> {
    const res = await this.unary<GetScheduleResponse>('GetSchedule', (md, o, cb) => this.schedules.getSchedule({ name }, md, o, cb), opts);
    return scheduleFromPb<P>(required(res.schedule, 'GetSchedule'));
  }

  /** Every schedule, by name. */
  async listSchedules(opts?: CallOptions): Promise<Schedule[]> {
    const res = await this.unary<ListSchedulesResponse>('ListSchedules', (md, o, cb) => this.schedules.listSchedules({}, md, o, cb), opts);
    return res.schedules.map((s) => scheduleFromPb(s));
  }

  /** Deletes a schedule; its jobs stay (NOT_FOUND if there is none). */
  async deleteSchedule(name: string, opts?: CallOptions): Promise<void> {
    await this.unary('DeleteSchedule', (md, o, cb) => this.schedules.deleteSchedule({ name }, md, o, cb), opts);
  }

  /** Stops a schedule from firing. */
  async pauseSchedule(name: string, opts?: CallOptions): Promise<Schedule> {
    const res = await this.unary<PauseScheduleResponse>('PauseSchedule', (md, o, cb) => this.schedules.pauseSchedule({ name }, md, o, cb), opts);
    return scheduleFromPb(required(res.schedule, 'PauseSchedule'));
  }

  /** Lets a paused schedule fire again from its next fire time after now (missed ones are skipped). */
  async resumeSchedule(name: string, opts?: CallOptions): Promise<Schedule> {
    const res = await this.unary<ResumeScheduleResponse>('ResumeSchedule', (md, o, cb) => this.schedules.resumeSchedule({ name }, md, o, cb), opts);
    return scheduleFromPb(required(res.schedule, 'ResumeSchedule'));
  }

  /**
   * Submits one job of the schedule now, paused or not. `triggerId` makes a retry safe:
   * the same id returns the same job (created = false).
   */
  async triggerSchedule(
    name: string,
    params: { triggerId?: string } = {},
    opts?: CallOptions,
  ): Promise<{ jobId: string; idempotencyKey: string; created: boolean; schedule: Schedule }> {
    const req = { name, triggerId: params.triggerId ?? '' };
    const res = await this.unary<TriggerScheduleResponse>('TriggerSchedule', (md, o, cb) => this.schedules.triggerSchedule(req, md, o, cb), opts);
    return { jobId: res.jobId, idempotencyKey: res.idempotencyKey, created: res.created, schedule: scheduleFromPb(required(res.schedule, 'TriggerSchedule')) };
  }

  // ----- API tokens and the audit log (admin; docs/security.md) --------------------------

  /**
   * Makes an API token. `secret` (sent as `authorization: Bearer <secret>`) is returned
   * this once; the server keeps only its hash. A taken name: ALREADY_EXISTS.
   */
  async createToken(input: CreateTokenInput, opts?: CallOptions): Promise<{ token: Token; secret: string }> {
    const req = {
      name: input.name ?? '',
      role: tokenRoleToPb(input.role),
      queues: input.queues ?? [],
      expiresIn: durationOf(input.expiresInSeconds, 'token.expiresInSeconds'),
    };
    const res = await this.unary<CreateTokenResponse>('CreateToken', (md, o, cb) => this.tokens.createToken(req, md, o, cb), opts);
    return { token: tokenFromPb(required(res.token, 'CreateToken')), secret: res.secret };
  }

  /** Tokens, newest first, without their secrets; revoked ones only with `includeRevoked`. */
  async listTokens(params: { includeRevoked?: boolean } = {}, opts?: CallOptions): Promise<Token[]> {
    const req = { includeRevoked: params.includeRevoked ?? false };
    const res = await this.unary<ListTokensResponse>('ListTokens', (md, o, cb) => this.tokens.listTokens(req, md, o, cb), opts);
    return res.tokens.map(tokenFromPb);
  }

  /** Revokes a token named by its id or its name (NOT_FOUND if none); a revoked one is returned as it is. */
  async revokeToken(token: string, opts?: CallOptions): Promise<Token> {
    const res = await this.unary<RevokeTokenResponse>('RevokeToken', (md, o, cb) => this.tokens.revokeToken({ token }, md, o, cb), opts);
    return tokenFromPb(required(res.token, 'RevokeToken'));
  }

  /**
   * Who the server takes this client for: whether auth is on and, with it, the token's name,
   * role, queues, id and expiry (auth off: anonymous, role admin). Any role may call it, and
   * anyone while auth is off; with auth on and no valid token: UNAUTHENTICATED.
   */
  async whoAmI(opts?: CallOptions): Promise<Caller> {
    const res = await this.unary<GetCallerResponse>('GetCaller', (md, o, cb) => this.tokens.getCaller({}, md, o, cb), opts);
    return callerFromPb(res);
  }

  /** A page of the audit log, newest first. */
  async listAuditEvents(filter: ListAuditEventsFilter = {}, opts?: CallOptions): Promise<AuditEventPage> {
    const req = {
      pageSize: filter.pageSize === undefined ? 0 : int32Check(filter.pageSize, 'pageSize'),
      pageToken: filter.pageToken ?? '',
      actions: (filter.actions ?? []).map(auditActionToPb),
      target: filter.target ?? '',
      token: filter.token ?? '',
    };
    const res = await this.unary<ListAuditEventsResponse>('ListAuditEvents', (md, o, cb) => this.audit.listAuditEvents(req, md, o, cb), opts);
    return { events: res.events.map(auditEventFromPb), nextPageToken: res.nextPageToken || null };
  }

  /** Closes the connection. Calls made afterwards fail. Safe to call twice. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.submitStream?.close();
    this.channel.close();
  }

  // ----- plumbing -----------------------------------------------------------------------

  private unary<Res>(
    rpc: string,
    invoke: (md: grpc.Metadata, o: Partial<grpc.CallOptions>, cb: (err: grpc.ServiceError | null, res: Res) => void) => grpc.ClientUnaryCall,
    opts: CallOptions = {},
  ): Promise<Res> {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new Error(`EvoraClient.${rpc}: the client is closed`));
      if (opts.signal?.aborted) {
        return reject(new EvoraApiError({ code: grpc.status.CANCELLED, details: 'cancelled before the call started', method: rpc }));
      }
      const deadlineMs = opts.deadlineMs ?? this.deadlineMs;
      const callOptions: Partial<grpc.CallOptions> = {};
      // grpc-js takes a deadline up to setTimeout's limit: past it the server's grpc-js
      // (`timeout | 0`) expires the call at once. Longer ones are kept here (LongTimer);
      // Infinity (or NaN) is none.
      let longDeadline: LongTimer | null = null;
      if (deadlineMs <= TIMER_MAX_MS) callOptions.deadline = new Date(Date.now() + deadlineMs);
      else {
        longDeadline = LongTimer.after(deadlineMs, () => {
          reject(new EvoraApiError({ code: grpc.status.DEADLINE_EXCEEDED, details: 'Deadline exceeded', method: rpc }));
          call.cancel();
        });
      }
      const onAbort = () => call.cancel();
      const call = invoke(new grpc.Metadata(), callOptions, (err, res) => {
        opts.signal?.removeEventListener('abort', onAbort);
        longDeadline?.clear();
        if (err) reject(EvoraApiError.from(err, rpc));
        else resolve(res);
      });
      opts.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

function required<T>(value: T | undefined, rpc: string): T {
  if (value === undefined) throw new Error(`${rpc}: the server's answer lacks its payload`);
  return value;
}

function statesOf(states: ListJobsFilter['states']): JobStateName[] {
  if (states === undefined) return [];
  return (Array.isArray(states) ? states : [states]).map((s) => jobStateParse(s));
}

function bulkFilterToPb(filter: BulkJobFilter) {
  return {
    queue: filter.queue ?? '',
    states: statesOf(filter.states).map(jobStateToPb),
    type: filter.type ?? '',
    finishedBefore: filter.finishedBefore === undefined ? undefined : dateCheck(filter.finishedBefore, 'filter.finishedBefore'),
    ids: filter.ids ?? [],
    errorGroup: filter.errorGroup,
  };
}

/** `seconds` as a Duration (undefined stays undefined); throws TypeError for a number a Duration cannot carry. */
function durationOf(seconds: number | undefined, what: string) {
  return seconds === undefined ? undefined : secondsToDuration(durationSecondsCheck(seconds, what));
}

function submitRequest<P>(input: SubmitJobInput<P>, what = 'job'): SubmitJobRequest {
  // Numbers and dates are checked here, so that a bad one throws TypeError before any call
  // instead of failing grpc-js's serializer (on a stream: every submit on it).
  const seconds = (v: number | undefined, field: string) => durationOf(v, `${what}.${field}`);
  if (typeof input !== 'object' || input === null) throw new TypeError(`${what} must be an object, got ${input === null ? 'null' : typeof input}`);
  return {
    queue: stringCheck(input.queue, `${what}.queue`),
    type: stringCheck(input.type, `${what}.type`),
    // As JSON text: the server stores it without a Struct round trip on either side.
    payload: undefined,
    payloadJson: Buffer.from(input.payload === undefined ? '{}' : toJsonObjectText(input.payload, `${what}.payload`)),
    priority: input.priority === undefined ? 0 : int32Check(input.priority, `${what}.priority`),
    runAt: input.runAt === undefined ? undefined : dateCheck(input.runAt, `${what}.runAt`),
    idempotencyKey: input.idempotencyKey ?? '',
    maxAttempts: input.maxAttempts === undefined ? 0 : int32Check(input.maxAttempts, `${what}.maxAttempts`),
    backoff: input.backoff && {
      kind: backoffKindToPb(input.backoff.kind),
      base: seconds(input.backoff.baseSeconds, 'backoff.baseSeconds'),
      cap: seconds(input.backoff.capSeconds, 'backoff.capSeconds'),
      jitter: input.backoff.jitter === undefined ? 0 : finiteCheck(input.backoff.jitter, `${what}.backoff.jitter`),
    },
    timeout: seconds(input.timeoutSeconds, 'timeoutSeconds'),
    concurrencyKey: input.concurrencyKey || undefined,
    dependsOn: input.dependsOn ?? [],
    ref: input.ref ?? '',
    dependsOnRefs: input.dependsOnRefs ?? [],
  };
}

import { EvoraError, failedPrecondition, invalidArgument, unauthenticated } from '../domain/errors.js';
import { CANCELLABLE_STATES, FINISHED_STATES, RETRYABLE_STATES, type JobBackoff, type JobBulkFilter, type JobState, type JobSubmitInput } from '../domain/job.js';
import {
  DEFAULT_DEAD_LETTER_GROUPS,
  DEFAULT_PAGE_SIZE,
  MAX_DEAD_LETTER_GROUPS,
  MAX_BATCH,
  MAX_PAGE_SIZE,
  checkDate,
  checkIdempotencyKey,
  checkSubmitIdempotencyKey,
  checkErrorGroup,
  checkConcurrencyKey,
  checkIntRange,
  checkJsonSize,
  checkPayloadJson,
  checkMaxAttempts,
  checkName,
  checkPriority,
  checkUuid,
  checkBackoffNumbers,
  checkBulkFilter,
  checkTimeoutSeconds,
  checkDependsOn,
  checkDependencyRefs,
  pageTokenDecode,
  pageTokenEncode,
} from '../domain/validate.js';
import {
  JobServiceService,
  SubmitJobRequest,
  SubmitJobsRequest,
  SubmitJobStreamRequest,
  type JobFilter,
  type JobServiceServer,
  type SubmitJobResponse,
} from '../gen/evora/v1/job.js';
import { bufferDecoder } from '../wire/node-buffer-reader.js';
import type { Backoff } from '../gen/evora/v1/queue.js';
import { attemptToPb, backoffKindFromPb, deadLetterGroupToPb, durationToSeconds, jobStateFromPb, jobToPb } from './convert.js';
import type { ServiceDeps } from './deps.js';
import { cascadeScopeCheck, jobScopeCheck, parentsScopeCheck, scopeCheck, scopeCheckFilter, scopeFilter, storedScopeCheck, streamAuthenticated } from './auth.js';
import { SubmitStream, type SubmitStreamDeps } from './submit-stream.js';
import { unary } from './unary.js';
import { auditActor } from '../domain/audit.js';
import type { Principal } from '../domain/auth.js';
import type { JobBulkCount } from '../store/store.js';

/** A SubmitJobRequest as the store's input, every field checked. */
function submitInput(req: SubmitJobRequest, maxPayloadBytes: number): JobSubmitInput {
  return {
    queue: checkName('queue', req.queue),
    type: checkName('type', req.type),
    ...submitPayload(req, maxPayloadBytes),
    priority: checkPriority(req.priority),
    runAt: checkDate('run_at', req.runAt) ?? null,
    idempotencyKey: checkSubmitIdempotencyKey(req.idempotencyKey) || null,
    maxAttempts: checkMaxAttempts(req.maxAttempts) || null,
    backoff: req.backoff ? jobBackoff(req.backoff) : null,
    timeoutSeconds: req.timeout ? checkTimeoutSeconds(durationToSeconds(req.timeout)) : null,
    concurrencyKey: checkConcurrencyKey(req.concurrencyKey ?? '') || null,
    dependsOn: req.dependsOn.length > 0 ? checkDependsOn(req.dependsOn) : null,
    ref: req.ref || null,
    dependsOnRefs: req.dependsOnRefs.length > 0 ? [...new Set(req.dependsOnRefs)] : null,
  };
}

/** A submit's payload: payload (a Struct) or payload_json (text, not parsed here), not both. */
function submitPayload(req: SubmitJobRequest, maxPayloadBytes: number): Pick<JobSubmitInput, 'payload' | 'payloadJson'> {
  if (req.payloadJson.length === 0) return { payload: checkJsonSize('payload', req.payload, maxPayloadBytes) };
  if (req.payload !== undefined) throw invalidArgument('payload and payload_json are both set; send one');
  return { payloadJson: checkPayloadJson('payload_json', req.payloadJson, maxPayloadBytes) };
}

/** A submit's own backoff, checked as UpsertQueue checks a queue's; unset parts are the queue's. */
function jobBackoff(b: Backoff): JobBackoff {
  const baseSeconds = b.base ? durationToSeconds(b.base) : undefined;
  const capSeconds = b.cap ? durationToSeconds(b.cap) : undefined;
  checkBackoffNumbers({ jitter: b.jitter, baseSeconds, capSeconds });
  return { kind: backoffKindFromPb(b.kind) ?? null, baseSeconds: baseSeconds ?? null, capSeconds: capSeconds ?? null, jitter: b.jitter };
}

/** A bulk action's filter, checked for the states the action may touch (`allowed`). */
function bulkFilter(action: 'retried' | 'purged' | 'cancelled', filter: JobFilter | undefined, allowed: readonly JobState[]): JobBulkFilter {
  return checkBulkFilter(
    action,
    {
      queue: filter?.queue ?? '',
      states: (filter?.states ?? []).map((s) => jobStateFromPb(s) ?? null),
      type: filter?.type ?? '',
      errorGroup: filter?.errorGroup,
      finishedBefore: filter?.finishedBefore,
      ids: filter?.ids ?? [],
    },
    allowed,
  );
}

/**
 * An AbortSignal that aborts when the call is cancelled (its deadline passed, the client went
 * away), so a bulk action stops between batches; the reason is a domain error, as no one
 * reads the answer and nothing went wrong on the server.
 */
function callSignal(call: { on(event: 'cancelled', fn: () => void): unknown }): AbortSignal {
  const ac = new AbortController();
  call.on('cancelled', () => ac.abort(failedPrecondition('the call was cancelled; the batches done so far stay done')));
  return ac.signal;
}

/** What differs between RetryJobs, PurgeJobs and CancelJobs: the store's count and run, and the words. */
interface BulkAction {
  method: 'RetryJobs' | 'PurgeJobs' | 'CancelJobs';
  doing: 'retrying' | 'deleting' | 'cancelling';
  done: 'retried' | 'deleted' | 'cancelled';
  /** The log lines of a dry run and of a run. */
  logCounted: string;
  logDone: string;
  count(filter: JobBulkFilter): Promise<JobBulkCount>;
  run(params: Parameters<ServiceDeps['store']['jobRetryMany']>[0]): Promise<number>;
}

/**
 * The answer of a bulk action (RetryJobs, PurgeJobs, CancelJobs) whose filter was checked and scoped.
 * A dry run counts and answers the bound that keeps the same filter's action to the jobs
 * counted (finished_before). A run goes batch by batch and stops before its next batch once
 * its caller is no longer accepted: the token is revoked or expires, or (an anonymous
 * caller) auth turns on, as the Authenticator tells open streams. It then ends
 * UNAUTHENTICATED, the code a new call would get; the line says, for people, how many jobs it
 * had changed (those stay changed) and that a call with a valid token goes on. A batch
 * already running finishes (each is its own short transaction). A caller that is never
 * invalidated (auth off stays off) runs to the end.
 */
async function bulkAnswer(
  deps: Pick<ServiceDeps, 'auth' | 'logger'>,
  action: BulkAction,
  req: { dryRun: boolean },
  filter: JobBulkFilter,
  call: { on(event: 'cancelled', fn: () => void): unknown },
  principal: Principal,
): Promise<{ count: number; finishedBefore?: Date }> {
  if (req.dryRun) {
    const counted = await action.count(filter);
    deps.logger.info({ filter, dry_run: true, count: counted.jobs }, action.logCounted);
    return { count: counted.jobs, finishedBefore: counted.finishedBefore ?? undefined };
  }
  let refused: string | null = null;
  const unsubscribe = deps.auth.onPrincipalInvalidated(principal, (reason) => {
    refused = reason;
  });
  try {
    const count = await action.run({
      filter,
      signal: callSignal(call),
      actor: auditActor(principal),
      beforeBatch: (done) => {
        if (refused === null) return;
        const jobs = `${done} job${done === 1 ? '' : 's'}`;
        throw unauthenticated(`${refused}; ${action.method} stopped after ${action.doing} ${jobs} (they stay ${action.done}): call it again with a valid token to go on`);
      },
    });
    deps.logger.info({ filter, dry_run: false, count }, action.logDone);
    return { count };
  } finally {
    unsubscribe();
  }
}

/**
 * JobService with its submits' requests decoded with NodeBufferReader (src/wire): a batch
 * submit carries a thousand jobs' strings.
 */
export const jobServiceDefinition: typeof JobServiceService = {
  ...JobServiceService,
  submitJob: { ...JobServiceService.submitJob, requestDeserialize: bufferDecoder(SubmitJobRequest.decode) },
  submitJobs: { ...JobServiceService.submitJobs, requestDeserialize: bufferDecoder(SubmitJobsRequest.decode) },
  submitJobStream: { ...JobServiceService.submitJobStream, requestDeserialize: bufferDecoder(SubmitJobStreamRequest.decode) },
};

/**
 * JobService: producers submit jobs, operators read, cancel and retry them, one by one or
 * over a filter (CancelJobs, RetryJobs), and purge finished ones (PurgeJobs). A submit goes
 * through the dispatcher (which may hand the job to an idle worker of this server); the
 * rest goes to the store.
 */
export function jobService(deps: ServiceDeps): JobServiceServer {
  const { store, dispatcher, logger, maxPayloadBytes, metrics } = deps;
  const M = JobServiceService;
  /** One SubmitJob, for the unary call and for each request of a SubmitJobStream. */
  async function submitOne(req: SubmitJobRequest, principal: Principal, method: string): Promise<SubmitJobResponse> {
    if (req.dependsOnRefs.length > 0) {
      throw invalidArgument('depends_on_refs names jobs of the same SubmitJobs call; SubmitJob takes depends_on (job ids)');
    }
    if (req.ref) throw invalidArgument('ref names a job for the others of one SubmitJobs call; SubmitJob has no others');
    const input = submitInput(req, maxPayloadBytes);
    scopeCheck(principal, method, [input.queue]);
    await parentsScopeCheck(store, principal, method, input.dependsOn ?? []);
    const { job, created } = await dispatcher.submit(input);
    if (created) {
      metrics.jobsSubmitted.inc({ queue: job.queue });
      logger.debug({ job_id: job.id, queue: job.queue, type: job.type, attempt: 0 }, 'job submitted');
    }
    return { job: jobToPb(job), created };
  }
  const retryAction: BulkAction = {
    method: 'RetryJobs',
    doing: 'retrying',
    done: 'retried',
    logCounted: 'jobs to retry counted',
    logDone: 'jobs retried by operator',
    count: (filter) => store.jobRetryCount({ filter }),
    run: (params) => store.jobRetryMany(params),
  };
  const purgeAction: BulkAction = {
    method: 'PurgeJobs',
    doing: 'deleting',
    done: 'deleted',
    logCounted: 'jobs to purge counted',
    logDone: 'jobs purged by operator',
    count: (filter) => store.jobPurgeCount({ filter }),
    run: (params) => store.jobPurgeMany(params),
  };
  const cancelAction: BulkAction = {
    method: 'CancelJobs',
    doing: 'cancelling',
    done: 'cancelled',
    logCounted: 'jobs to cancel counted',
    logDone: 'jobs cancelled by operator',
    count: (filter) => store.jobCancelCount({ filter }),
    run: (params) => store.jobCancelMany(params),
  };
  const submitStreamDeps: SubmitStreamDeps = {
    submit: (req, principal) => submitOne(req, principal, M.submitJobStream.path),
    logger,
    streams: deps.streams,
    auth: deps.auth,
  };
  return {
    submitJob: unary(deps, M.submitJob.path, (req, _call, principal) => submitOne(req, principal, M.submitJob.path)),
    // Authenticated when the stream opens (refused with the status at once); each request's
    // queue is checked against the token's scope, and the stream ends when the token stops working.
    submitJobStream: (call) => streamAuthenticated(deps, M.submitJobStream.path, call, (p) => SubmitStream.start(call, submitStreamDeps, p)),
    submitJobs: unary(deps, M.submitJobs.path, async (req, _call, principal) => {
      if (req.jobs.length > MAX_BATCH) throw invalidArgument(`at most ${MAX_BATCH} jobs per SubmitJobs call`);
      const inputs = req.jobs.map((j, i) => {
        try {
          return submitInput(j, maxPayloadBytes);
        } catch (err) {
          // Names the job the refusal is about; anything but a refusal is a bug (INTERNAL).
          if (!(err instanceof EvoraError) || err.code !== 'INVALID_ARGUMENT') throw err;
          throw invalidArgument(`jobs[${i}]: ${err.message}`, { cause: err });
        }
      });
      checkDependencyRefs(inputs);
      // One job out of scope refuses the whole batch: nothing is written.
      scopeCheck(principal, M.submitJobs.path, [...new Set(inputs.map((j) => j.queue))]);
      await parentsScopeCheck(store, principal, M.submitJobs.path, inputs.flatMap((j) => j.dependsOn ?? []));
      if (req.idsOnly) {
        const { ids, created } = await store.jobSubmitManyIds({ jobs: inputs });
        created.forEach((c, i) => c && metrics.jobsSubmitted.inc({ queue: inputs[i]!.queue }));
        return { results: [], ids, created };
      }
      const results = await store.jobSubmitMany({ jobs: inputs });
      for (const r of results) if (r.created) metrics.jobsSubmitted.inc({ queue: r.job.queue });
      return { results: results.map((r) => ({ job: jobToPb(r.job), created: r.created })), ids: [], created: [] };
    }),
    getJob: unary(deps, M.getJob.path, async (req, _call, principal) => {
      const job = await store.jobGet({ id: checkUuid('id', req.id) });
      storedScopeCheck(principal, M.getJob.path, `job ${job.id}`, job.queue);
      const [attempts, dependents] = await Promise.all([store.jobAttempts({ id: job.id }), store.jobDependents({ id: job.id })]);
      // A token limited to queues sees only the children in its queues (the others' ids are not its to know).
      return { job: jobToPb(job), attempts: attempts.map(attemptToPb), dependents: scopeFilter(principal, dependents, (d) => d.queue).map((d) => d.id) };
    }),
    listJobAttempts: unary(deps, M.listJobAttempts.path, async (req, _call, principal) => {
      const job = await store.jobGet({ id: checkUuid('id', req.id) });
      storedScopeCheck(principal, M.listJobAttempts.path, `job ${job.id}`, job.queue);
      return { attempts: (await store.jobAttempts({ id: job.id })).map(attemptToPb) };
    }),
    listJobs: unary(deps, M.listJobs.path, async (req, _call, principal) => {
      const states = req.states.map((s) => {
        const state = jobStateFromPb(s);
        if (!state) throw invalidArgument(`states contains an unknown state (${s})`);
        return state;
      });
      scopeCheckFilter(principal, M.listJobs.path, req.queue);
      const limit = req.pageSize === 0 ? DEFAULT_PAGE_SIZE : checkIntRange('page_size', req.pageSize, 1, MAX_PAGE_SIZE);
      const page = await store.jobList({
        queue: req.queue ? checkName('queue', req.queue) : null,
        states: states as JobState[],
        type: req.type ? checkName('type', req.type) : null,
        idempotencyKey: req.idempotencyKey ? checkIdempotencyKey(req.idempotencyKey) : null,
        errorGroup: req.errorGroup === undefined ? null : checkErrorGroup('error_group', req.errorGroup),
        limit,
        afterId: pageTokenDecode(req.pageToken),
      });
      return { jobs: page.jobs.map(jobToPb), nextPageToken: pageTokenEncode(page.nextAfterId) };
    }),
    listDeadLetterGroups: unary(deps, M.listDeadLetterGroups.path, async (req, _call, principal) => {
      const queue = req.queue ? checkName('queue', req.queue) : null;
      scopeCheckFilter(principal, M.listDeadLetterGroups.path, queue);
      const limit = req.limit === 0 ? DEFAULT_DEAD_LETTER_GROUPS : checkIntRange('limit', req.limit, 1, MAX_DEAD_LETTER_GROUPS);
      const { groups, truncated, totalGroups } = await store.jobDeadLetterGroups({ queue, limit });
      return { groups: groups.map(deadLetterGroupToPb), truncated, totalGroups };
    }),
    cancelJob: unary(deps, M.cancelJob.path, async (req, _call, principal) => {
      const id = checkUuid('id', req.id);
      await jobScopeCheck(store, principal, M.cancelJob.path, id);
      await cascadeScopeCheck(store, principal, 'cancel', id);
      const job = await store.jobCancel({ id, actor: auditActor(principal) });
      logger.info({ job_id: job.id, queue: job.queue, type: job.type, state: job.state }, 'job cancel requested');
      return { job: jobToPb(job) };
    }),
    retryJob: unary(deps, M.retryJob.path, async (req, _call, principal) => {
      const id = checkUuid('id', req.id);
      await jobScopeCheck(store, principal, M.retryJob.path, id);
      await cascadeScopeCheck(store, principal, 'retry', id);
      const job = await store.jobRetry({ id, actor: auditActor(principal) });
      logger.info({ job_id: job.id, queue: job.queue, type: job.type }, 'job retried by operator');
      return { job: jobToPb(job) };
    }),
    retryJobs: unary(deps, M.retryJobs.path, async (req, call, principal) => {
      const filter = bulkFilter('retried', req.filter, RETRYABLE_STATES);
      scopeCheckFilter(principal, M.retryJobs.path, filter.queue);
      await cascadeScopeCheck(store, principal, 'retry', filter);
      return bulkAnswer(deps, retryAction, req, filter, call, principal);
    }),
    purgeJobs: unary(deps, M.purgeJobs.path, async (req, call, principal) => {
      const filter = bulkFilter('purged', req.filter, FINISHED_STATES);
      scopeCheckFilter(principal, M.purgeJobs.path, filter.queue);
      return bulkAnswer(deps, purgeAction, req, filter, call, principal);
    }),
    cancelJobs: unary(deps, M.cancelJobs.path, async (req, call, principal) => {
      const filter = bulkFilter('cancelled', req.filter, CANCELLABLE_STATES);
      scopeCheckFilter(principal, M.cancelJobs.path, filter.queue);
      await cascadeScopeCheck(store, principal, 'cancel', filter);
      const { count } = await bulkAnswer(deps, cancelAction, req, filter, call, principal);
      return { count };
    }),
  };
}

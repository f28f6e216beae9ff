import { LEASE_LOST_TEXT } from '../domain/codes.js';
import { EvoraError, failedPrecondition, invalidArgument, unauthenticated } from '../domain/errors.js';
import type { LeaseRef } from '../domain/job.js';
import { checkCompleteResult, checkDate, checkIntRange, checkJobTypes, checkName, checkProgressReport, checkUuid, checkWorkerQueues, errorText } from '../domain/validate.js';
import { WorkerServiceService, type WorkerServiceServer } from '../gen/evora/v1/worker.js';
import { durationToSeconds, jobToPb, leasedJobToPb, progressInput, workerInfoToPb } from './convert.js';
import type { ServiceDeps } from './deps.js';
import { jobScopeCheck, scopeCheck, streamAuthenticated } from './auth.js';
import { queueInScope, scoped } from '../domain/auth.js';
import { unary } from './unary.js';
import { WorkStream, type WorkStreamDeps } from './work-stream.js';

/** Longest long-poll of a ClaimJobs call. */
const MAX_WAIT_MS = 60_000;

/** The lease a unary report names; INVALID_ARGUMENT unless both are UUIDs. */
function leaseRef(req: { jobId: string; leaseToken: string }): LeaseRef {
  return { id: checkUuid('job_id', req.jobId), token: checkUuid('lease_token', req.leaseToken) };
}

/** A refused write on a unary call: the lease is not current (FAILED_PRECONDITION). */
function leaseLost() {
  return failedPrecondition(`lease lost: ${LEASE_LOST_TEXT.expired}`);
}

/**
 * WorkerService: the Work stream (src/grpc/work-stream.ts) and its unary twins for workers
 * that cannot stream. The twins follow the stream's rules: a malformed job id or lease
 * token is INVALID_ARGUMENT, a lease that is not current is FAILED_PRECONDITION, and a
 * snooze without run_at means now.
 */
export function workerService(deps: ServiceDeps): WorkerServiceServer {
  const { store, dispatcher, logger, maxPayloadBytes } = deps;

  /** The shortest lease of the worker's queues (a queue that does not exist yet counts with the default). */
  async function leaseSecondsFor(queues: string[]): Promise<number> {
    const names = [...new Set(queues)];
    const known = await store.queueLeaseSeconds({ queues: names });
    const leases = [...known.values()];
    if (known.size < names.length) leases.push(deps.defaultLeaseSeconds);
    return Math.min(...leases);
  }
  const streamDeps: WorkStreamDeps = {
    dispatcher,
    logger,
    maxPayloadBytes,
    maxMessageBytes: deps.maxMessageBytes,
    helloTimeoutMs: deps.helloTimeoutMs,
    leaseSecondsFor,
    streams: deps.streams,
    auth: deps.auth,
  };
  const M = WorkerServiceService;

  return {
    // Authenticated when the stream opens (refused with the status at once); the stream
    // checks hello.queues against the token's scope and ends when the token stops working.
    work: (call) => streamAuthenticated(deps, M.work.path, call, (p) => WorkStream.start(call, streamDeps, p)),
    claimJobs: unary(deps, M.claimJobs.path, async (req, call, principal) => {
      checkName('worker_id', req.workerId);
      checkWorkerQueues('queues', req.queues);
      scopeCheck(principal, M.claimJobs.path, req.queues);
      const max = req.max === 0 ? 1 : checkIntRange('max', req.max, 1, 1000);
      const waitMs = req.wait ? Math.round(durationToSeconds(req.wait) * 1000) : 0;
      if (waitMs < 0 || waitMs > MAX_WAIT_MS) throw invalidArgument(`wait must be from 0 to ${MAX_WAIT_MS / 1000}s`);
      const types = checkJobTypes('job_types', req.jobTypes);
      const abort = new AbortController();
      call.on('cancelled', () => abort.abort());
      // A caller gone while the call was authenticated is not claimed for.
      if (call.cancelled) abort.abort();
      // Nor one whose token is revoked (or whose anonymity ends) while the call waits:
      // jobs a claim in flight took are given back, as for a caller gone.
      let refused: string | null = null;
      const unsubscribe = deps.auth.onPrincipalInvalidated(principal, (reason) => {
        refused = reason;
        abort.abort();
      });
      let jobs;
      try {
        jobs = await dispatcher.claimUnary({ workerId: req.workerId, queues: req.queues, max, waitMs, types, signal: abort.signal });
      } finally {
        unsubscribe();
      }
      if (refused !== null) throw unauthenticated(refused);
      return { jobs: jobs.map(leasedJobToPb) };
    }),
    extendLease: unary(deps, M.extendLease.path, async (req, _call, principal) => {
      const lease = leaseRef(req);
      await jobScopeCheck(store, principal, M.extendLease.path, lease.id);
      const r = await dispatcher.heartbeat(null, [lease]);
      const e = r.extended[0];
      if (!e) throw leaseLost();
      return { leaseExpiresAt: e.lockedUntil, cancelRequested: e.cancelRequested };
    }),
    completeJob: unary(deps, M.completeJob.path, async (req, _call, principal) => {
      const lease = leaseRef(req);
      await jobScopeCheck(store, principal, M.completeJob.path, lease.id);
      const out = await dispatcher.complete(null, { ...lease, ...checkCompleteResult(req.result, req.resultJson, maxPayloadBytes) });
      if (!out.accepted) throw leaseLost();
      // A completion reports only what changed; COMPLETED is final, so this read is that job.
      // A job gone by then (its queue deletes at completion, or it was purged since) was
      // completed all the same: the answer is OK without a job, never NOT_FOUND.
      const job = await store.jobGet({ id: lease.id }).catch((err: unknown) => {
        if (err instanceof EvoraError && err.code === 'NOT_FOUND') return null;
        throw err;
      });
      return { job: job ? jobToPb(job) : undefined };
    }),
    failJob: unary(deps, M.failJob.path, async (req, _call, principal) => {
      const lease = leaseRef(req);
      await jobScopeCheck(store, principal, M.failJob.path, lease.id);
      const retryAt = checkDate('retry_at', req.retryAt) ?? null;
      const out = await dispatcher.fail(null, { ...lease, error: errorText(req.error), retryable: !req.nonRetryable, retryAt });
      if (!out.accepted) throw leaseLost();
      return { job: out.job ? jobToPb(out.job) : undefined };
    }),
    listWorkers: unary(deps, M.listWorkers.path, async (req, _call, principal) => {
      const queue = req.queue ? checkName('queue', req.queue) : null;
      if (queue) scopeCheck(principal, M.listWorkers.path, [queue]);
      const sessions = await store.workerSessionList({ queues: queue ? [queue] : null });
      // A token limited to queues sees the sessions that take one of its queues, naming only
      // those: the names of the others are not its to read.
      const visible = scoped(principal)
        ? sessions
            .map((s) => ({ ...s, queues: s.queues.filter((q) => queueInScope(principal.queues, q)) }))
            .filter((s) => s.queues.length > 0)
        : sessions;
      return { workers: visible.map(workerInfoToPb) };
    }),
    reportProgress: unary(deps, M.reportProgress.path, async (req, _call, principal) => {
      const report = checkProgressReport(progressInput(req), maxPayloadBytes, new Date());
      await jobScopeCheck(store, principal, M.reportProgress.path, report.id);
      // Answers once the coalesced report is written (within about a second).
      if (!(await dispatcher.progress(null, report))) throw leaseLost();
      return {};
    }),
    snoozeJob: unary(deps, M.snoozeJob.path, async (req, _call, principal) => {
      const lease = leaseRef(req);
      await jobScopeCheck(store, principal, M.snoozeJob.path, lease.id);
      // run_at unset means now: the job is claimable again at once.
      const runAt = checkDate('run_at', req.runAt) ?? null;
      const out = await dispatcher.snooze(null, { ...lease, runAt });
      if (!out.accepted) throw leaseLost();
      return { job: out.job ? jobToPb(out.job) : undefined };
    }),
  };
}

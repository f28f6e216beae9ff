import { status, type sendUnaryData, type ServerDuplexStream, type ServerUnaryCall } from '@grpc/grpc-js';
import type { Dispatcher, SessionMessage, WorkerSession } from '../dispatcher/dispatcher.js';
import { failedPrecondition, invalidArgument } from '../domain/errors.js';
import type {
  JobServiceServer,
  SubmitJobRequest,
} from '../gen/evora/v1/job.js';
import type { QueueServiceServer } from '../gen/evora/v1/queue.js';
import type {
  ServerAck,
  WorkerComplete,
  WorkerFail,
  WorkerServiceServer,
  WorkRequest,
  WorkResponse,
} from '../gen/evora/v1/worker.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import type { JobState, JobSubmitInput } from '../domain/job.js';
import { telemetryStats, type QueueTelemetry, type TelemetrySink } from '../telemetry/projection.js';
import type { QueueStats } from '../gen/evora/v1/queue.js';
import type { ServerMetrics } from '../telemetry/metrics.js';
import {
  backoffKindFromPb,
  durationToSeconds,
  jobStateFromPb,
  jobToPb,
  leasedJobToPb,
  queueToPb,
  ACK_RESULT_TO_PB,
  CANCEL_REASON_TO_PB,
  DRAIN_REASON_TO_PB,
  LEASE_LOST_REASON_TO_PB,
} from './convert.js';
import { DRAIN_TEXT, LEASE_LOST_TEXT, type AckResult } from '../domain/codes.js';
import { toServiceError } from './status.js';
import { leasedJobsEncode, type EncodedWorkResponse } from './wire.js';
import {
  DEFAULT_PAGE_SIZE,
  MAX_BATCH,
  MAX_PAGE_SIZE,
  MAX_SLOTS,
  checkDate,
  checkIdempotencyKey,
  checkIntRange,
  checkJsonSize,
  checkMaxAttempts,
  checkName,
  checkPriority,
  pageTokenDecode,
  pageTokenEncode,
} from '../domain/validate.js';

/**
 * The gRPC layer: translates protobuf requests into store and dispatcher calls and domain
 * errors into statuses (through toServiceError), and does nothing else.
 */

/** What the gRPC handlers need. */
export interface ServiceDeps {
  store: Store;
  dispatcher: Dispatcher;
  logger: Logger;
  maxPayloadBytes: number;
  /** Lease length told to workers whose queues are not configured yet. */
  defaultLeaseSeconds: number;
  /** Counters for submits (the dispatcher counts the rest). */
  metrics: ServerMetrics;
  /** Where stats are read from (never the queue tables). */
  telemetry: TelemetrySink;
  /** Open Work streams, so shutdown can end them after the drain. */
  streams: Set<WorkStreamHandle>;
}

/** An open Work stream as shutdown sees it. */
export interface WorkStreamHandle {
  /** Sends what is still queued for the worker (acks) and ends the stream. */
  end(): void;
}

/** Wraps a unary handler: validation and domain errors become statuses, nothing escapes. */
function unary<Req, Res>(logger: Logger, method: string, fn: (req: Req, call: ServerUnaryCall<Req, Res>) => Promise<Res>) {
  return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
    fn(call.request, call).then(
      (res) => callback(null, res),
      (err: unknown) => callback(toServiceError(err, logger, { method })),
    );
  };
}

function submitInput(req: SubmitJobRequest, maxPayloadBytes: number): JobSubmitInput {
  return {
    queue: checkName('queue', req.queue),
    type: checkName('type', req.type),
    payload: checkJsonSize('payload', req.payload, maxPayloadBytes),
    priority: checkPriority(req.priority),
    runAt: checkDate('run_at', req.runAt) ?? null,
    idempotencyKey: checkIdempotencyKey(req.idempotencyKey) || null,
    maxAttempts: checkMaxAttempts(req.maxAttempts) || null,
  };
}

function checkJobId(id: string): string {
  if (!id) throw invalidArgument('id is required');
  return id;
}

/** JobService: producers and operators. */
export function jobService(deps: ServiceDeps): JobServiceServer {
  const { store, dispatcher, logger, maxPayloadBytes, metrics } = deps;
  return {
    submitJob: unary(logger, 'SubmitJob', async (req) => {
      const { job, created } = await dispatcher.submit(submitInput(req, maxPayloadBytes));
      if (created) {
        metrics.jobsSubmitted.inc({ queue: job.queue });
        logger.debug({ job_id: job.id, queue: job.queue, type: job.type, attempt: 0 }, 'job submitted');
      }
      return { job: jobToPb(job), created };
    }),
    submitJobs: unary(logger, 'SubmitJobs', async (req) => {
      if (req.jobs.length > MAX_BATCH) throw invalidArgument(`at most ${MAX_BATCH} jobs per SubmitJobs call`);
      const inputs = req.jobs.map((j, i) => {
        try {
          return submitInput(j, maxPayloadBytes);
        } catch (err) {
          throw invalidArgument(`jobs[${i}]: ${(err as Error).message}`);
        }
      });
      const results = await store.jobSubmitMany({ jobs: inputs });
      for (const r of results) if (r.created) metrics.jobsSubmitted.inc({ queue: r.job.queue });
      return { results: results.map((r) => ({ job: jobToPb(r.job), created: r.created })) };
    }),
    getJob: unary(logger, 'GetJob', async (req) => ({ job: jobToPb(await store.jobGet({ id: checkJobId(req.id) })) })),
    listJobs: unary(logger, 'ListJobs', async (req) => {
      const states = req.states.map((s) => {
        const state = jobStateFromPb(s);
        if (!state) throw invalidArgument(`states contains an unknown state (${s})`);
        return state;
      });
      const limit = req.pageSize === 0 ? DEFAULT_PAGE_SIZE : checkIntRange('page_size', req.pageSize, 1, MAX_PAGE_SIZE);
      const page = await store.jobList({
        queue: req.queue ? checkName('queue', req.queue) : null,
        states: states as JobState[],
        type: req.type ? checkName('type', req.type) : null,
        limit,
        afterId: pageTokenDecode(req.pageToken),
      });
      return { jobs: page.jobs.map(jobToPb), nextPageToken: pageTokenEncode(page.nextAfterId) };
    }),
    cancelJob: unary(logger, 'CancelJob', async (req) => {
      const job = await store.jobCancel({ id: checkJobId(req.id) });
      logger.info({ job_id: job.id, queue: job.queue, type: job.type, state: job.state }, 'job cancel requested');
      return { job: jobToPb(job) };
    }),
    retryJob: unary(logger, 'RetryJob', async (req) => {
      const job = await store.jobRetry({ id: checkJobId(req.id) });
      logger.info({ job_id: job.id, queue: job.queue, type: job.type }, 'job retried by operator');
      return { job: jobToPb(job) };
    }),
  };
}

function queueStatsToPb(name: string, t: QueueTelemetry | null, workers: { workers: number; freeSlots: number }, lag: number): QueueStats {
  const pct = (p: { p50: number | null; p95: number | null; p99: number | null } | undefined) => ({
    p50Ms: p?.p50 ?? 0,
    p95Ms: p?.p95 ?? 0,
    p99Ms: p?.p99 ?? 0,
  });
  const c = t?.counts ?? {};
  return {
    queue: name,
    pending: c.PENDING ?? 0,
    running: c.RUNNING ?? 0,
    completed: c.COMPLETED ?? 0,
    dlq: c.DLQ ?? 0,
    cancelled: c.CANCELLED ?? 0,
    throughput: { last1m: t?.throughput.m1 ?? 0, last5m: t?.throughput.m5 ?? 0, last60m: t?.throughput.m60 ?? 0 },
    wait: pct(t?.waitMs),
    run: pct(t?.runMs),
    failureRate: t?.failureRate ?? 0,
    connectedWorkers: workers.workers,
    freeSlots: workers.freeSlots,
    submitted60m: t?.submitted60m ?? 0,
    completed60m: t?.completed60m ?? 0,
    failed60m: t?.failed60m ?? 0,
    deadLettered60m: t?.deadLettered60m ?? 0,
    outboxLagEvents: lag,
  };
}

/** QueueService: operators configure, pause and resume queues, and read their stats. */
export function queueService(deps: ServiceDeps): QueueServiceServer {
  const { store, logger, telemetry, dispatcher } = deps;
  return {
    getQueueStats: unary(logger, 'GetQueueStats', async (req) => {
      const queue = await store.queueGet({ name: checkName('name', req.name) });
      const [[stats], lag] = await Promise.all([telemetryStats(telemetry, { queues: [queue.name] }), store.outboxLag()]);
      return { stats: queueStatsToPb(queue.name, stats ?? null, dispatcher.queueWorkers(queue.name), lag.events) };
    }),
    listQueueStats: unary(logger, 'ListQueueStats', async () => {
      const [queues, all, lag] = await Promise.all([store.queueList(), telemetryStats(telemetry, { queues: null }), store.outboxLag()]);
      const byName = new Map(all.map((s) => [s.queue, s]));
      return {
        stats: queues.map((q) => queueStatsToPb(q.name, byName.get(q.name) ?? null, dispatcher.queueWorkers(q.name), lag.events)),
      };
    }),
    upsertQueue: unary(logger, 'UpsertQueue', async (req) => {
      const name = checkName('name', req.name);
      const existed = await store.queueGet({ name }).then(
        () => true,
        () => false,
      );
      const b = req.backoff;
      if (b && (b.jitter < 0 || b.jitter > 1 || Number.isNaN(b.jitter))) throw invalidArgument('backoff.jitter must be from 0 to 1');
      const base = b?.base ? durationToSeconds(b.base) : undefined;
      const cap = b?.cap ? durationToSeconds(b.cap) : undefined;
      if ((base ?? 0) < 0 || (cap ?? 0) < 0) throw invalidArgument('backoff durations must not be negative');
      const queue = await store.queueUpsert({
        name,
        maxAttempts: req.maxAttempts === undefined ? null : checkIntRange('max_attempts', req.maxAttempts, 1, 1000),
        leaseSeconds: req.leaseSeconds === undefined ? null : checkIntRange('lease_seconds', req.leaseSeconds, 1, 86_400),
        maxConcurrency:
          req.maxConcurrency === undefined ? null : checkIntRange('max_concurrency', req.maxConcurrency, 0, 1_000_000),
        backoffKind: b ? (backoffKindFromPb(b.kind) ?? null) : null,
        backoffBaseSeconds: base ?? null,
        backoffCapSeconds: cap ?? null,
        backoffJitter: b ? b.jitter : null,
      });
      return { queue: queueToPb(queue), created: !existed };
    }),
    getQueue: unary(logger, 'GetQueue', async (req) => ({ queue: queueToPb(await store.queueGet({ name: checkName('name', req.name) })) })),
    listQueues: unary(logger, 'ListQueues', async () => ({ queues: (await store.queueList()).map(queueToPb) })),
    pauseQueue: unary(logger, 'PauseQueue', async (req) => {
      const queue = await store.queueSetPaused({ name: checkName('name', req.name), paused: true });
      logger.info({ queue: queue.name }, 'queue paused');
      return { queue: queueToPb(queue) };
    }),
    resumeQueue: unary(logger, 'ResumeQueue', async (req) => {
      const queue = await store.queueSetPaused({ name: checkName('name', req.name), paused: false });
      logger.info({ queue: queue.name }, 'queue resumed');
      return { queue: queueToPb(queue) };
    }),
  };
}

function sessionMessageToPb(msg: Exclude<SessionMessage, { kind: 'jobs' }>): WorkResponse {
  switch (msg.kind) {
    case 'cancel':
      return { msg: { $case: 'cancel', value: { jobId: msg.jobId, code: CANCEL_REASON_TO_PB[msg.reason] } } };
    case 'leaseLost':
      return {
        msg: { $case: 'leaseLost', value: { jobId: msg.jobId, reason: LEASE_LOST_TEXT[msg.reason], code: LEASE_LOST_REASON_TO_PB[msg.reason] } },
      };
    case 'drain':
      return { msg: { $case: 'drain', value: { reason: DRAIN_TEXT[msg.reason], code: DRAIN_REASON_TO_PB[msg.reason] } } };
  }
}

const MAX_WAIT_MS = 60_000;

/** WorkerService: the Work stream and its unary twins. */
export function workerService(deps: ServiceDeps): WorkerServiceServer {
  const { store, dispatcher, logger, maxPayloadBytes } = deps;

  async function leaseSecondsFor(queues: string[]): Promise<number> {
    const known = (await store.queueList()).filter((q) => queues.includes(q.name));
    return Math.min(deps.defaultLeaseSeconds, ...known.map((q) => q.leaseSeconds));
  }

  function work(call: ServerDuplexStream<WorkRequest, WorkResponse>): void {
    let session: WorkerSession | null = null;
    let opening = false;
    let log = logger;
    /** The worker said hello.accepts_batches: jobs and acks may go in batch messages. */
    let batches = false;
    /** Acks ready in this tick, sent together on setImmediate (batches only). */
    let acksQueued: ServerAck[] = [];
    const write = (res: WorkResponse | EncodedWorkResponse) => {
      // The Work method's serializer (workerServiceDefinition) passes encoded messages through.
      if (!call.writableEnded && !call.destroyed) call.write(res as WorkResponse);
    };
    const acksFlush = () => {
      if (acksQueued.length === 0) return;
      const acks = acksQueued;
      acksQueued = [];
      if (acks.length === 1) write({ msg: { $case: 'ack', value: acks[0] as ServerAck } });
      else write({ msg: { $case: 'acks', value: { acks } } });
    };
    /** Any other message goes after the acks already queued, so the worker sees them in order. */
    const send = (res: WorkResponse | EncodedWorkResponse) => {
      acksFlush();
      write(res);
    };
    const ackSend = (a: ServerAck) => {
      if (!batches) return write({ msg: { $case: 'ack', value: a } });
      acksQueued.push(a);
      if (acksQueued.length === 1) setImmediate(acksFlush);
    };
    const handle: WorkStreamHandle = {
      end: () => {
        acksFlush();
        if (!call.writableEnded) call.end();
      },
    };
    deps.streams.add(handle);
    const refuse = (message: string) => {
      call.emit('error', { code: status.INVALID_ARGUMENT, details: message });
    };
    /** Answers a write with an ack once it has committed. */
    const ack = (jobId: string, op: Promise<{ result: AckResult; reason: string }>) => {
      op.then(
        (a) => ackSend({ jobId, accepted: a.result === 'accepted', reason: a.reason, result: ACK_RESULT_TO_PB[a.result] }),
        (err: unknown) => {
          logger.error({ err, job_id: jobId }, 'worker write failed');
          ackSend({ jobId, accepted: false, reason: 'internal error; retry the write', result: ACK_RESULT_TO_PB.retry_later });
        },
      );
    };
    const complete = (s: WorkerSession, v: WorkerComplete) => {
      let result;
      try {
        result = checkJsonSize('result', v.result, maxPayloadBytes);
      } catch (err) {
        return ack(v.jobId, Promise.resolve({ result: 'invalid', reason: (err as Error).message }));
      }
      ack(v.jobId, dispatcher.complete(s, { id: v.jobId, token: v.leaseToken, result }));
    };
    const fail = (s: WorkerSession, v: WorkerFail) => {
      ack(
        v.jobId,
        dispatcher.fail(s, {
          id: v.jobId,
          token: v.leaseToken,
          error: v.error.slice(0, 10_000),
          retryable: !v.nonRetryable,
          retryAt: v.retryAt ?? null,
        }),
      );
    };

    call.on('data', (req: WorkRequest) => {
      const m = req.msg;
      if (!m) return refuse('empty WorkRequest');
      if (!session) {
        if (opening) return; // messages sent before the welcome are ignored until the session exists
        if (m.$case !== 'hello') return refuse('the first message on a Work stream must be hello');
        const hello = m.value;
        try {
          checkName('hello.worker_id', hello.workerId);
          if (hello.queues.length === 0) throw invalidArgument('hello.queues must name at least one queue');
          hello.queues.forEach((q) => checkName('hello.queues', q));
          checkIntRange('hello.slots', hello.slots, 1, MAX_SLOTS);
        } catch (err) {
          return refuse((err as Error).message);
        }
        opening = true;
        batches = hello.acceptsBatches === true;
        void (async () => {
          try {
            const leaseSeconds = await leaseSecondsFor(hello.queues);
            const opened = await dispatcher.sessionOpen({
              workerId: hello.workerId,
              queues: hello.queues,
              slots: hello.slots,
              held: hello.held.map((l) => ({ id: l.jobId, token: l.leaseToken })),
              send: (msg) => {
                if (msg.kind === 'jobs') for (const m of leasedJobsEncode(msg.jobs, { batches })) send(m);
                else send(sessionMessageToPb(msg));
              },
            });
            if (call.destroyed || call.writableEnded) {
              dispatcher.sessionClose(opened);
              return;
            }
            session = opened;
            log = logger.child({ worker_id: hello.workerId, session_id: opened.id });
            log.info({ queues: hello.queues, slots: hello.slots }, 'worker session opened');
            send({
              msg: {
                $case: 'welcome',
                value: {
                  sessionId: opened.id,
                  leaseSeconds,
                  heartbeatIntervalSeconds: Math.max(1, Math.floor(leaseSeconds / 3)),
                  heartbeatIntervalMs: Math.floor((leaseSeconds * 1000) / 3),
                  acceptsBatches: true,
                },
              },
            });
            for (const jobId of opened.lostOnOpen) {
              send(sessionMessageToPb({ kind: 'leaseLost', jobId, reason: 'not_held_on_reconnect' }));
            }
          } catch (err) {
            call.emit('error', toServiceError(err, logger, { method: 'Work' }));
          }
        })();
        return;
      }
      const s = session;
      switch (m.$case) {
        case 'hello':
          return refuse('hello may be sent only once');
        case 'heartbeat':
          dispatcher
            .heartbeat(s, m.value.leases.map((l) => ({ id: l.jobId, token: l.leaseToken })))
            .then((r) => {
              const byId = new Map(m.value.leases.map((l) => [l.jobId, l.leaseToken]));
              send({
                msg: {
                  $case: 'heartbeatAck',
                  value: {
                    leases: r.extended.map((e) => ({
                      jobId: e.id,
                      leaseToken: byId.get(e.id) ?? '',
                      leaseExpiresAt: e.lockedUntil,
                      cancelRequested: e.cancelRequested,
                    })),
                  },
                },
              });
            })
            .catch((err: unknown) => log.error({ err }, 'heartbeat failed'));
          return;
        case 'complete':
          return complete(s, m.value);
        case 'completes':
          // Each report on its own, as if sent alone; the dispatcher's batcher writes
          // the ones of this tick in one statement.
          for (const v of m.value.completes) complete(s, v);
          return;
        case 'fail':
          return fail(s, m.value);
        case 'fails':
          for (const v of m.value.fails) fail(s, v);
          return;
        case 'snooze': {
          const v = m.value;
          if (!v.runAt) return ack(v.jobId, Promise.resolve({ result: 'invalid', reason: 'snooze.run_at is required' }));
          return ack(v.jobId, dispatcher.snooze(s, { id: v.jobId, token: v.leaseToken, runAt: v.runAt }));
        }
        case 'drain':
          log.info('worker draining');
          dispatcher.sessionDrain(s);
          return;
      }
    });

    const close = () => {
      deps.streams.delete(handle);
      if (session) {
        log.info({ held: session.held.size }, 'worker session closed');
        dispatcher.sessionClose(session);
        session = null;
      }
    };
    call.on('end', () => {
      close();
      handle.end();
    });
    call.on('error', close);
    call.on('close', close);
    call.on('cancelled', close);
  }

  async function leaseOrFail<T extends { accepted: boolean; job?: unknown }>(p: Promise<T>): Promise<T> {
    const out = await p;
    if (!out.accepted) throw failedPrecondition('lease lost: the lease expired or the job was given to another worker');
    return out;
  }

  return {
    work,
    claimJobs: unary(logger, 'ClaimJobs', async (req, call) => {
      checkName('worker_id', req.workerId);
      if (req.queues.length === 0) throw invalidArgument('queues must name at least one queue');
      req.queues.forEach((q) => checkName('queues', q));
      const max = req.max === 0 ? 1 : checkIntRange('max', req.max, 1, 1000);
      const waitMs = req.wait ? Math.round(durationToSeconds(req.wait) * 1000) : 0;
      if (waitMs < 0 || waitMs > MAX_WAIT_MS) throw invalidArgument(`wait must be from 0 to ${MAX_WAIT_MS / 1000}s`);
      const abort = new AbortController();
      call.on('cancelled', () => abort.abort());
      const jobs = await dispatcher.claimUnary({ workerId: req.workerId, queues: req.queues, max, waitMs, signal: abort.signal });
      return { jobs: jobs.map(leasedJobToPb) };
    }),
    extendLease: unary(logger, 'ExtendLease', async (req) => {
      const r = await dispatcher.heartbeat(null, [{ id: req.jobId, token: req.leaseToken }]);
      const e = r.extended[0];
      if (!e) throw failedPrecondition('lease lost: the lease expired or the job was given to another worker');
      return { leaseExpiresAt: e.lockedUntil, cancelRequested: e.cancelRequested };
    }),
    completeJob: unary(logger, 'CompleteJob', async (req) => {
      const result = checkJsonSize('result', req.result, maxPayloadBytes);
      await leaseOrFail(dispatcher.complete(null, { id: req.jobId, token: req.leaseToken, result }));
      // A completion reports only what changed; COMPLETED is final, so this read is that job.
      return { job: jobToPb(await store.jobGet({ id: req.jobId })) };
    }),
    failJob: unary(logger, 'FailJob', async (req) => {
      const out = await leaseOrFail(
        dispatcher.fail(null, {
          id: req.jobId,
          token: req.leaseToken,
          error: req.error.slice(0, 10_000),
          retryable: !req.nonRetryable,
          retryAt: req.retryAt ?? null,
        }),
      );
      return { job: out.job ? jobToPb(out.job) : undefined };
    }),
    snoozeJob: unary(logger, 'SnoozeJob', async (req) => {
      if (!req.runAt) throw invalidArgument('run_at is required');
      const out = await leaseOrFail(dispatcher.snooze(null, { id: req.jobId, token: req.leaseToken, runAt: req.runAt }));
      return { job: out.job ? jobToPb(out.job) : undefined };
    }),
  };
}

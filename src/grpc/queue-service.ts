import { DEFAULT_SERIES_MINUTES, MAX_SERIES_MINUTES, checkBackoffNumbers, checkIntRange, checkName, checkRateLimit, checkRetentionSeconds, checkTimeoutSeconds } from '../domain/validate.js';
import { scoped, type Principal } from '../domain/auth.js';
import type { WorkerSessionInfo } from '../domain/job.js';
import { QueueServiceService, type QueueServiceServer, type QueueStats } from '../gen/evora/v1/queue.js';
import type { Duration } from '../gen/google/protobuf/duration.js';
import { telemetrySeries, telemetryStats, type QueueTelemetry } from '../telemetry/projection.js';
import { backoffKindFromPb, durationToSeconds, queueToPb, seriesPointToPb } from './convert.js';
import type { ServiceDeps } from './deps.js';
import { scopeCheck, scopeFilter } from './auth.js';
import { unary } from './unary.js';
import { auditActor } from '../domain/audit.js';
import type { OutboxLag } from '../store/store.js';

/** One queue's stats as the proto message: telemetry's figures, this server's workers, the outbox lag. */
function queueStatsToPb(name: string, t: QueueTelemetry | null, workers: { workers: number; freeSlots: number }, lag: OutboxLag): QueueStats {
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
    waiting: c.WAITING ?? 0,
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
    outboxLagEvents: lag.events,
    outboxLagEstimated: lag.estimated,
  };
}

/** Sessions (of every server) taking jobs from `queue`, and their free slots. */
function queueWorkers(sessions: readonly WorkerSessionInfo[], queue: string): { workers: number; freeSlots: number } {
  const of = sessions.filter((s) => s.queues.includes(queue));
  return { workers: of.length, freeSlots: of.reduce((n, s) => n + s.freeSlots, 0) };
}

/**
 * The names of those of `queues` in the principal's scope, for a telemetry read of a token
 * limited to queues; null (every queue) for a token of every queue. A scoped read of
 * every queue's rows, filtered afterwards, cost a viewer of one small queue what the whole
 * cluster's telemetry costs: a day's series over 500 busy queues took 20 s and 1 GB of the
 * server's heap, and slowed every other tenant's calls a hundredfold meanwhile.
 */
function scopeQueues(principal: Principal, queues: readonly { name: string }[]): string[] | null {
  return scoped(principal) ? scopeFilter(principal, [...queues], (q) => q.name).map((q) => q.name) : null;
}

/** QueueService: operators configure, pause, resume and delete queues, and read their stats. */
export function queueService(deps: ServiceDeps): QueueServiceServer {
  const { store, logger, telemetry } = deps;
  const M = QueueServiceService;
  return {
    getQueueStats: unary(deps, M.getQueueStats.path, async (req, _call, principal) => {
      const name = checkName('name', req.name);
      scopeCheck(principal, M.getQueueStats.path, [name]);
      // The window by the database's clock, the events' own (telemetryStats).
      const [queue, now] = await Promise.all([store.queueGet({ name }), store.dbNow()]);
      const [[stats], lag, sessions] = await Promise.all([
        telemetryStats(telemetry, { queues: [queue.name], now }),
        store.outboxLag(),
        store.workerSessionList({ queues: [queue.name] }),
      ]);
      return { stats: queueStatsToPb(queue.name, stats ?? null, queueWorkers(sessions, queue.name), lag) };
    }),
    listQueueStats: unary(deps, M.listQueueStats.path, async (_req, _call, principal) => {
      const queues = scopeFilter(principal, await store.queueList(), (q) => q.name);
      // A token limited to queues reads its queues' telemetry only (scopeQueues).
      const names = scopeQueues(principal, queues);
      const [all, lag, sessions] = await Promise.all([
        store.dbNow().then((now) => telemetryStats(telemetry, { queues: names, now })),
        store.outboxLag(),
        store.workerSessionList({ queues: names }),
      ]);
      const byName = new Map(all.map((s) => [s.queue, s]));
      return {
        stats: queues.map((q) => queueStatsToPb(q.name, byName.get(q.name) ?? null, queueWorkers(sessions, q.name), lag)),
      };
    }),
    getQueueSeries: unary(deps, M.getQueueSeries.path, async (req, _call, principal) => {
      const queue = req.queue ? checkName('queue', req.queue) : null;
      const minutes = req.minutes === 0 ? DEFAULT_SERIES_MINUTES : checkIntRange('minutes', req.minutes, 1, MAX_SERIES_MINUTES);
      if (queue) scopeCheck(principal, M.getQueueSeries.path, [queue]);
      // Every queue summed: a token limited to queues sums, and reads, only its own (scopeQueues).
      const queues = queue ? [queue] : scoped(principal) ? scopeQueues(principal, await store.queueList()) : null;
      const now = await store.dbNow();
      const points = await telemetrySeries(telemetry, { queues, minutes, now });
      return { points: points.map(seriesPointToPb) };
    }),
    upsertQueue: unary(deps, M.upsertQueue.path, async (req, _call, principal) => {
      const name = checkName('name', req.name);
      scopeCheck(principal, M.upsertQueue.path, [name]);
      const b = req.backoff;
      const base = b?.base ? durationToSeconds(b.base) : undefined;
      const cap = b?.cap ? durationToSeconds(b.cap) : undefined;
      if (b) checkBackoffNumbers({ jitter: b.jitter, baseSeconds: base, capSeconds: cap });
      // Unset keeps the current retention; 0 keeps finished jobs forever.
      const retention = (field: string, d: Duration | undefined) => (d ? checkRetentionSeconds(field, durationToSeconds(d)) : null);
      const { queue, created } = await store.queueUpsert({
        actor: auditActor(principal),
        name,
        maxAttempts: req.maxAttempts === undefined ? null : checkIntRange('max_attempts', req.maxAttempts, 1, 1000),
        leaseSeconds: req.leaseSeconds === undefined ? null : checkIntRange('lease_seconds', req.leaseSeconds, 1, 86_400),
        maxConcurrency:
          req.maxConcurrency === undefined ? null : checkIntRange('max_concurrency', req.maxConcurrency, 0, 1_000_000),
        backoffKind: b ? (backoffKindFromPb(b.kind) ?? null) : null,
        backoffBaseSeconds: base ?? null,
        backoffCapSeconds: cap ?? null,
        backoffJitter: b ? b.jitter : null,
        completedRetentionSeconds: retention('completed_retention', req.completedRetention),
        cancelledRetentionSeconds: retention('cancelled_retention', req.cancelledRetention),
        dlqRetentionSeconds: retention('dlq_retention', req.dlqRetention),
        // 0 clears the default; otherwise a job's timeout rules apply.
        attemptTimeoutSeconds: !req.attemptTimeout
          ? null
          : durationToSeconds(req.attemptTimeout) === 0
            ? 0
            : checkTimeoutSeconds(durationToSeconds(req.attemptTimeout), 'attempt_timeout'),
        rateLimit: req.rateLimit ? checkRateLimit(req.rateLimit.perSecond, req.rateLimit.burst) : null,
        maxConcurrencyPerKey:
          req.maxConcurrencyPerKey === undefined
            ? null
            : checkIntRange('max_concurrency_per_key', req.maxConcurrencyPerKey, 0, 1_000_000),
        deleteOnComplete: req.deleteOnComplete ?? null,
      });
      return { queue: queueToPb(queue), created };
    }),
    getQueue: unary(deps, M.getQueue.path, async (req, _call, principal) => {
      const name = checkName('name', req.name);
      scopeCheck(principal, M.getQueue.path, [name]);
      return { queue: queueToPb(await store.queueGet({ name })) };
    }),
    listQueues: unary(deps, M.listQueues.path, async (_req, _call, principal) => ({
      queues: scopeFilter(principal, await store.queueList(), (q) => q.name).map(queueToPb),
    })),
    pauseQueue: unary(deps, M.pauseQueue.path, async (req, _call, principal) => {
      const name = checkName('name', req.name);
      scopeCheck(principal, M.pauseQueue.path, [name]);
      const queue = await store.queueSetPaused({ name, paused: true, actor: auditActor(principal) });
      logger.info({ queue: queue.name }, 'queue paused');
      return { queue: queueToPb(queue) };
    }),
    resumeQueue: unary(deps, M.resumeQueue.path, async (req, _call, principal) => {
      const name = checkName('name', req.name);
      scopeCheck(principal, M.resumeQueue.path, [name]);
      const queue = await store.queueSetPaused({ name, paused: false, actor: auditActor(principal) });
      logger.info({ queue: queue.name }, 'queue resumed');
      return { queue: queueToPb(queue) };
    }),
    deleteQueue: unary(deps, M.deleteQueue.path, async (req, _call, principal) => {
      const name = checkName('name', req.name);
      scopeCheck(principal, M.deleteQueue.path, [name]);
      await store.queueDelete({ name, actor: auditActor(principal) });
      logger.info({ queue: name }, 'queue deleted');
      return {};
    }),
  };
}

import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import pg from 'pg';
import type { ServerConfig } from './config.js';
import { embeddedPostgresStart, type EmbeddedPostgresHandle } from './embedded-postgres.js';
import { migrate } from '../store/migrate.js';
import { Dispatcher } from '../dispatcher/dispatcher.js';
import { JobServiceService } from '../gen/evora/v1/job.js';
import { QueueServiceService } from '../gen/evora/v1/queue.js';
import type { Logger } from '../logger.js';
import { Elector } from '../maintenance/elector.js';
import { Sweeper } from '../maintenance/sweeper.js';
import { Projector } from '../maintenance/projector.js';
import { PostgresTelemetrySink } from '../telemetry/pg-sink.js';
import { MongoTelemetrySink } from '../telemetry/mongo-sink.js';
import type { TelemetrySink } from '../telemetry/projection.js';
import type { JobWritten } from '../domain/job.js';
import { ServerMetrics, metricsServerStart } from '../telemetry/metrics.js';

/** The fields every job log line carries. */
function jobLogFields(job: JobWritten, workerId: string | null) {
  return { job_id: job.id, queue: job.queue, type: job.type, worker_id: workerId, attempt: job.attempt };
}
import { NotificationListener } from '../store/listener.js';
import { CHANNEL_JOB_AVAILABLE, CHANNEL_JOB_CANCEL, Store } from '../store/store.js';
import { reflectionAddToServer } from '../grpc/reflection.js';
import type { WorkStreamHandle } from '../grpc/deps.js';
import { jobService } from '../grpc/job-service.js';
import { queueService } from '../grpc/queue-service.js';
import { workerService } from '../grpc/worker-service.js';
import { workerServiceDefinition } from '../grpc/work-messages.js';

const SERVICE_NAMES = ['evora.v1.JobService', 'evora.v1.WorkerService', 'evora.v1.QueueService'];
const DEFAULT_LEASE_SECONDS = 30;

/** A running Evora server process: where it listens, its parts (for tests), and how to stop it. */
export interface EvoraServer {
  /** host:port the gRPC server is bound to. */
  address: string;
  port: number;
  databaseUrl: string;
  store: Store;
  dispatcher: Dispatcher;
  elector: Elector;
  sweeper: Sweeper;
  projector: Projector;
  telemetry: TelemetrySink;
  /** Graceful shutdown in the documented order. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Starts an Evora server: the database (embedded unless configured), migrations, the store,
 * the LISTEN connection, the dispatcher, leader election with the sweeper, and gRPC with
 * health and reflection.
 *
 * Shutdown order (stop()):
 *  1. health says NOT_SERVING; the dispatcher stops claiming and tells every worker to
 *     drain, then waits up to shutdownTimeoutMs for held jobs to be finished and committed;
 *  2. the gRPC server stops (open streams are closed; jobs still held keep their leases, so
 *     the workers can finish them on another server or the sweeper requeues them);
 *  3. background services stop: projector, sweeper, elector (leadership is released),
 *     the telemetry client, listener;
 *  4. the pool closes; 5. the embedded PostgreSQL stops.
 * Nothing is left RUNNING without a lease: the schema forbids it.
 */
export async function serverStart(config: ServerConfig, logger: Logger): Promise<EvoraServer> {
  let embedded: EmbeddedPostgresHandle | null = null;
  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    const dataDir = join(config.dataDir, 'pgdata');
    logger.info({ data_dir: dataDir, port: config.embeddedPgPort }, 'starting embedded PostgreSQL');
    embedded = await embeddedPostgresStart({
      dataDir,
      port: config.embeddedPgPort,
      onLog: (line) => logger.trace({ postgres: line.trim() }, 'postgres'),
    });
    databaseUrl = embedded.url;
  }
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    const migratePool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    // An idle client's error (the database going away while the pool ends) must not
    // become an uncaught exception: migrate() reports the errors that matter.
    migratePool.on('error', () => undefined);
    try {
      const applied = await migrate(migratePool);
      if (applied.length > 0) logger.info({ versions: applied }, 'migrations applied');
    } finally {
      await migratePool.end();
    }

    const store = new Store({ connectionString: databaseUrl, maxConnections: config.dbPoolSize, claimAsyncCommit: config.claimAsyncCommit });
    cleanups.push(() => store.close());
    const dispatcherLogger = logger.child({ component: 'dispatcher' });
    let metrics: ServerMetrics | null = null;
    const dispatcher = new Dispatcher({
      store,
      logger: dispatcherLogger,
      pollIntervalMs: config.pollIntervalMs,
      observer: {
        claimed: (queue, _asked, got, ms) => {
          if (got > 0) metrics?.claimSeconds.observe({ queue }, ms / 1000);
        },
        pushed: (session, job) => {
          metrics?.pushSeconds.observe({ queue: job.queue }, Math.max(0, Date.now() - job.runAt.getTime()) / 1000);
          dispatcherLogger.debug(jobLogFields(job, session.workerId), 'job pushed');
        },
        written: (write, job) => jobWritten(write, job),
      },
    });
    metrics = new ServerMetrics({ store, dispatcher });
    /** Counts and logs a job's new state after a worker's write or a sweep. */
    const jobWritten = (write: 'complete' | 'fail' | 'snooze' | 'expire', job: JobWritten) => {
      const fields = jobLogFields(job, job.workerId);
      if (job.state === 'COMPLETED') {
        metrics?.jobsCompleted.inc({ queue: job.queue });
        dispatcherLogger.debug(fields, 'job completed');
      } else if (job.state === 'DLQ') {
        metrics?.jobsFailed.inc({ queue: job.queue });
        metrics?.jobsDeadLettered.inc({ queue: job.queue });
        dispatcherLogger.warn({ ...fields, error: job.lastError }, 'job dead-lettered');
      } else if (write === 'snooze' && job.state === 'PENDING') {
        dispatcherLogger.debug({ ...fields, run_at: job.runAt }, 'job snoozed');
      } else if (job.state === 'PENDING') {
        metrics?.jobsFailed.inc({ queue: job.queue });
        const what = write === 'expire' ? 'lease expired' : 'job failed';
        dispatcherLogger.info({ ...fields, error: job.lastError, retry_at: job.runAt }, `${what}; will retry`);
      } else {
        dispatcherLogger.info(fields, `job ${job.state.toLowerCase()}`);
      }
    };
    const listener = new NotificationListener({
      connectionString: databaseUrl,
      channels: [CHANNEL_JOB_AVAILABLE, CHANNEL_JOB_CANCEL],
      onNotification: (n) => {
        if (n.channel === CHANNEL_JOB_AVAILABLE) dispatcher.notifyQueue(n.payload);
        else if (n.channel === CHANNEL_JOB_CANCEL) dispatcher.notifyCancel(n.payload);
      },
      onConnected: () => dispatcher.notifyAll(),
      onError: (err) => logger.warn({ err }, 'LISTEN connection lost; reconnecting'),
    });
    await listener.start();
    cleanups.push(() => listener.stop());
    dispatcher.start();

    const telemetry: TelemetrySink = config.mongodbUrl
      ? new MongoTelemetrySink(config.mongodbUrl)
      : new PostgresTelemetrySink(store.pool);
    cleanups.push(() => telemetry.close());

    const elector = new Elector({ connectionString: databaseUrl, intervalMs: config.electionIntervalMs, logger });
    const sweeper = new Sweeper({
      store,
      isLeader: () => elector.isLeader,
      logger,
      intervalMs: config.sweepIntervalMs,
      onSwept: (batch) => batch.jobs.forEach((job) => jobWritten('expire', job)),
    });
    const projector = new Projector({ store, sink: telemetry, isLeader: () => elector.isLeader, logger, intervalMs: config.projectIntervalMs });
    elector.start();
    sweeper.start();
    projector.start();
    cleanups.push(() => elector.stop(), () => sweeper.stop(), () => projector.stop());

    const server = new grpc.Server({
      'grpc.max_receive_message_length': config.maxMessageBytes,
      'grpc.max_send_message_length': config.maxMessageBytes,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.keepalive_time_ms': 30_000,
    });
    const streams = new Set<WorkStreamHandle>();
    const deps = {
      metrics,
      store,
      dispatcher,
      logger,
      maxPayloadBytes: config.maxPayloadBytes,
      defaultLeaseSeconds: DEFAULT_LEASE_SECONDS,
      streams,
      telemetry,
    };
    server.addService(JobServiceService, jobService(deps));
    server.addService(workerServiceDefinition, workerService(deps));
    server.addService(QueueServiceService, queueService(deps));
    const health = new HealthImplementation(Object.fromEntries(['', ...SERVICE_NAMES].map((s) => [s, 'SERVING' as const])));
    health.addToServer(server);
    reflectionAddToServer(server);

    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`${config.host}:${config.port}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(new Error(`cannot listen on ${config.host}:${config.port}: ${err.message}`, { cause: err })) : resolve(p),
      ),
    );
    const address = `${config.host}:${port}`;
    let metricsServer: { port: number; close(): Promise<void> } | null = null;
    if (config.metricsPort > 0) {
      metricsServer = await metricsServerStart({ host: config.host, port: config.metricsPort, metrics, store, logger });
      cleanups.push(() => metricsServer!.close());
      logger.info({ port: metricsServer.port }, `metrics on http://${config.host}:${metricsServer.port}/metrics`);
    }

    let stopping: Promise<void> | null = null;
    const stop = () =>
      (stopping ??= (async () => {
        logger.info('shutting down');
        for (const s of ['', ...SERVICE_NAMES]) health.setStatus(s, 'NOT_SERVING');
        const stillHeld = await dispatcher.drainAll(config.shutdownTimeoutMs);
        if (stillHeld > 0) logger.warn({ held: stillHeld }, 'workers still hold jobs; their leases run on');
        for (const stream of streams) stream.end();
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            server.forceShutdown();
            resolve();
          }, 1000);
          server.tryShutdown(() => {
            clearTimeout(timer);
            resolve();
          });
        });
        for (const cleanup of cleanups.reverse()) await cleanup();
        await embedded?.stop();
        logger.info('stopped');
      })());

    return { address, port, databaseUrl, store, dispatcher, elector, sweeper, projector, telemetry, stop };
  } catch (err) {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    await embedded?.stop();
    throw err;
  }
}

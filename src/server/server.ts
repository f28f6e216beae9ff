// Over 400 lines on purpose: serverStart builds every part in one order and partsStop stops
// them in the one documented reverse order; split, the two orders would drift apart.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { limitsWarning, type ServerConfig } from './config.js';
import { EMBEDDED_ROLE, embeddedPostgresStart, type EmbeddedPostgresHandle } from './embedded-postgres.js';
import { authStartCheck, bootstrapTokenEnsure } from './auth-start.js';
import { JobObserver } from './job-observer.js';
import { ReloadingServerCredentials } from './tls.js';
import { Authenticator } from '../auth/authenticator.js';
import { Dispatcher } from '../dispatcher/dispatcher.js';
import { AuditServiceService, TokenServiceService } from '../gen/evora/v1/auth.js';
import { QueueServiceService } from '../gen/evora/v1/queue.js';
import { ScheduleServiceService } from '../gen/evora/v1/schedule.js';
import type { Logger } from '../logger.js';
import { Maintainer } from '../maintenance/maintainer.js';
import { Sweeper } from '../maintenance/sweeper.js';
import { Projector } from '../maintenance/projector.js';
import { Pruner } from '../maintenance/pruner.js';
import { Scheduler } from '../maintenance/scheduler.js';
import { PostgresTelemetrySink } from '../telemetry/pg-sink.js';
import { MongoTelemetrySink } from '../telemetry/mongo-sink.js';
import type { TelemetrySink } from '../telemetry/projection.js';
import { ServerMetrics, metricsServerStart, type MetricsServer } from '../telemetry/metrics.js';
import { NotificationListener } from '../store/listener.js';
import { CHANNEL_JOB_AVAILABLE, CHANNEL_JOB_CANCEL, CHANNEL_SCHEDULE_CHANGED, CHANNEL_TOKENS_CHANGED, Store } from '../store/store.js';
import { reflectionAddToServer } from '../grpc/reflection.js';
import { OpenStreams } from '../grpc/open-streams.js';
import { auditService } from '../grpc/audit-service.js';
import { jobService, jobServiceDefinition } from '../grpc/job-service.js';
import { queueService } from '../grpc/queue-service.js';
import { scheduleService } from '../grpc/schedule-service.js';
import { tokenService } from '../grpc/token-service.js';
import { workerService } from '../grpc/worker-service.js';
import { workerServiceDefinition } from '../grpc/work-messages.js';
import { serviceNotReady } from '../grpc/not-ready.js';
import { grpcLogRedactInstall } from '../grpc/grpc-log.js';
import { definitionTolerant } from '../grpc/request-decode.js';
import { databaseReady } from './database-ready.js';
import { abortRace } from '../domain/abort.js';
import { migrate } from '../store/migrate.js';
import { DatabaseAvailability } from '../store/availability.js';
import { poolerDecide } from '../store/connections.js';
import { dbRoleEnsure } from '../store/roles.js';
import { HttpServer } from '../http/http-server.js';
import { loopbackHostRefusal } from '../http/browser-guard.js';
import { hostIsLoopback } from '../domain/auth.js';

const SERVICE_NAMES = [
  'evora.v1.JobService',
  'evora.v1.WorkerService',
  'evora.v1.QueueService',
  'evora.v1.ScheduleService',
  'evora.v1.TokenService',
  'evora.v1.AuditService',
];
/** The services' definitions, in the order of SERVICE_NAMES. */
export const SERVICE_DEFINITIONS: readonly grpc.ServiceDefinition[] = [
  jobServiceDefinition,
  workerServiceDefinition,
  QueueServiceService,
  ScheduleServiceService,
  TokenServiceService,
  AuditServiceService,
].map((d) => definitionTolerant(d as grpc.ServiceDefinition));
const DEFAULT_LEASE_SECONDS = 30;
/** How long the gRPC server waits for calls to end on their own before cancelling them. */
const GRPC_SHUTDOWN_GRACE_MS = 1000;

/** The leader-only services of a server process, run by its maintainer. */
export type ServerMaintainer = Maintainer<{ sweeper: Sweeper; projector: Projector; pruner: Pruner; scheduler: Scheduler }>;

/** Options of serverStart beyond the configuration. */
export interface ServerStartOptions {
  /**
   * Aborting it while the server starts (a SIGTERM while it waits for PostgreSQL) stops
   * what was built, in the shutdown order, and rejects with ServerStartAbortedError.
   */
  signal?: AbortSignal;
  /** Told the gRPC address as soon as the port is bound, before PostgreSQL is reached. */
  onListening?: (address: string) => void;
  /** The HTTP API's version in /openapi.json (the package's version). */
  version?: string;
}

/** serverStart's signal aborted before the server was ready; what it had built is stopped. */
export class ServerStartAbortedError extends Error {
  constructor() {
    super('start aborted');
    this.name = 'ServerStartAbortedError';
  }
}

/** A running Evora server process: where it listens, its parts (for tests), and how to stop it. */
export interface EvoraServer {
  /** host:port the gRPC server is bound to. */
  address: string;
  /** This server process's id (a UUID made at start): WorkerInfo.server_id of its sessions. */
  serverId: string;
  port: number;
  /** The HTTP port's base URL ("http://127.0.0.1:8080"), or null when it is off (EVORA_HTTP_PORT=0). */
  httpUrl: string | null;
  databaseUrl: string;
  store: Store;
  dispatcher: Dispatcher;
  /** Leader election and the leader-only services (`maintainer.services.sweeper`, ...). */
  maintainer: ServerMaintainer;
  telemetry: TelemetrySink;
  /** Graceful shutdown in the documented order. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * The parts built so far. `partsStop` stops whichever exist, so a start
 * that fails half way is undone by the same code, in the same order, as a normal stop.
 */
interface Parts {
  /** Aborted when shutdown begins: long-lived parts stop taking on new work. */
  shutdown: AbortController;
  embedded: EmbeddedPostgresHandle | null;
  store: Store | null;
  dispatcher: Dispatcher | null;
  listener: NotificationListener | null;
  telemetry: TelemetrySink | null;
  maintainer: ServerMaintainer | null;
  grpc: grpc.Server | null;
  health: HealthImplementation | null;
  streams: OpenStreams;
  /** The HTTP port: the JSON API, the dashboard, health and metrics. */
  http: HttpServer | null;
  metricsServer: MetricsServer | null;
  /** The gRPC port's TLS credentials when TLS is on (they poll their files until stopped). */
  tls: ReloadingServerCredentials | null;
  /** The API token cache (it reads the token table until stopped). */
  auth: Authenticator | null;
}

/**
 * The composition root: starts an Evora server, building every part in order:
 *  - the TLS files when configured, read and checked first (a bad one fails the start at once);
 *  - gRPC, bound first (so a taken port fails at once, before PostgreSQL starts), with
 *    health NOT_SERVING and reflection (unless turned off); every method answers
 *    UNAVAILABLE until ready;
 *  - the HTTP port right after it (src/http: same TLS; a taken port fails the start in
 *    one line too); /healthz answers, /readyz and every /v1 route answer 503 until ready;
 *  - the metrics port (EVORA_METRICS_PORT) after it, likewise: its /healthz answers,
 *    /metrics answers 503 until ready;
 *  - the database (embedded unless configured) and the store, waited for with capped
 *    exponential backoff while it is unreachable (./database-ready.ts), then migrations;
 *  - auth: the bootstrap admin token ensured (EVORA_BOOTSTRAP_ADMIN_TOKEN), the token cache
 *    started; with no token the server runs open on loopback only, or with --insecure-no-auth
 *    (authStartCheck);
 *  - metrics and the dispatcher, the LISTEN connection, the telemetry sink, the maintainer
 *    (leader election; the sweeper, the projector, the pruner and the scheduler run on the leader);
 *  - the services swap in and health says SERVING, the HTTP API gets the same
 *    implementations (its routes call the gRPC handlers in process), and so does the
 *    metrics port's /metrics.
 * Resolves once ready; `opts.onListening` hears the address as soon as the port is bound.
 *
 * Shutdown order (stop(), and a failed or aborted start, stop what exists in this order):
 *  1. health says NOT_SERVING, /readyz and the HTTP API answer 503, and the shutdown
 *     signal aborts (this process no longer tries to become the leader);
 *  2. the dispatcher stops claiming, tells every worker to drain, and waits up to
 *     shutdownTimeoutMs for held jobs to be finished and their writes committed;
 *  3. the Work streams and SubmitJobStreams end (each answers what it read first; one that
 *     opens from now on is ended at once);
 *  4. the gRPC server and the HTTP port stop together (calls and requests still open
 *     after a grace second are cancelled; jobs still held keep their leases, so workers
 *     can finish them on another server, or the sweeper requeues them), then the metrics
 *     endpoint closes and the token cache stops reading the token table;
 *  5. the maintainer stops: the leader services (sweeper, projector, pruner, scheduler) end their tick in
 *     progress, then the elector releases the leadership lock;
 *  6. the projector's telemetry sink closes;
 *  7. the LISTEN connection stops;
 *  8. the store closes its pool;
 *  9. the embedded PostgreSQL stops.
 * Nothing is left RUNNING without a lease: the schema forbids it.
 */
export async function serverStart(config: ServerConfig, logger: Logger, opts: ServerStartOptions = {}): Promise<EvoraServer> {
  const parts: Parts = {
    shutdown: new AbortController(),
    embedded: null,
    store: null,
    dispatcher: null,
    listener: null,
    telemetry: null,
    maintainer: null,
    grpc: null,
    health: null,
    streams: new OpenStreams(),
    http: null,
    metricsServer: null,
    tls: null,
    auth: null,
  };
  // The start ends early when the caller's signal aborts (a SIGTERM while waiting for PostgreSQL).
  const startSignal = opts.signal ?? new AbortController().signal;
  const limits = limitsWarning(config);
  if (limits) logger.warn({ max_payload_bytes: config.maxPayloadBytes, max_message_bytes: config.maxMessageBytes }, limits);
  const untilAborted = <T>(work: Promise<T>) => abortRace(work, startSignal, () => new ServerStartAbortedError());
  try {
    if (config.tlsCert && config.tlsKey) {
      const files = { certFile: config.tlsCert, keyFile: config.tlsKey, clientCaFile: config.tlsClientCa };
      parts.tls = new ReloadingServerCredentials(files, logger.child({ component: 'tls' }), config.tlsReloadIntervalMs);
      logger.info({ cert: config.tlsCert, client_ca: config.tlsClientCa }, config.tlsClientCa ? 'TLS on, client certificates required (mTLS)' : 'TLS on');
    }
    // grpc-js's own lines (a refused header) must not carry an authorization value.
    grpcLogRedactInstall();
    const server = new grpc.Server({
      'grpc.max_receive_message_length': config.maxMessageBytes,
      // No limit on what it sends: an answer carries jobs that passed the payload and result
      // limits as JSON text, and as Structs they take up to several times that (a payload of
      // small numbers about 5.5 times). Refusing to send one would leave a stored job that no
      // GetJob, ListJobs or push could ever return. ListJobs bounds its pages (LIST_PAGE_BYTES).
      'grpc.max_send_message_length': -1,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.keepalive_time_ms': 30_000,
    });
    for (const definition of SERVICE_DEFINITIONS) {
      server.addService(definition, serviceNotReady(definition, logger));
    }
    const health = new HealthImplementation(Object.fromEntries(['', ...SERVICE_NAMES].map((s) => [s, 'NOT_SERVING' as const])));
    health.addToServer(server);
    if (config.reflection) reflectionAddToServer(server);
    parts.grpc = server;
    parts.health = health;
    const port = await grpcListen(server, config.host, config.port, parts.tls ?? grpc.ServerCredentials.createInsecure());
    const address = `${config.host}:${port}`;
    if (config.httpPort > 0) {
      parts.http = await HttpServer.start({
        host: config.host,
        port: config.httpPort,
        logger: logger.child({ component: 'http' }),
        definitions: SERVICE_DEFINITIONS,
        bodyLimit: config.maxMessageBytes,
        tls: parts.tls,
        version: opts.version ?? '1',
        metricsOpen: config.metricsOpen,
      });
    }
    // The metrics port too, before PostgreSQL: a taken port fails here in one line, and its
    // /healthz (liveness) answers while the database is waited for.
    if (config.metricsPort > 0) {
      parts.metricsServer = await metricsServerStart({
        host: config.host,
        port: config.metricsPort,
        logger,
        // It never asks for a token: on loopback, only requests addressed to a loopback name (DNS rebinding).
        hostRefusal: hostIsLoopback(config.host) ? loopbackHostRefusal : undefined,
      }).catch((err: unknown) => {
        throw listenRefused(`metrics ${config.host}:${config.metricsPort}`, err);
      });
    }
    const httpUrl = parts.http ? `${parts.tls ? 'https' : 'http'}://${urlHost(config.host)}:${parts.http.port}` : null;
    const serverId = randomUUID();
    opts.onListening?.(address);

    let databaseUrl = config.databaseUrl;
    if (!databaseUrl) {
      const dataDir = join(config.dataDir, 'pgdata');
      logger.info({ data_dir: dataDir, port: config.embeddedPgPort }, 'starting embedded PostgreSQL');
      parts.embedded = await embeddedPostgresStart({
        dataDir,
        port: config.embeddedPgPort,
        onLog: (line) => logger.trace({ postgres: line.trim() }, 'postgres'),
        restartOnExit: true,
        onUnexpectedExit: (how, inMs) =>
          logger.error({ exit: how, restart_in_ms: inMs }, `embedded PostgreSQL exited on its own (${how}); starting it again`),
        onRestarted: () => logger.info('embedded PostgreSQL started again'),
      });
      // The server's connections log in as the application role (created below, after the
      // migrations); the superuser's URL is for the migrations and the role setup only.
      databaseUrl = parts.embedded.appUrl;
      // Local only (127.0.0.1), so shown in full: what psql and `evora migrate --database-url` need.
      logger.info({ url: parts.embedded.url }, `embedded PostgreSQL at ${parts.embedded.url}`);
      logger.info({ role: EMBEDDED_ROLE.app, owner: EMBEDDED_ROLE.owner }, `the server connects as role ${EMBEDDED_ROLE.app}`);
    }
    const embedded = parts.embedded;

    // PostgreSQL itself, for what a pooler on databaseUrl cannot carry (LISTEN, the leader's
    // session lock, migrations); the embedded PostgreSQL has no pooler in front.
    const poolUrl = databaseUrl;
    const directUrl = (config.databaseUrl && config.directDatabaseUrl) || poolUrl;
    const availability = new DatabaseAvailability(logger.child({ component: 'store' }));
    const { applied, decision } = await untilAborted(
      databaseReady({
        availability,
        signal: startSignal,
        attempt: async () => {
          // Embedded: migrate as the superuser (acting as the owner role), then create or update
          // the roles and the grants (idempotent), before anything connects as the application role.
          const migrating = { waiting: (line: string) => logger.warn(line) };
          const embeddedApplied = embedded ? await migrate(embedded.url, undefined, migrating) : [];
          if (embedded) await dbRoleEnsure(embedded.url, EMBEDDED_ROLE);
          const decision = await poolerDecide({ pooler: config.dbPooler, connectionString: poolUrl, directConnectionString: directUrl });
          if (decision.pooled && directUrl === poolUrl) throw poolerWithoutDirectUrl(decision.reason);
          return { decision, applied: embedded ? embeddedApplied : await migrate(directUrl, undefined, migrating) };
        },
      }),
    );
    if (applied.length > 0) logger.info({ versions: applied }, 'migrations applied');
    if (decision.pooled) logger.info({ reason: decision.reason }, 'a pooler sits on the database URL: statements run unnamed');

    const store = new Store({
      connectionString: databaseUrl,
      maxConnections: config.dbPoolSize,
      queryTimeoutMs: config.dbQueryTimeoutMs,
      claimAsyncCommit: config.claimAsyncCommit,
      pooled: decision.pooled,
      postgresItself: decision.postgresItself,
      availability,
    });
    parts.store = store;

    // Auth, before anything serves: the bootstrap token, then the token cache's first read.
    // Both need the database, which may go away again right after the migrations (a restart,
    // a terminated connection): they are retried as the first contact is, not fatal.
    const auth = new Authenticator({
      store,
      logger: logger.child({ component: 'auth' }),
      refreshMs: config.authRefreshMs,
      bootstrapConfigured: config.bootstrapAdminToken !== null,
    });
    parts.auth = auth;
    await untilAborted(
      databaseReady({
        availability: store.availability,
        signal: startSignal,
        attempt: async () => {
          if (config.bootstrapAdminToken) await bootstrapTokenEnsure(store, config.bootstrapAdminToken, logger);
          await auth.start(parts.shutdown.signal);
        },
      }),
    );
    authStartCheck(auth.authOn, config, logger);

    const metrics = new ServerMetrics({ store });
    const jobObserver = new JobObserver(metrics, logger.child({ component: 'dispatcher' }));
    const dispatcher = new Dispatcher({
      store,
      logger: logger.child({ component: 'dispatcher' }),
      pollIntervalMs: config.pollIntervalMs,
      observer: jobObserver,
      presence: { serverId, serverAddress: address },
    });
    parts.dispatcher = dispatcher;
    metrics.dispatcherGaugesAdd(dispatcher);

    parts.listener = new NotificationListener({
      connectionString: directUrl,
      channels: [CHANNEL_JOB_AVAILABLE, CHANNEL_JOB_CANCEL, CHANNEL_SCHEDULE_CHANGED, CHANNEL_TOKENS_CHANGED],
      onNotification: (n) => {
        if (n.channel === CHANNEL_JOB_AVAILABLE) dispatcher.notifyQueue(n.payload);
        else if (n.channel === CHANNEL_TOKENS_CHANGED) auth.refresh().catch(() => undefined);
        else if (n.channel === CHANNEL_JOB_CANCEL) dispatcher.notifyCancel(n.payload);
        else if (n.channel === CHANNEL_SCHEDULE_CHANGED) parts.maintainer?.services.scheduler.wake();
      },
      onConnected: () => {
        dispatcher.notifyAll();
        auth.refresh().catch(() => undefined); // token changes told while the connection was down
        parts.maintainer?.services.scheduler.wake();
      },
      onError: (err) => logger.warn({ err }, 'LISTEN connection lost; reconnecting'),
      availability: store.availability,
    });
    await untilAborted(parts.listener.start());
    dispatcher.start();

    const telemetry: TelemetrySink = config.mongodbUrl
      ? new MongoTelemetrySink(config.mongodbUrl, { logger: logger.child({ component: 'telemetry' }) })
      : new PostgresTelemetrySink(store);
    parts.telemetry = telemetry;
    // Which store stats read and the projector writes (never the URL: it may hold a password).
    logger.info({ telemetry_store: config.mongodbUrl ? 'mongodb' : 'postgres' }, config.mongodbUrl ? 'telemetry store: MongoDB (MONGODB_URL)' : 'telemetry store: PostgreSQL tables (evora.telemetry_*)');

    const maintainer: ServerMaintainer = new Maintainer({
      connectionString: directUrl,
      electionIntervalMs: config.electionIntervalMs,
      logger,
      services: {
        sweeper: new Sweeper({
          store,
          logger,
          intervalMs: config.sweepIntervalMs,
          onSwept: (batch, cause) => batch.jobs.forEach((job) => jobObserver.written(cause === 'timed_out' ? 'timeout' : 'expire', job)),
        }),
        projector: new Projector({ store, sink: telemetry, logger, intervalMs: config.projectIntervalMs }),
        pruner: new Pruner({
          store,
          logger,
          intervalMs: config.pruneIntervalMs,
          batchSize: config.pruneBatchSize,
          auditRetentionDays: config.auditRetentionDays === 0 ? null : config.auditRetentionDays,
          onPruned: (counts) => counts.forEach((c) => metrics.jobsPruned.inc({ queue: c.queue, state: c.state }, c.jobs)),
          onAuditPruned: (events) => metrics.auditEventsPruned.inc(events),
        }),
        scheduler: new Scheduler({ store, logger, onFired: (pass) => metrics.scheduleFiredCount(pass) }),
      },
    });
    parts.maintainer = maintainer;
    metrics.leaderGaugeAdd(() => maintainer.elector.isLeader);
    maintainer.start(parts.shutdown.signal);

    const deps = {
      metrics,
      store,
      dispatcher,
      logger,
      auth,
      maxPayloadBytes: config.maxPayloadBytes,
      maxMessageBytes: config.maxMessageBytes,
      helloTimeoutMs: config.helloTimeoutMs,
      defaultLeaseSeconds: DEFAULT_LEASE_SECONDS,
      streams: parts.streams,
      telemetry,
    };
    // Ready: the services swap in, each in one tick (no call finds its method missing).
    const implementations = [
      jobService(deps),
      workerService(deps),
      queueService(deps),
      scheduleService(deps),
      tokenService(deps),
      auditService(deps),
    ];
    SERVICE_DEFINITIONS.forEach((definition, i) => {
      server.removeService(definition);
      server.addService(definition, implementations[i] as unknown as grpc.UntypedServiceImplementation);
    });
    for (const s of ['', ...SERVICE_NAMES]) health.setStatus(s, 'SERVING');
    parts.http?.ready(implementations as unknown as grpc.UntypedServiceImplementation[], metrics, auth, () => store.availability.state === 'unavailable');

    if (parts.metricsServer) {
      parts.metricsServer.ready(metrics);
      logger.info({ port: parts.metricsServer.port }, `metrics on http://${config.host}:${parts.metricsServer.port}/metrics`);
    }

    let stopping: Promise<void> | null = null;
    const stop = () =>
      (stopping ??= (async () => {
        logger.info('shutting down');
        await partsStop(parts, config, logger);
        logger.info('stopped');
      })());

    return { address, serverId, port, httpUrl, databaseUrl, store, dispatcher, maintainer, telemetry, stop };
  } catch (err) {
    await partsStop(parts, config, logger).catch((stopErr: unknown) => logger.error({ err: stopErr }, 'stopping after a failed start failed'));
    throw startSignal.aborted ? new ServerStartAbortedError() : err;
  }
}

/**
 * Stops the parts that exist, in the order serverStart's comment lists. A step that fails
 * is logged and the later steps still run (a sink that cannot close must not keep the pool
 * open); the first failure is thrown at the end. A step that does not finish within its
 * bound (10 s; the drain: the shutdown timeout + 10 s; the embedded PostgreSQL: 2 min) is
 * logged and left behind, so a database that never answers cannot hold shutdown. Once a
 * database step (the drain, which past the shutdown timeout waits only for database writes,
 * or a step after it) has run out its bound (the database does not answer), each later
 * database step is given 1 s: with the default shutdown timeout the exit then comes within
 * about 25 s (the drain's 20 s and five of 1 s), before an orchestrator's usual 30 s grace
 * ends in a SIGKILL.
 */
async function partsStop(parts: Parts, config: ServerConfig, logger: Logger): Promise<void> {
  const failures: unknown[] = [];
  let databaseSilent = false;
  // Each step is waited for at most boundMs: a statement that never gets an answer (a frozen
  // database, a host gone without a reset) must not keep the later steps, and the process's
  // exit, waiting; the step goes on unobserved.
  const step = async (what: string, run: () => Promise<unknown>, stepBoundMs = SHUTDOWN_STEP_BOUND_MS, database = false) => {
    const boundMs = databaseSilent && database ? Math.min(stepBoundMs, SHUTDOWN_STEP_AFTER_SILENCE_MS) : stepBoundMs;
    const late = new Error(`shutdown: ${what} did not finish in ${boundMs} ms; going on`);
    try {
      await abortRace(run(), AbortSignal.timeout(boundMs), () => late);
    } catch (err) {
      if (err === late) {
        logger.warn({ step: what, bound_ms: boundMs }, late.message);
        if (database) databaseSilent = true;
        return;
      }
      failures.push(err);
      logger.error({ err }, `shutdown: ${what} failed`);
    }
  };
  // 1. Health, and the signal that shutdown has begun.
  for (const s of ['', ...SERVICE_NAMES]) parts.health?.setStatus(s, 'NOT_SERVING');
  parts.http?.notReady();
  parts.shutdown.abort();
  // 2. The dispatcher drains. Past the shutdown timeout it waits only for database writes
  // (claims in flight, the workers' reports): running out its bound, it found the database
  // silent, as a database step does (it keeps its own bound: nothing was silent before it).
  const databaseStep = (what: string, run: () => Promise<unknown>, boundMs = SHUTDOWN_STEP_BOUND_MS) => step(what, run, boundMs, true);
  await databaseStep('draining the dispatcher', async () => {
    const stillHeld = await parts.dispatcher?.drainAll(config.shutdownTimeoutMs);
    if (stillHeld) logger.warn({ held: stillHeld }, 'workers still hold jobs; their leases run on');
  }, config.shutdownTimeoutMs + SHUTDOWN_STEP_BOUND_MS);
  // 3. The Work streams and SubmitJobStreams end.
  parts.streams.endAll();
  // 4. The gRPC server and the HTTP port, then the metrics endpoint.
  await Promise.all([
    step('stopping gRPC', async () => parts.grpc && (await grpcServerStop(parts.grpc))),
    step('stopping HTTP', async () => parts.http?.close()),
  ]);
  parts.tls?.stop();
  await step('closing the metrics endpoint', async () => parts.metricsServer?.close());
  parts.auth?.stop();
  // 4b. This server's worker sessions leave the shared table.
  await databaseStep("deleting this server's worker sessions", async () => parts.dispatcher?.close());
  // 5. The maintainer: leader services, then the leadership lock.
  await databaseStep('stopping the maintainer', async () => parts.maintainer?.stop());
  // 6. The telemetry sink.
  await databaseStep('closing the telemetry sink', async () => parts.telemetry?.close());
  // 7. The LISTEN connection.
  await databaseStep('stopping the listener', async () => parts.listener?.stop());
  // 8. The store.
  await databaseStep('closing the store', async () => parts.store?.close());
  // 9. The embedded PostgreSQL.
  // (Its shutdown checkpoint may take longer than the other steps; it is bounded by PostgreSQL.)
  await step('stopping the embedded PostgreSQL', async () => parts.embedded?.stop(), 120_000);
  if (failures.length > 0) throw failures[0];
}

/** The longest shutdown waits for one step (but the drain, which has the shutdown timeout on top). */
const SHUTDOWN_STEP_BOUND_MS = 10_000;
/** The bound of each database step after one ran out its bound: the database is not answering. */
const SHUTDOWN_STEP_AFTER_SILENCE_MS = 1_000;

/** Lets open calls end for a grace second, then cancels what is left. */
function grpcServerStop(server: grpc.Server): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, GRPC_SHUTDOWN_GRACE_MS);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * Binds the gRPC server. The port is tried with a plain socket first, so a taken port is
 * refused with one line (grpc-js would also print a line of its own on stderr).
 */
async function grpcListen(server: grpc.Server, host: string, port: number, credentials: grpc.ServerCredentials): Promise<number> {
  const refused = (reason: string, cause: unknown) => new Error(`cannot listen on ${host}:${port}: ${reason}`, { cause });
  if (port !== 0) {
    await new Promise<void>((resolve, reject) => {
      const probe = createServer();
      probe.once('error', (err: NodeJS.ErrnoException) => reject(listenRefused(`${host}:${port}`, err)));
      probe.listen(port, host, () => probe.close(() => resolve()));
    });
  }
  return new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, credentials, (err, p) => (err ? reject(refused(err.message, err)) : resolve(p))),
  );
}

/**
 * The start's refusal of a pooler on DATABASE_URL with no direct URL beside it: LISTEN and
 * the leader's session-level advisory lock would go through the pooler, which in transaction
 * mode lends the server connection holding them to other clients, so every server that
 * lands on it thinks it leads (four servers through one pgbouncer were all elected at once),
 * and NOTIFYs are lost. A pooler in session mode carries both, but cannot be told apart from
 * one in transaction mode: it is run with EVORA_DB_POOLER=none (docs/store.md, "Behind pgbouncer").
 */
function poolerWithoutDirectUrl(reason: string): Error {
  return new Error(
    `a pooler sits on DATABASE_URL (${reason}) and EVORA_DIRECT_DATABASE_URL is not set: LISTEN and the leader's lock cannot go through a ` +
      'transaction pooler (every server would think it leads); set EVORA_DIRECT_DATABASE_URL to PostgreSQL itself, or EVORA_DB_POOLER=none ' +
      'for a pooler in session mode (docs/store.md, "Behind pgbouncer")',
  );
}

/** A listen error of `what` (`127.0.0.1:50051`, `metrics 127.0.0.1:9464`) in one line: `cannot listen on <what>: the address is already in use`. */
function listenRefused(what: string, err: unknown): Error {
  const e = err as NodeJS.ErrnoException;
  return new Error(`cannot listen on ${what}: ${LISTEN_ERRORS[e.code ?? ''] ?? e.message}`, { cause: err });
}

const LISTEN_ERRORS: Record<string, string> = {
  EADDRINUSE: 'the address is already in use',
  EACCES: 'permission denied',
  EADDRNOTAVAIL: 'the address is not available on this machine',
};

/** A host as it goes in a URL: an IPv6 address in brackets; the any-address as loopback (what a browser on this machine opens). */
function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '' ) return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

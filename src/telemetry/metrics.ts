import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Dispatcher } from '../dispatcher/dispatcher.js';
import type { Logger } from '../logger.js';
import { OUTBOX_LAG_EXACT_ROWS, type ScheduleFireResult, type Store } from '../store/store.js';
import { isUnavailable } from '../domain/errors.js';

/**
 * Prometheus metrics of one server process, in a registry of its own (tests run several
 * servers in one process). Counters count what this process did; gauges that describe the
 * whole queue (depth, outbox lag) are read from Postgres at scrape time, with cheap
 * queries on the partial indexes.
 */
export class ServerMetrics {
  readonly registry = new Registry();
  readonly jobsSubmitted = new Counter({ name: 'evora_jobs_submitted_total', help: 'Jobs created by this server: submits, and schedules it fired (as leader) or triggered', labelNames: ['queue'], registers: [this.registry] });
  readonly jobsCompleted = new Counter({ name: 'evora_jobs_completed_total', help: 'Jobs completed through this server', labelNames: ['queue'], registers: [this.registry] });
  readonly jobsFailed = new Counter({ name: 'evora_jobs_failed_total', help: 'Failed attempts reported through this server or expired by its sweeper', labelNames: ['queue'], registers: [this.registry] });
  readonly jobsDeadLettered = new Counter({ name: 'evora_jobs_dead_lettered_total', help: 'Jobs moved to the dead-letter queue by this server', labelNames: ['queue'], registers: [this.registry] });
  /** Finished jobs deleted by this server's pruner (retention), per queue and state. */
  readonly jobsPruned = new Counter({ name: 'evora_jobs_pruned_total', help: 'Finished jobs deleted by this server as leader, past their queue\'s retention', labelNames: ['queue', 'state'], registers: [this.registry] });
  /** Audit events deleted by this server's pruner (EVORA_AUDIT_RETENTION_DAYS). */
  readonly auditEventsPruned = new Counter({ name: 'evora_audit_events_pruned_total', help: 'Audit events deleted by this server as leader, past the audit retention (EVORA_AUDIT_RETENTION_DAYS)', registers: [this.registry] });
  readonly claimSeconds = new Histogram({
    name: 'evora_claim_duration_seconds',
    help: 'Duration of one claim statement',
    labelNames: ['queue'],
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly pushSeconds = new Histogram({
    name: 'evora_push_latency_seconds',
    help: 'From the moment a job became claimable (run_at) to its push to a worker',
    labelNames: ['queue'],
    buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1, 5, 30],
    registers: [this.registry],
  });

  /**
   * Counts the jobs a scheduler pass created in evora_jobs_submitted_total, so that jobs
   * fired by schedules are submitted jobs like any other (completed never exceeds
   * submitted). Must stay true: only jobs the pass created count, not a fire whose job
   * already existed (two schedulers overlapping) nor a skipped fire (it made no job).
   */
  scheduleFiredCount(pass: ScheduleFireResult): void {
    for (const f of pass.fired) {
      const created = f.jobs.filter((j) => j.created).length;
      if (created > 0) this.jobsSubmitted.inc({ queue: f.queue }, created);
    }
  }

  constructor(deps: { store: Store }) {
    // Node's process metrics under their conventional names (process_cpu_seconds_total,
    // nodejs_heap_size_used_bytes, ...), unprefixed as every Node exporter has them, so
    // stock dashboards work; Evora's own metrics are all evora_*. Never both prefixes.
    collectDefaultMetrics({ register: this.registry });
    // The outbox lag is one query per scrape: the gauges below collect together (prom-client
    // calls every collect at once), share the read in flight, and evora_database_up is
    // whether it reached the database (within SCRAPE_DATABASE_WAIT_MS).
    const lagRead = sharedRead(() => deps.store.outboxLag());
    const depthsRead = sharedRead(() => deps.store.queueDepths());
    new Gauge({
      name: 'evora_queue_depth',
      help: 'PENDING jobs claimable now, per queue; 0 for a known queue with none (the series never disappears)',
      labelNames: ['queue'],
      registers: [this.registry],
      async collect() {
        const depths = await unlessUnavailable(depthsRead());
        if (!depths) return;
        this.reset();
        for (const { queue, depth } of depths) this.set({ queue }, depth);
      },
    });
    new Gauge({
      name: 'evora_outbox_lag_events',
      help: `Job events not yet projected into telemetry: exact over the outbox's first ${OUTBOX_LAG_EXACT_ROWS} rows, an estimate beyond (evora_outbox_lag_estimated)`,
      registers: [this.registry],
      async collect() {
        const lag = await unlessUnavailable(lagRead());
        if (lag) this.set(lag.events);
      },
    });
    new Gauge({
      name: 'evora_outbox_lag_estimated',
      help: 'Whether evora_outbox_lag_events is an estimate (1: the outbox is longer than the rows counted exactly) or exact (0)',
      registers: [this.registry],
      async collect() {
        const lag = await unlessUnavailable(lagRead());
        if (lag) this.set(lag.estimated ? 1 : 0);
      },
    });
    new Gauge({
      name: 'evora_outbox_lag_seconds',
      help: 'Age of the oldest job event not yet projected into telemetry',
      registers: [this.registry],
      async collect() {
        const lag = await unlessUnavailable(lagRead());
        if (lag) this.set(lag.oldestSeconds);
      },
    });
    new Gauge({
      name: 'evora_database_up',
      help: 'Whether this server reached PostgreSQL at this scrape (1) or not (0; the gauges read from it keep their last values)',
      registers: [this.registry],
      async collect() {
        this.set((await unlessUnavailable(lagRead())) ? 1 : 0);
      },
    });
  }

  /**
   * `evora_leader`: 1 while this server is the elected leader that runs the maintenance
   * services (sweeper, projector, pruner, scheduler), else 0. Of the servers of one database
   * exactly one should say 1 (none for an election interval or so after the leader died):
   * the one place an operator can see which server sweeps, projects and fires schedules.
   * Added once the maintainer is built, as the dispatcher's gauges are.
   */
  leaderGaugeAdd(isLeader: () => boolean): void {
    new Gauge({
      name: 'evora_leader',
      help: 'Whether this server is the elected leader running maintenance (sweeper, projector, pruner, scheduler): 1 or 0',
      registers: [this.registry],
      collect() {
        this.set(isLeader() ? 1 : 0);
      },
    });
  }

  /**
   * Adds the gauges read from the dispatcher. Separate from the constructor because the
   * dispatcher reports into these metrics, so it is built after them.
   */
  dispatcherGaugesAdd(dispatcher: Dispatcher): void {
    new Gauge({
      name: 'evora_connected_workers',
      help: 'Worker streams connected to this server',
      registers: [this.registry],
      collect() {
        this.set(dispatcher.sessionStats().sessions);
      },
    });
  }
}

/**
 * `read` called at most once at a time: callers while a read is in flight share it, and the
 * next call after it settles reads again (one query per scrape for the gauges that share it).
 */
function sharedRead<T>(read: () => Promise<T>): () => Promise<T> {
  let inFlight: Promise<T> | null = null;
  return () => (inFlight ??= read().finally(() => (inFlight = null)));
}

/**
 * How long a scrape waits for the database. Prometheus gives a scrape 10 s by default, and a
 * database that stopped answering without closing its connections (frozen, partitioned)
 * holds a read until EVORA_DB_QUERY_TIMEOUT_MS (30 s by default; 0: for ever): waited for,
 * the scrape itself failed, and with it the evora_database_up 0 meant to tell the outage.
 */
const SCRAPE_DATABASE_WAIT_MS = 5_000;

/**
 * What a read from the database gave, or null when the database is unavailable or has not
 * answered within SCRAPE_DATABASE_WAIT_MS (the read goes on unobserved; the reads are shared,
 * so a hung one is not repeated by every scrape): a scrape during an outage still answers
 * (the process's own metrics, evora_database_up 0), and the gauges read from the database
 * keep their last values. Any other error fails the scrape.
 */
async function unlessUnavailable<T>(read: Promise<T>): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), SCRAPE_DATABASE_WAIT_MS);
  });
  try {
    return await Promise.race([read, late]);
  } catch (err) {
    if (isUnavailable(err)) return null;
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/** The separate metrics port, bound: its port, the metrics once they exist, and how to close it. */
export interface MetricsServer {
  port: number;
  /** Starts answering /metrics from `metrics` (before: 503, the server is starting). */
  ready(metrics: ServerMetrics): void;
  close(): Promise<void>;
}

/**
 * The separate metrics port (EVORA_METRICS_PORT): `/metrics` (Prometheus text format) and
 * `/healthz`, 200 while the process runs, as on the HTTP port (a liveness check: a database
 * outage is survived, so it must not get the server restarted; /readyz is the HTTP port's).
 * It never asks for a token, auth on or off (the HTTP port's /metrics does, unless
 * EVORA_METRICS_OPEN): it is meant for a private network only Prometheus reaches.
 * Bound with the other ports, before the server waits for PostgreSQL: a taken port fails
 * the start at once, and /healthz answers during that wait (/metrics answers 503 until
 * `ready`, as the metrics read the database). Resolves once bound; rejects with the
 * listen error (e.g. EADDRINUSE). `hostRefusal`, when given, is asked about each /metrics
 * request's headers: a reason refuses it with 403 (the server passes the HTTP port's
 * loopback Host check when it is bound to loopback, so that a page rebound to 127.0.0.1
 * cannot read every queue's name from it).
 */
export async function metricsServerStart(params: {
  host: string;
  port: number;
  logger: Logger;
  hostRefusal?: (headers: IncomingHttpHeaders) => string | null;
}): Promise<MetricsServer> {
  let metrics: ServerMetrics | null = null;
  const server: Server = createServer((req, res) => {
    const url = req.url ?? '/';
    if (url.startsWith('/metrics')) {
      const refusal = params.hostRefusal?.(req.headers);
      if (refusal) {
        params.logger.warn({ route: 'GET /metrics (metrics port)', reason: refusal, peer: req.socket.remoteAddress }, 'request refused: sent by a page of another site');
        res.writeHead(403, { 'content-type': 'text/plain' }).end(`${refusal}\n`);
        return;
      }
      if (!metrics) {
        res.writeHead(503, { 'content-type': 'text/plain' }).end('the server is starting: waiting for the database\n');
        return;
      }
      const registry = metrics.registry;
      registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': registry.contentType });
          res.end(text);
        },
        (err: unknown) => {
          params.logger[isUnavailable(err) ? 'debug' : 'error']({ err }, 'metrics collection failed');
          res.writeHead(500).end('metrics collection failed\n');
        },
      );
    } else if (url.startsWith('/healthz')) {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else {
      res.writeHead(404).end('not found: try /metrics or /healthz\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(params.port, params.host, () => resolve());
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : params.port,
    ready: (m) => {
      metrics = m;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

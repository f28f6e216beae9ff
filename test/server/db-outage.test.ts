import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { protoPath as healthProtoPath } from 'grpc-health-check';
import { pino } from 'pino';
import { configLoad } from '../../src/server/config.js';
import { serverStart, type EvoraServer } from '../../src/server/server.js';
import { AckResult } from '../../src/gen/evora/v1/worker.js';
import { call, clientsFor, type Clients } from '../helpers/server-setup.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';
import { backendsOf, freePort, logLines, privatePostgres, serveChild, type PrivatePostgres } from '../helpers/private-pg.js';

/**
 * Issue 15, points 2, 3 and 8: a server started while PostgreSQL is down waits for it
 * (listening, NOT_SERVING, answering UNAVAILABLE) and comes up by itself; an outage while it
 * runs is answered UNAVAILABLE with one readable line and logged once at warn, its end once
 * at info, with nothing at error level; a taken gRPC port is refused before PostgreSQL starts.
 * The database is a cluster of this file's own, stopped and started as an operator would.
 */

type LogLine = { level: number; msg: string; [k: string]: unknown };

function submitRequest(queue: string) {
  return { queue, type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) };
}

/** grpc.health.v1.Health/Check of the whole server. */
async function healthOf(address: string): Promise<string> {
  const def = protoLoader.loadSync(healthProtoPath, { keepCase: true, enums: String });
  const Health = (grpc.loadPackageDefinition(def) as unknown as { grpc: { health: { v1: { Health: typeof grpc.Client } } } }).grpc.health.v1.Health;
  const health = new Health(address, grpc.credentials.createInsecure()) as grpc.Client & {
    check: (req: { service: string }, cb: (e: grpc.ServiceError | null, r: { status: string }) => void) => void;
  };
  try {
    return (await new Promise<{ status: string }>((resolve, reject) => health.check({ service: '' }, (e, r) => (e ? reject(e) : resolve(r))))).status;
  } finally {
    health.close();
  }
}

/** The error a call failed with (the test fails if it succeeds). */
async function failure(p: Promise<unknown>): Promise<grpc.ServiceError> {
  return p.then(
    () => {
      throw new Error('the call succeeded');
    },
    (err: unknown) => err as grpc.ServiceError,
  );
}

describe('the database goes away and comes back, the server stays up', () => {
  let pgc: PrivatePostgres;
  let server: EvoraServer | null = null;
  let clients: Clients;
  const lines: LogLine[] = [];
  const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as LogLine) });
  const atLevel = (level: number) => lines.filter((l) => l.level === level);
  let metricsPort = 0;
  let httpPort = 0;
  /** The HTTP port's /readyz: status and text. */
  const readyz = async () => {
    const res = await fetch(`http://127.0.0.1:${httpPort}/readyz`);
    return { status: res.status, text: await res.text() };
  };
  /** The metrics port's answer to a GET of `path`: status and text. */
  const metricsGet = async (path: string) => {
    const res = await fetch(`http://127.0.0.1:${metricsPort}${path}`);
    return { status: res.status, text: await res.text() };
  };

  beforeAll(async () => {
    pgc = await privatePostgres({ started: false });
  });
  afterAll(async () => {
    clients?.close();
    await server?.stop();
    await pgc?.close();
  });

  it('started while PostgreSQL is down: listens, NOT_SERVING, answers UNAVAILABLE; comes up once PostgreSQL does', async () => {
    let address = '';
    metricsPort = await freePort();
    httpPort = await freePort();
    const config = configLoad(
      {
        host: '127.0.0.1',
        port: '0',
        httpPort: String(httpPort),
        metricsPort: String(metricsPort),
        databaseUrl: pgc.url,
        pollIntervalMs: '200',
        sweepIntervalMs: '200',
        electionIntervalMs: '200',
        projectIntervalMs: '200',
      },
      {},
    );
    const starting = serverStart(config, logger, { onListening: (a) => (address = a) });
    starting.catch(() => undefined);
    await waitFor(() => address, { what: 'the port to be bound' });
    clients = clientsFor(address);

    expect(await healthOf(address)).toBe('NOT_SERVING');
    const early = await failure(call(clients.jobs, 'getJob', { id: randomUUID() }));
    expect(early.code).toBe(grpc.status.UNAVAILABLE);
    expect(early.details).toBe('the server is starting: waiting for the database');
    const worker = new RawWorker(clients);
    worker.helloSend('early', [queueName()], 1);
    await worker.until(() => worker.ended);
    expect((worker.error as grpc.ServiceError | null)?.code).toBe(grpc.status.UNAVAILABLE);
    await waitFor(() => atLevel(40).length > 0, { what: 'the waiting line' });
    // The metrics port is bound already: liveness answers; the metrics wait for the database.
    expect(await metricsGet('/healthz')).toEqual({ status: 200, text: 'ok\n' });
    expect((await metricsGet('/metrics')).status).toBe(503);
    expect(await readyz()).toEqual({ status: 503, text: 'not ready\n' });

    await pgc.start();
    server = await starting;
    expect(await healthOf(address)).toBe('SERVING');
    expect(await readyz()).toEqual({ status: 200, text: 'ready\n' });
    const { job } = await call(clients.jobs, 'submitJob', submitRequest(queueName()));
    expect(job?.state).toBeTruthy();

    const warns = atLevel(40);
    expect(warns).toHaveLength(1);
    expect(warns[0]!.msg).toBe(`waiting for the database: connection refused (127.0.0.1:${pgc.port})`);
    expect(atLevel(30).filter((l) => /^database reached after \d+(\.\d)? s$/.test(l.msg))).toHaveLength(1);
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
  });

  it('an outage: UNAVAILABLE with one readable line, one warn when it begins, one info when it ends, nothing at error', async () => {
    const srv = server!;
    const queue = queueName('outage');
    const worker = new RawWorker(clients);
    await worker.hello('through-the-outage', [queue], 2);
    // Everything up and settled: the leader elected, the listener connected.
    await waitFor(() => srv.maintainer.elector.isLeader, { what: 'leadership' });
    lines.length = 0;

    await pgc.stop();
    for (const attempt of [
      () => call(clients.jobs, 'submitJob', submitRequest(queue)),
      () => call(clients.jobs, 'getJob', { id: randomUUID() }),
      () => call(clients.queues, 'listQueues', {}),
      () => call(clients.jobs, 'submitJob', submitRequest(queue)),
    ]) {
      const err = await failure(attempt());
      expect(err.code).toBe(grpc.status.UNAVAILABLE);
      expect(err.details).toMatch(/^database unavailable: (terminating connection due to administrator command|connection refused \(127\.0\.0\.1:\d+\)|Connection terminated unexpectedly)$/);
    }
    // The metrics port still answers: /healthz is liveness (the outage is survived), and a
    // scrape has the process's metrics and says the database is down.
    expect(await metricsGet('/healthz')).toEqual({ status: 200, text: 'ok\n' });
    const scrape = await metricsGet('/metrics');
    expect(scrape.status).toBe(200);
    expect(scrape.text).toMatch(/^evora_database_up 0$/m);
    expect(scrape.text).toMatch(/^process_cpu_seconds_total /m);
    // Readiness follows the database (a probe takes this server out of rotation while its
    // calls would all be UNAVAILABLE); liveness above does not.
    expect(await readyz()).toEqual({ status: 503, text: 'not ready: database unavailable\n' });
    // A worker's report during the outage is acked "retry later"; its stream stays open.
    const lease = { jobId: randomUUID(), leaseToken: randomUUID() };
    worker.send({ msg: { $case: 'complete', value: { ...lease, result: {} } } });
    await worker.until(() => worker.acks(lease.jobId).length === 1);
    expect(worker.acks(lease.jobId)[0]).toMatchObject({ result: AckResult.ACK_RESULT_RETRY_LATER, databaseUnavailable: true });
    // The background services have tried (and failed) too.
    await waitFor(() => lines.some((l) => l.msg === 'lost leadership'), { what: 'the leader to notice' });

    await pgc.start();
    await waitFor(() => call(clients.jobs, 'submitJob', submitRequest(queue)).then(() => true), { what: 'submits to work again' });
    await worker.until(() => worker.jobs.length >= 1, 30_000); // the dispatcher delivers again
    await waitFor(() => srv.maintainer.elector.isLeader, { what: 'leadership again' });
    await waitFor(() => backendsOf(pgc, 'evora-listener').then((b) => b.length === 1), { what: 'the listener back' });
    expect((await metricsGet('/metrics')).text).toMatch(/^evora_database_up 1$/m);
    expect(await readyz()).toEqual({ status: 200, text: 'ready\n' });
    expect(worker.ended).toBe(false);
    // The session upkeep outlived the outage: the worker is recorded again (ListWorkers).
    const back = Date.now();
    await waitFor(
      async () => (await call(clients.workers, 'listWorkers', { queue })).workers.some((w) => w.workerId === 'through-the-outage' && w.lastSeenAt!.getTime() >= back - 1000),
      { what: 'the session recorded again', timeoutMs: 15_000 },
    );
    worker.close();

    const warns = atLevel(40);
    expect(warns.map((l) => l.msg)).toHaveLength(1);
    expect(warns[0]!.msg).toMatch(/^database unavailable: \S/);
    expect(warns[0]).not.toHaveProperty('err'); // no stack
    expect(atLevel(30).filter((l) => /^database available again after \d+(\.\d)? s$/.test(l.msg))).toHaveLength(1);
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
    expect(lines.some((l) => l.msg === 'unexpected error')).toBe(false);
  });
});

describe('the CLI at startup', () => {
  let dataDir: string;
  let taken: Server;
  let takenPort: number;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'evora-test-port-'));
    await chmod(dataDir, 0o755);
    taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', () => resolve()));
    takenPort = (taken.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => taken.close(() => resolve()));
    await rm(dataDir, { recursive: true, force: true });
  });

  it('refuses a taken gRPC port with one line, before PostgreSQL starts', async () => {
    const srv = serveChild(['--port', String(takenPort)], { EVORA_DATA_DIR: dataDir, EVORA_PG_PORT: String(await freePort()) });
    expect(await srv.exited).toBe(1);
    expect(srv.stderr()).toBe(`evora: cannot listen on 127.0.0.1:${takenPort}: the address is already in use\n`);
    expect(logLines(srv.output()).filter((l) => l.level >= 40)).toEqual([]);
    expect(existsSync(join(dataDir, 'pgdata'))).toBe(false); // no initdb, no PostgreSQL
  });

  it('refuses a taken metrics port with one line, before waiting for PostgreSQL', async () => {
    const nothing = `postgres://postgres:x@127.0.0.1:${await freePort()}/postgres`;
    const config = configLoad({ host: '127.0.0.1', port: '0', httpPort: '0', metricsPort: String(takenPort), databaseUrl: nothing }, {});
    const lines: string[] = [];
    const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(s) });
    // (Before, the port was bound once the server was ready: never, with no database.)
    const start = serverStart(config, logger, { signal: AbortSignal.timeout(20_000) });
    await expect(start).rejects.toThrow(new Error(`cannot listen on metrics 127.0.0.1:${takenPort}: the address is already in use`));
    expect(lines.some((l) => l.includes('waiting for the database'))).toBe(false);
  });

  it('stops at once on SIGTERM while it waits for PostgreSQL', async () => {
    const nothing = `postgres://postgres:x@127.0.0.1:${await freePort()}/postgres`;
    const srv = serveChild(['--port', '0'], { DATABASE_URL: nothing });
    try {
      await waitFor(() => srv.output().includes('waiting for the database'), { timeoutMs: 30_000, what: 'the waiting line' });
      expect(await srv.stop()).toBe(0);
      expect(srv.stderr()).toBe('');
      expect(logLines(srv.output()).filter((l) => l.level >= 50)).toEqual([]);
    } finally {
      srv.child.kill('SIGKILL');
    }
  });

  it('stops on SIGTERM while it waits for PostgreSQL even when whatever read its log has gone (EPIPE)', async () => {
    // A log shipper or `| tee` that died: every log write fails EPIPE. pino's sonic-boom 4
    // retried the exit's final flush of such a write for ever (the process never exited,
    // and ignored a second signal); the logger writes through sonic-boom 5 (src/logger.ts),
    // whose flush gives up. The stop is clean, so it exits 0: `serve` exits after the log's own flush,
    // whose EPIPE makes pino drop the log, not through pino's exit hook, whose flush threw
    // EPIPE out of process.exit (exit 1).
    const nothing = `postgres://postgres:x@127.0.0.1:${await freePort()}/postgres`;
    const srv = serveChild(['--port', '0'], { DATABASE_URL: nothing });
    try {
      await waitFor(() => srv.output().includes('waiting for the database'), { timeoutMs: 30_000, what: 'the waiting line' });
      srv.child.stdout!.destroy();
      srv.child.stderr!.destroy();
      srv.child.kill('SIGTERM');
      const exited = await Promise.race([srv.exited, new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 15_000).unref())]);
      expect(exited).toBe(0);
    } finally {
      srv.child.kill('SIGKILL');
    }
  });
});

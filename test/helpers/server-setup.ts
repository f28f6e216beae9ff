import { teardownAdd } from './teardown.js';
import * as grpc from '@grpc/grpc-js';
import { configLoad, type ServerConfig } from '../../src/server/config.js';
import { JobServiceClient } from '../../src/gen/evora/v1/job.js';
import { QueueServiceClient } from '../../src/gen/evora/v1/queue.js';
import { WorkerServiceClient } from '../../src/gen/evora/v1/worker.js';
import { silentLogger, createLogger, type Logger } from '../../src/logger.js';
import { serverStart, type EvoraServer } from '../../src/server/server.js';
import { testDatabaseCreate } from './db.js';
import { freePort } from '../../src/server/embedded-postgres.js';

/** Generated gRPC clients for one server address. */
export interface Clients {
  jobs: JobServiceClient;
  workers: WorkerServiceClient;
  queues: QueueServiceClient;
  close(): void;
}

/** Raw generated clients (tests of the wire contract use these rather than the SDK); plaintext unless `creds` say otherwise. */
export function clientsFor(address: string, creds: grpc.ChannelCredentials = grpc.credentials.createInsecure()): Clients {
  const jobs = new JobServiceClient(address, creds);
  const workers = new WorkerServiceClient(address, creds);
  const queues = new QueueServiceClient(address, creds);
  return { jobs, workers, queues, close: () => [jobs, workers, queues].forEach((c) => c.close()) };
}

/** The request and response types of a generated unary method (its last overload). */
type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: grpc.Metadata,
  options: Partial<grpc.CallOptions>,
  callback: (error: grpc.ServiceError | null, response: Res) => void,
) => grpc.ClientUnaryCall;

/** Promisifies a generated unary method: `call(c.jobs, 'submitJob', req)`. */
export function call<C extends grpc.Client, M extends keyof C>(
  client: C,
  method: M,
  request: C[M] extends UnaryMethod<infer Req, unknown> ? Req : never,
): Promise<C[M] extends UnaryMethod<never, infer Res> ? Res : never> {
  return new Promise((resolve, reject) => {
    (client[method] as unknown as (r: unknown, cb: (e: grpc.ServiceError | null, r: unknown) => void) => void).call(
      client,
      request,
      (err, res) => (err ? reject(err) : resolve(res as never)),
    );
  });
}

/**
 * Where the servers that serverSetup starts connect, given their database's URL: by default
 * straight to it. A test file that sets a route before it imports other test files runs
 * those files' tests through it (test/server/pgbouncer.test.ts: through pgbouncer).
 */
export type DatabaseRoute = (databaseUrl: string) => Promise<{ databaseUrl: string; directDatabaseUrl: string | null }>;
let route: DatabaseRoute | null = null;

/** Sets (or, with null, clears) the route of the servers serverSetup starts from now on. */
export function serverSetupRoute(r: DatabaseRoute | null): void {
  route = r;
}

/**
 * Starts an Evora server on 127.0.0.1 (any free port) over a database of its own, unless
 * `databaseUrl` is given (to start a second server on the same database). Stops it, and
 * drops the database, after the file's tests. The `databaseUrl` returned is the database's
 * own (for raw SQL), whatever route the server takes to it. The HTTP port is off (tests
 * must not take 8080) unless `http: true` turns it on at a free port (`httpUrl`). `logger`: the
 * server's (a test that reads its lines); else silent, or EVORA_TEST_LOG's level.
 */
export async function serverSetup(
  overrides: Partial<Record<keyof ServerConfig, string>> & { databaseUrl?: string; http?: boolean; logger?: Logger } = {},
) {
  const { http, logger: givenLogger, ...configOverrides } = overrides;
  let dropDb: (() => Promise<void>) | null = null;
  let databaseUrl = overrides.databaseUrl;
  if (!databaseUrl) {
    const db = await testDatabaseCreate();
    databaseUrl = db.url;
    dropDb = db.drop;
  }
  const routed = route ? await route(databaseUrl) : { databaseUrl, directDatabaseUrl: null };
  const config = configLoad(
    {
      host: '127.0.0.1',
      port: '0',
      pollIntervalMs: '200',
      sweepIntervalMs: '100',
      electionIntervalMs: '200',
      projectIntervalMs: '200',
      httpPort: http ? String(await freePort()) : '0',
      ...configOverrides,
      databaseUrl: routed.databaseUrl,
      directDatabaseUrl: routed.directDatabaseUrl ?? undefined,
    },
    {},
  );
  const logger = givenLogger ?? (process.env.EVORA_TEST_LOG ? createLogger({ level: process.env.EVORA_TEST_LOG, pretty: false }) : silentLogger());
  const server: EvoraServer = await serverStart(config, logger);
  const clients = clientsFor(server.address);
  teardownAdd(async () => {
    clients.close();
    await server.stop();
    await dropDb?.();
  });
  return { server, clients, address: server.address, httpUrl: server.httpUrl ?? '', databaseUrl, config };
}

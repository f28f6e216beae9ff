import * as grpc from '@grpc/grpc-js';
import { JobState } from '../../src/gen/evora/v1/job.js';
import {
  AckResult,
  WorkerServiceService,
  type ServerAck,
  type LeasedJob,
  type ServerWelcome,
  type WorkerComplete,
  type WorkerFail,
  type WorkerHello,
  type WorkerSnooze,
  type WorkRequest,
  type WorkResponse,
} from '../../src/gen/evora/v1/worker.js';
import { EvoraWorker, type JobOutcome, type WorkerEvents } from '../../src/sdk/index.js';

/**
 * A scripted Work-stream server speaking the generated protocol, for what a real server
 * cannot easily be made to say (a RETRY_LATER or INVALID ack, an old server's ack without
 * a code, a drain on cue). It answers every hello with a welcome and records every other
 * message but heartbeats; the test sends the rest with `send`.
 */
export interface FakeWorkServer {
  address: string;
  /** Every hello, one per stream the worker opened. */
  hellos: WorkerHello[];
  /** The last hello. */
  readonly hello: WorkerHello | null;
  /** Every message the worker sent after its hellos, heartbeats left out. */
  received: WorkRequest[];
  /** Writes on the current stream. */
  send(res: WorkResponse): void;
  /** Ends the current stream with status OK (the worker then reconnects). */
  endStream(): void;
  stop(): Promise<void>;
}

/**
 * `welcome`: what the welcome says beyond the session fields and accepts_batches (by
 * default an older server's: no JSON text, no limits told).
 */
export async function fakeWorkServer(opts: { acceptsBatches: boolean; welcome?: Partial<ServerWelcome> }): Promise<FakeWorkServer> {
  const server = new grpc.Server();
  let stream: grpc.ServerDuplexStream<WorkRequest, WorkResponse> | null = null;
  const fake: FakeWorkServer = {
    address: '',
    hellos: [],
    get hello() {
      return this.hellos.at(-1) ?? null;
    },
    received: [],
    send: (res) => stream?.write(res),
    endStream: () => {
      stream?.end();
      stream = null;
    },
    stop: async () => {
      stream?.end();
      server.forceShutdown();
    },
  };
  const unimplemented = (_call: unknown, cb: grpc.sendUnaryData<never>) => cb({ code: grpc.status.UNIMPLEMENTED });
  server.addService(WorkerServiceService, {
    work: (call: grpc.ServerDuplexStream<WorkRequest, WorkResponse>) => {
      stream = call;
      call.on('data', (req: WorkRequest) => {
        if (req.msg?.$case === 'hello') {
          fake.hellos.push(req.msg.value);
          call.write({
            msg: {
              $case: 'welcome',
              value: {
                sessionId: `s${fake.hellos.length}`,
                leaseSeconds: 30,
                heartbeatIntervalSeconds: 10,
                heartbeatIntervalMs: 10_000,
                acceptsBatches: opts.acceptsBatches,
                payloadsAsJson: false,
                maxResultBytes: 0,
                maxMessageBytes: 0,
                ...opts.welcome,
              },
            },
          });
        } else if (req.msg?.$case !== 'heartbeat') {
          fake.received.push(req);
        }
      });
      call.on('end', () => call.end());
      call.on('error', () => undefined);
    },
    claimJobs: unimplemented,
    extendLease: unimplemented,
    completeJob: unimplemented,
    failJob: unimplemented,
    snoozeJob: unimplemented,
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  fake.address = `127.0.0.1:${port}`;
  return fake;
}

/** A leased job `job-<i>` (token `token-<i>`) of type `type`, with a lease of `leaseMs`. */
export function leasedJob(i: number, type = 'noop', leaseMs = 30_000): LeasedJob {
  const now = new Date();
  return {
    job: {
      id: `job-${i}`,
      queue: 'q',
      type,
      payload: { i },
      state: JobState.JOB_STATE_RUNNING,
      priority: 0,
      attempt: 1,
      maxAttempts: 25,
      runAt: now,
      createdAt: now,
      startedAt: now,
      idempotencyKey: '',
      workerId: 'w',
      lastError: '',
      cancelRequested: false,
      leaseExpiresAt: new Date(now.getTime() + leaseMs),
      dependsOn: [],
    },
    leaseToken: `token-${i}`,
    leaseExpiresAt: new Date(now.getTime() + leaseMs),
    parentResults: {},
  };
}

/** One report, whether it came alone or in a batch. */
export type SentReport =
  | { kind: 'complete'; value: WorkerComplete }
  | { kind: 'fail'; value: WorkerFail }
  | { kind: 'snooze'; value: WorkerSnooze };

/** The reports among the messages, batches unpacked, in the order sent. */
export function reportsIn(reqs: WorkRequest[]): SentReport[] {
  return reqs.flatMap((r): SentReport[] => {
    const m = r.msg;
    switch (m?.$case) {
      case 'complete':
        return [{ kind: 'complete', value: m.value }];
      case 'completes':
        return m.value.completes.map((value) => ({ kind: 'complete' as const, value }));
      case 'fail':
        return [{ kind: 'fail', value: m.value }];
      case 'fails':
        return m.value.fails.map((value) => ({ kind: 'fail' as const, value }));
      case 'snooze':
        return [{ kind: 'snooze', value: m.value }];
      default:
        return [];
    }
  });
}

/** A worker on a fresh fake server, with what the tests look at (see workerOnFakeServer). */
export type FakeSetup = Awaited<ReturnType<typeof workerOnFakeServer>>;

/**
 * An EvoraWorker (slots 10, fast reconnects, every log line kept in `logged`) connected to
 * nothing yet, on a fresh fake server; both are stopped by the test file's `cleanup`.
 * `finished` and `aborted` collect the worker's events; `reportsOf` gives the reports sent
 * about one job, in order; `ack` answers a report with a result code.
 */
export async function workerOnFakeServer(
  cleanup: (() => Promise<unknown>)[],
  opts: { acceptsBatches?: boolean; welcome?: Partial<ServerWelcome> } = {},
) {
  const server = await fakeWorkServer({ acceptsBatches: opts.acceptsBatches ?? true, ...(opts.welcome ? { welcome: opts.welcome } : {}) });
  cleanup.push(() => server.stop());
  const logged: { level: string; obj: object; msg: string }[] = [];
  const logAt = (level: string) => (obj: object, msg: string) => logged.push({ level, obj, msg });
  const worker = new EvoraWorker({
    address: server.address,
    queues: ['q'],
    slots: 10,
    workerId: 'w',
    reconnect: { initialDelayMs: 20, maxDelayMs: 100 },
    logger: { debug: logAt('debug'), info: logAt('info'), warn: logAt('warn'), error: logAt('error') },
  });
  cleanup.push(() => worker.stop({ timeoutMs: 0, graceMs: 0 }));
  const finished: JobOutcome[] = [];
  worker.on('jobFinished', (o) => finished.push(o));
  const aborted: WorkerEvents['jobAborted'][0][] = [];
  worker.on('jobAborted', (e) => aborted.push(e));
  const reportsOf = (jobId: string) => reportsIn(server.received).filter((r) => r.value.jobId === jobId);
  const ack = (jobId: string, result: AckResult, fields: Partial<ServerAck> = {}) =>
    server.send({ msg: { $case: 'ack', value: { jobId, accepted: result === AckResult.ACK_RESULT_ACCEPTED, reason: '', result, leaseToken: '', databaseUnavailable: false, ...fields } } });
  return { server, worker, finished, aborted, logged, reportsOf, ack };
}

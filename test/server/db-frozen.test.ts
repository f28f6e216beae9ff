import { readFileSync, readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { clientsFor, type Clients } from '../helpers/server-setup.js';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';
import { freePort, logLines, privatePostgres, serveChild, type PrivatePostgres, type ServeChild } from '../helpers/private-pg.js';

/**
 * A database that stops answering without closing its connections (every PostgreSQL
 * process SIGSTOPped: a frozen VM, a network partition) must not hang the calls that
 * meet it: a statement on a pooled connection is given up after EVORA_DB_QUERY_TIMEOUT_MS,
 * the call answered UNAVAILABLE over gRPC and 503 over HTTP, and the server serves again,
 * logging nothing at error level, once the database answers again.
 */

const QUERY_TIMEOUT_MS = 1500;
/** Longer than the query timeout and the pool's connect timeout (10 s): a hung call fails the test, not the run. */
const CALL_DEADLINE_MS = 25_000;

let pgc: PrivatePostgres;
let srv: ServeChild & { databaseUrl: string };
let clients: Clients;
let httpUrl: string;

beforeAll(async () => {
  pgc = await privatePostgres();
  const url = await pgc.databaseCreate();
  const [port, httpPort] = [await freePort(), await freePort()];
  srv = {
    ...serveChild(['--port', String(port), '--poll-interval-ms', '200', '--sweep-interval-ms', '200', '--election-interval-ms', '200'], {
      DATABASE_URL: url,
      EVORA_HTTP_PORT: String(httpPort),
      EVORA_DB_QUERY_TIMEOUT_MS: String(QUERY_TIMEOUT_MS),
      EVORA_LOG_LEVEL: 'info',
    }),
    databaseUrl: url,
  };
  await waitFor(() => srv.output().includes('Evora listening'), { timeoutMs: 60_000, what: 'the server to listen' });
  clients = clientsFor(`127.0.0.1:${port}`);
  httpUrl = `http://127.0.0.1:${httpPort}`;
});
afterAll(async () => {
  clients?.close();
  if (srv) expect(await srv.stop(), srv.output().slice(-2000)).toBe(0);
  await pgc?.close();
});

/** A unary JobService call with a deadline; resolves to its error (null: it succeeded). */
function getJobError(id: string): Promise<grpc.ServiceError | null> {
  return new Promise((resolve) => {
    clients.jobs.getJob({ id }, new grpc.Metadata(), { deadline: Date.now() + CALL_DEADLINE_MS }, (err) => resolve(err));
  });
}

/** The parent pid of a process, from /proc. */
function ppidOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

/** Sends `signal` to `pid`; a process gone meanwhile (a backend that was exiting, reaped once the postmaster runs) is fine. */
function signalIfAlive(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/** The cluster's processes: its postmaster (the checkpointer's parent) and every child of it. */
async function clusterPids(): Promise<number[]> {
  const [row] = await pgc.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'`);
  const postmaster = ppidOf(row!.pid);
  const children = readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((p) => {
      try {
        return ppidOf(p) === postmaster;
      } catch {
        return false; // gone meanwhile
      }
    });
  return [postmaster, ...children];
}

/** `fn`'s result, run with every process of the cluster stopped (SIGSTOP), continued (SIGCONT) after. */
async function whileFrozen<T>(fn: () => Promise<T>): Promise<T> {
  const pids = await clusterPids();
  for (const pid of pids) signalIfAlive(pid, 'SIGSTOP');
  try {
    return await fn();
  } finally {
    // The children first: the postmaster, once running, reaps any that had exited.
    for (const pid of [...pids].reverse()) signalIfAlive(pid, 'SIGCONT');
  }
}

/** The shutdown steps a server's output says ran out their bound, as [step, bound_ms]. */
function lateSteps(output: string): unknown[][] {
  return logLines(output)
    .filter((l) => l.msg.startsWith('shutdown: ') && l.msg.includes('did not finish'))
    .map((l) => [l.step, l.bound_ms]);
}

describe('a database that stops answering', () => {
  it('is UNAVAILABLE after the query timeout, over gRPC and HTTP, and the server serves again when it answers', async () => {
    const { job } = await new Promise<{ job?: { id: string } }>((resolve, reject) =>
      clients.jobs.submitJob(
        { queue: queueName('frozen'), type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) },
        (err, res) => (err ? reject(err) : resolve(res)),
      ),
    );
    // Several reads at once, so the pool holds open connections when the database freezes.
    expect(await Promise.all(Array.from({ length: 4 }, () => getJobError(job!.id)))).toEqual([null, null, null, null]);

    const pids = await clusterPids();
    for (const pid of pids) signalIfAlive(pid, 'SIGSTOP');
    try {
      const err = await getJobError(job!.id);
      expect(err?.code, err?.details).toBe(grpc.status.UNAVAILABLE);
      expect(err!.details).toMatch(/^database unavailable: /);
      const res = await fetch(`${httpUrl}/v1/queues`, { signal: AbortSignal.timeout(CALL_DEADLINE_MS) });
      expect(res.status).toBe(503);
      expect(((await res.json()) as { message: string }).message).toMatch(/^database unavailable: /);
    } finally {
      // The children first: the postmaster, once running, reaps any that had exited.
      for (const pid of [...pids].reverse()) signalIfAlive(pid, 'SIGCONT');
    }

    await waitFor(async () => (await getJobError(job!.id)) === null, { timeoutMs: 30_000, what: 'the server to serve again' });
    expect(srv.child.exitCode).toBeNull();
    const errors = logLines(srv.output()).filter((l) => l.level >= 50);
    expect(errors, JSON.stringify(errors.slice(0, 3))).toEqual([]);
    // The statements given up were an outage, logged as one.
    expect(logLines(srv.output()).some((l) => l.msg === 'database unavailable: Query read timeout')).toBe(true);
  });

  it('SIGTERM: once a shutdown step finds the database silent, each later database step is given 1 s, not 10', async () => {
    // Statements wait for ever (EVORA_DB_QUERY_TIMEOUT_MS 0): only the shutdown's bounds end them.
    const port = await freePort();
    const stopping = serveChild(['--port', String(port), '--shutdown-timeout-ms', '200'], { DATABASE_URL: srv.databaseUrl, EVORA_DB_QUERY_TIMEOUT_MS: '0' });
    await waitFor(() => stopping.output().includes('Evora listening'), { timeoutMs: 60_000, what: 'the server to listen' });
    const code = await whileFrozen(() => stopping.stop());
    expect(code, stopping.output().slice(-2000)).toBe(0);
    const late = lateSteps(stopping.output());
    // The first database step waits its full bound; every one after it, 1 s.
    expect(late, stopping.output().slice(-2000)).toEqual([
      ["deleting this server's worker sessions", 10_000],
      ...late.slice(1).map(([step]) => [step, 1_000]),
    ]);
    expect(late.length).toBeGreaterThan(1);
  }, 60_000);

  it('SIGTERM while a report waits on the frozen database: the drain running out its bound counts as the silence, so each later database step is given 1 s', async () => {
    // With workers connected the drain waits for their writes, which the database never
    // answers: it runs out its bound (shutdown timeout + 10 s), and before, the sessions'
    // delete then waited 10 s more (the exit past 30 s with the default timeout).
    const port = await freePort();
    const stopping = serveChild(['--port', String(port), '--shutdown-timeout-ms', '200'], { DATABASE_URL: srv.databaseUrl, EVORA_DB_QUERY_TIMEOUT_MS: '0' });
    await waitFor(() => stopping.output().includes('Evora listening'), { timeoutMs: 60_000, what: 'the server to listen' });
    const address = `127.0.0.1:${port}`;
    const queue = queueName('frozen-drain');
    const client = new EvoraClient({ address });
    const worker = new EvoraWorker({ address, queues: [queue], slots: 1 });
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let running = false;
    worker.handle('t', async () => {
      running = true;
      await gate;
      return { ok: true };
    });
    let code: number | null;
    try {
      await client.submit({ queue, type: 't' });
      await worker.start();
      await waitFor(() => running, { what: 'the job to run' });
      code = await whileFrozen(async () => {
        // Its complete reaches the server, whose write to the database never returns.
        release();
        await new Promise((resolve) => setTimeout(resolve, 500));
        return stopping.stop();
      });
    } finally {
      client.close();
      await worker.stop({ timeoutMs: 0, graceMs: 0 });
    }
    expect(code, stopping.output().slice(-2000)).toBe(0);
    const late = lateSteps(stopping.output());
    expect(late, stopping.output().slice(-2000)).toEqual([
      ['draining the dispatcher', 10_200],
      ...late.slice(1).map(([step]) => [step, 1_000]),
    ]);
    expect(late.length).toBeGreaterThan(1);
  }, 90_000);

  it('a scrape still answers, evora_database_up 0, however long the statements may wait (EVORA_DB_QUERY_TIMEOUT_MS 0)', async () => {
    // Before, the scrape waited for its reads as long as the statements may (here for ever;
    // 30 s by default, past Prometheus's 10 s scrape timeout): the outage went untold.
    const [port, metricsPort] = [await freePort(), await freePort()];
    const patient = serveChild(['--port', String(port), '--metrics-port', String(metricsPort)], { DATABASE_URL: srv.databaseUrl, EVORA_DB_QUERY_TIMEOUT_MS: '0' });
    try {
      await waitFor(() => patient.output().includes('Evora listening'), { timeoutMs: 60_000, what: 'the second server to listen' });
      const scrape = async () => {
        const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { signal: AbortSignal.timeout(CALL_DEADLINE_MS) });
        return { status: res.status, text: await res.text() };
      };
      // A scrape first: its reads leave open connections in the pool, which then meet the freeze.
      expect((await scrape()).text).toMatch(/^evora_database_up 1$/m);
      const pids = await clusterPids();
      for (const pid of pids) signalIfAlive(pid, 'SIGSTOP');
      try {
        const frozen = await scrape();
        expect(frozen.status).toBe(200);
        expect(frozen.text).toMatch(/^evora_database_up 0$/m);
        expect(frozen.text).toMatch(/^process_cpu_seconds_total /m);
      } finally {
        for (const pid of [...pids].reverse()) signalIfAlive(pid, 'SIGCONT');
      }
      await waitFor(async () => /^evora_database_up 1$/m.test((await scrape()).text), { timeoutMs: 30_000, what: 'the scrape to reach the database again' });
    } finally {
      expect(await patient.stop(), patient.output().slice(-2000)).toBe(0);
    }
  });
});

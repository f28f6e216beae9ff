import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { teardownAdd } from '../helpers/teardown.js';
import { waitFor } from '../helpers/wait.js';
import { blackholeProxy, type BlackholeProxy } from '../helpers/blackhole-proxy.js';
import { freePort, logLines, privatePostgres, serveChild, type PrivatePostgres, type ServeChild } from '../helpers/private-pg.js';

/**
 * A network that stops answering between one server and PostgreSQL: no reset, no refusal,
 * every byte dropped both ways while the sockets stay open (a partition, a firewall that
 * drops packets), through a proxy of the test's own (test/helpers/blackhole-proxy.ts).
 * Server A reaches the database through it and leads; server B reaches it directly.
 *
 * - A's calls are answered UNAVAILABLE within about EVORA_DB_QUERY_TIMEOUT_MS (1.5 s here),
 *   those that need a new connection or wait for one too: with the pool's connect timeout
 *   fixed at 10 s they were answered after 10 s (past the 7 s deadline this test gives).
 * - Leadership moves: A gives it up once its lock connection stops answering (its health
 *   check's 5 s), B takes it once PostgreSQL ends A's idle lock session (idle_session_timeout,
 *   10 s here): A's loss is logged before B's election.
 * - A's worker goes on heartbeating to A, which keeps naming its leases (docs/api.md: an
 *   outage of one server alone); B sweeps them a lease length after its election, and the
 *   worker's reports for the swept attempts are refused: every job ends COMPLETED by one
 *   accepted completion.
 * - When the path comes back (or is reset), A serves again without a restart, as a follower.
 */

const QUERY_TIMEOUT_MS = 1500;
/** Well above the query timeout, well below the pool's fixed 10 s connect timeout of before. */
const CALL_DEADLINE_MS = 7000;
const INTERVALS = ['--poll-interval-ms', '200', '--sweep-interval-ms', '200', '--election-interval-ms', '200', '--project-interval-ms', '200'];

let pgc: PrivatePostgres;
let proxy: BlackholeProxy;
let a: ServeChild;
let b: ServeChild;
let clientA: EvoraClient;
let clientB: EvoraClient;

/** `evora serve` on `url`; should the file fail before afterAll stops it, its teardown kills it. */
function serve(url: string, port: number): ServeChild {
  const srv = serveChild(['--port', String(port), ...INTERVALS], {
    DATABASE_URL: url,
    EVORA_LOG_LEVEL: 'info',
    EVORA_DB_QUERY_TIMEOUT_MS: String(QUERY_TIMEOUT_MS),
  });
  teardownAdd(() => {
    if (srv.child.exitCode === null && srv.child.signalCode === null) srv.child.kill('SIGKILL');
  });
  return srv;
}

beforeAll(async () => {
  pgc = await privatePostgres();
  const url = await pgc.databaseCreate();
  proxy = await blackholeProxy(pgc.port);
  const [portA, portB] = [await freePort(), await freePort()];
  // A first, so that it leads.
  a = serve(proxy.through(url), portA);
  await waitFor(() => a.output().includes('elected leader'), { timeoutMs: 60_000, what: 'A to lead' });
  b = serve(url, portB);
  await waitFor(() => b.output().includes('Evora listening'), { timeoutMs: 60_000, what: 'B to listen' });
  clientA = new EvoraClient({ address: `127.0.0.1:${portA}`, deadlineMs: CALL_DEADLINE_MS });
  clientB = new EvoraClient({ address: `127.0.0.1:${portB}`, deadlineMs: 10_000 });
});
afterAll(async () => {
  clientA?.close();
  clientB?.close();
  const codes = await Promise.all([a?.stop(), b?.stop()]);
  await pgc?.close();
  expect(codes).toEqual([0, 0]);
  for (const srv of [a, b]) {
    const errors = logLines(srv.output()).filter((l) => l.level >= 50);
    expect(errors, JSON.stringify(errors.slice(0, 3))).toEqual([]);
  }
});

/** When (epoch ms) `srv` logged `msg` for the first time after `from` (an offset into its output); null: not yet. */
function loggedAt(srv: ServeChild, msg: string, from = 0): number | null {
  return (logLines(srv.output().slice(from)).find((l) => l.msg === msg)?.time as number | undefined) ?? null;
}

/** How many sessions hold the leadership lock now. */
async function leaderLockHolders(): Promise<number> {
  const rows = await pgc.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity s USING (pid)
      WHERE s.application_name = 'evora-leader' AND l.locktype = 'advisory' AND l.granted`,
  );
  return rows[0]!.n;
}

describe('a network between a server and PostgreSQL that stops answering', () => {
  it('UNAVAILABLE within the query timeout, leadership moves without overlap, leases and jobs as the rules say, back when the path is', async () => {
    const queue = queueName('blackhole');
    await clientB.upsertQueue(queue, { leaseSeconds: 2 });
    const worker = new EvoraWorker({ address: clientA.address, queues: [queue], slots: 2 });
    const accepted = new Map<string, number>();
    worker.on('jobFinished', ({ job, accepted: yes }) => {
      if (yes) accepted.set(job.id, (accepted.get(job.id) ?? 0) + 1);
    });
    let gateOpen!: () => void;
    const gate = new Promise<void>((resolve) => (gateOpen = resolve));
    const started = new Set<string>();
    worker.handle('t', async (job) => {
      started.add(job.id);
      await gate;
      return { attempt: job.attempt };
    });
    teardownAdd(() => worker.stop({ timeoutMs: 0, graceMs: 0 }));
    await worker.start();
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await clientB.submit({ queue, type: 't', payload: { i }, idempotencyKey: `k${i}` })).job.id);
    await waitFor(() => started.size === 2, { what: 'two jobs running on A' });

    const fromA = a.output().length;
    const fromB = b.output().length;
    proxy.blackhole();
    // More calls at once than A's pool holds connections: some run on a pooled connection,
    // the others need a new one or wait for one to come free.
    const answers = await Promise.all(Array.from({ length: 25 }, () => clientA.get(ids[0]!).then(() => null, (e: unknown) => e as grpc.ServiceError)));
    for (const err of answers) {
      expect(err?.code, err?.details).toBe(grpc.status.UNAVAILABLE);
      expect(err!.details).toMatch(/^database unavailable: \S[^\n]*$/);
    }
    gateOpen(); // the handlers finish while the path is down: their reports wait

    // Leadership moves to B, after A has let it go.
    await waitFor(() => loggedAt(b, 'elected leader', fromB), { timeoutMs: 30_000, what: 'B to be elected' });
    const lostA = loggedAt(a, 'lost leadership', fromA);
    expect(lostA, 'A gave up leadership').not.toBeNull();
    expect(lostA!).toBeLessThan(loggedAt(b, 'elected leader', fromB)!);
    // One line for the outage on A, not one per failed statement.
    expect(logLines(a.output().slice(fromA)).filter((l) => l.level >= 40).map((l) => l.msg)).toEqual([expect.stringMatching(/^database unavailable: /)]);
    expect(a.child.exitCode).toBeNull();

    proxy.resume();
    await waitFor(async () => (await clientA.get(ids[0]!).catch(() => null)) !== null, { timeoutMs: 30_000, what: 'A to serve again' });
    await waitFor(async () => (await Promise.all(ids.map((id) => clientB.get(id)))).every((j) => j.state === 'COMPLETED'), {
      timeoutMs: 30_000,
      what: 'every job to complete',
    });
    for (const id of ids) {
      expect(accepted.get(id), id).toBe(1);
      // A swept attempt is LEASE_EXPIRED; one COMPLETED, the last.
      expect((await clientB.attempts(id)).map((x) => x.outcome).filter((o) => o === 'COMPLETED')).toEqual(['COMPLETED']);
    }
    // B leads on; A, back, follows: one lock holder, and A was not elected again.
    expect(await leaderLockHolders()).toBe(1);
    expect(loggedAt(a, 'elected leader', fromA)).toBeNull();
  });

  it('a path that ends in resets: the server serves again at once', async () => {
    const { job } = await clientA.submit({ queue: queueName('reset'), type: 't', payload: {} });
    proxy.blackhole();
    const err = await clientA.get(job.id).then(() => null, (e: unknown) => e as grpc.ServiceError);
    expect(err?.code, err?.details).toBe(grpc.status.UNAVAILABLE);
    proxy.reset();
    await waitFor(async () => (await clientA.get(job.id).catch(() => null))?.id === job.id, { timeoutMs: 30_000, what: 'A to serve again' });
    expect(a.child.exitCode).toBeNull();
  });
});

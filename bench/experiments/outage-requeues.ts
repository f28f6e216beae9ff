/**
 * What a PostgreSQL outage longer than a lease does to the jobs in flight: N jobs run in one
 * SDK worker (their handlers wait), PostgreSQL is stopped for lease + 3 s, half the handlers
 * finish during the outage (their completions meet it), the other half after it. Prints, as
 * one JSON line: handlers aborted (lease_lost), completions given up, and jobs that needed a
 * second attempt, i.e. ran twice. A server, a worker and a private PostgreSQL in this process.
 * Usage: npx tsx bench/experiments/outage-requeues.ts [N=200] [leaseSeconds=3]
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configLoad } from '../../src/server/config.js';
import { embeddedPostgresStart, freePort, type EmbeddedPostgresHandle } from '../../src/server/embedded-postgres.js';
import { silentLogger } from '../../src/logger.js';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { serverStart } from '../../src/server/server.js';
import { until } from '../lib/util.js';

const n = Number(process.argv[2] ?? 200);
const leaseSeconds = Number(process.argv[3] ?? 3);


const dir = await mkdtemp(join(tmpdir(), 'evora-outage-exp-'));
await chmod(dir, 0o755);
const port = await freePort();
const pgStart = () => embeddedPostgresStart({ dataDir: join(dir, 'pgdata'), port, postgresFlags: ['-c', 'fsync=off'] });
let pgh: EmbeddedPostgresHandle = await pgStart();
const stops: (() => Promise<unknown> | void)[] = [];
try {
  const config = configLoad({ databaseUrl: pgh.url, host: '127.0.0.1', port: '0', httpPort: '0', pollIntervalMs: '200', sweepIntervalMs: '200', electionIntervalMs: '200' }, {});
  let address = '';
  const server = await serverStart(config, silentLogger(), { onListening: (a) => (address = a) });
  stops.push(() => server.stop());
  const client = new EvoraClient({ address, deadlineMs: 10_000 });
  stops.push(() => client.close());
  const queue = `outage-${process.pid}`;
  await client.upsertQueue(queue, { leaseSeconds });
  const worker = new EvoraWorker({ address, queues: [queue], slots: n });
  stops.push(() => worker.stop({ timeoutMs: 1000, graceMs: 1000 }));
  let aborted = 0;
  let givenUp = 0;
  let accepted = 0;
  worker.on('jobAborted', () => aborted++);
  worker.on('jobFinished', (o) => (o.accepted ? accepted++ : givenUp++));
  const gates = new Map<string, () => void>();
  let runs = 0;
  let released = false;
  worker.handle<{ i: number }>('t', async (job) => {
    runs++;
    if (!released) await new Promise<void>((resolve) => gates.set(job.id, resolve));
    return { i: job.payload.i };
  });
  await worker.start();
  const ids = (await client.submitMany(Array.from({ length: n }, (_, i) => ({ queue, type: 't', payload: { i } })))).map((r) => r.job.id);
  await until(() => gates.size === n, 120_000, 'every handler to start', 20);
  await until(() => server.maintainer.elector.isLeader, 120_000, 'leadership', 20);

  const stoppedAt = Date.now();
  await pgh.stop();
  for (const id of ids.slice(0, n / 2)) gates.get(id)?.(); // these complete during the outage
  await until(() => Date.now() > stoppedAt + (leaseSeconds + 3) * 1000, 120_000, 'the outage to outlast the lease', 20);
  pgh = await pgStart();
  const backAt = Date.now();
  await until(() => Date.now() > backAt + 2 * leaseSeconds * 1000, 120_000, 'two lease lengths with the database back', 20);
  released = true; // a requeued job's next run returns at once
  for (const [, open] of gates) open();
  const jobs = async () => Promise.all(ids.map((id) => client.get(id)));
  await until(async () => (await jobs()).every((j) => j.state === 'COMPLETED'), 180_000, 'every job to complete', 20);
  const all = await jobs();
  console.log(
    JSON.stringify({
      jobs: n,
      leaseSeconds,
      outageMs: backAt - stoppedAt,
      handlerRuns: runs,
      handlersAborted: aborted,
      reportsGivenUp: givenUp,
      reportsAccepted: accepted,
      jobsRunTwice: all.filter((j) => j.attempt > 1).length,
    }),
  );
} finally {
  for (const stop of stops.reverse()) await Promise.resolve(stop()).catch(() => undefined);
  await pgh.stop().catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
}

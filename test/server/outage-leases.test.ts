import { beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { configLoad } from '../../src/server/config.js';
import { serverStart, type EvoraServer } from '../../src/server/server.js';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { teardownAdd } from '../helpers/teardown.js';
import { waitFor } from '../helpers/wait.js';
import { privatePostgres, type PrivatePostgres } from '../helpers/private-pg.js';

/**
 * A PostgreSQL outage longer than a lease does not take the jobs of live workers: the
 * worker's heartbeats fail while the database is down, but it keeps naming its leases, so
 * its server keeps holding them (Dispatcher.dropExpiredLeases), and the sweeper gives every
 * lease one lease length after the database is back before it sweeps (Sweeper). The worker
 * renews the lease then and finishes the job in its first attempt, never told lease_lost.
 * A job that finished during the outage has its completion answered RETRY_LATER with
 * database_unavailable, which the SDK resends until it is applied.
 * The database is a cluster of this file's own, stopped and started as an operator would.
 */

type LogLine = { level: number; msg: string; [k: string]: unknown };

describe('a database outage longer than a lease', () => {
  let pgc: PrivatePostgres;
  let server: EvoraServer;
  let client: EvoraClient;
  const lines: LogLine[] = [];

  beforeAll(async () => {
    pgc = await privatePostgres();
    teardownAdd(() => pgc.close());
    const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as LogLine) });
    const config = configLoad(
      { host: '127.0.0.1', port: '0', httpPort: '0', databaseUrl: pgc.url, pollIntervalMs: '200', sweepIntervalMs: '200', electionIntervalMs: '200' },
      {},
    );
    let address = '';
    server = await serverStart(config, logger, { onListening: (a) => (address = a) });
    teardownAdd(() => server.stop());
    client = new EvoraClient({ address, deadlineMs: 5_000 });
    teardownAdd(() => client.close());
  });


  it("leaves a live worker's jobs to it: one running is renewed after the outage, one done during it is recorded; both in their first attempt", async () => {
    const queue = queueName('outage-lease');
    const leaseSeconds = 2;
    await client.upsertQueue(queue, { leaseSeconds });
    const worker = new EvoraWorker({ address: client.address, queues: [queue], slots: 2 });
    teardownAdd(() => worker.stop({ timeoutMs: 0, graceMs: 0 }).then(() => undefined));
    const aborted: string[] = [];
    const finished: { id: string; outcome: string; accepted: boolean }[] = [];
    worker.on('jobAborted', ({ kind }) => aborted.push(kind));
    worker.on('jobFinished', ({ job, outcome, accepted }) => finished.push({ id: job.id, outcome, accepted }));
    const gate = () => {
      let open!: () => void;
      const opened = new Promise<void>((resolve) => (open = resolve));
      return { open, opened };
    };
    const gates = { long: gate(), short: gate() };
    const started = new Set<string>();
    worker.handle<{ gate: 'long' | 'short' }>('t', async (j) => {
      started.add(j.payload.gate);
      await gates[j.payload.gate].opened;
      return { through: 'the outage' };
    });
    await worker.start();
    const { job } = await client.submit({ queue, type: 't', payload: { gate: 'long' } });
    const { job: short } = await client.submit({ queue, type: 't', payload: { gate: 'short' } });
    await waitFor(() => started.size === 2, { what: 'both handlers to start' });
    await waitFor(() => server.maintainer.elector.isLeader, { what: 'leadership' });
    const lockedUntil = (await client.get(job.id)).leaseExpiresAt!.getTime();

    await pgc.stop();
    gates.short.open(); // its completion meets the outage
    // Down past the lease's expiry and the dispatcher's grace (2 s): long enough for the old
    // rules to drop the lease on the server and sweep it once the database is back.
    const downUntil = lockedUntil + 2 * leaseSeconds * 1000 + 2000;
    await waitFor(() => Date.now() > downUntil, { what: 'the outage to outlast the lease', timeoutMs: 30_000 });
    expect(aborted).toEqual([]);
    const backAt = Date.now();
    await pgc.start();

    // The worker's next heartbeat renews the lease from after the outage.
    await waitFor(async () => ((await client.get(job.id).catch(() => null))?.leaseExpiresAt?.getTime() ?? 0) > backAt, {
      what: 'the lease renewed after the outage',
      timeoutMs: 30_000,
    });
    // The sweeper has had the database for longer than a lease length: it held the lease
    // that long and saw it renewed.
    await waitFor(() => Date.now() > backAt + 2 * leaseSeconds * 1000, { what: 'a lease length with the database back' });
    gates.long.open();
    await waitFor(() => finished.length === 2, { what: 'both jobs to finish' });

    expect(finished).toEqual(
      expect.arrayContaining([
        { id: job.id, outcome: 'completed', accepted: true },
        { id: short.id, outcome: 'completed', accepted: true },
      ]),
    );
    expect(aborted).toEqual([]);
    for (const id of [job.id, short.id]) {
      expect(await client.get(id)).toMatchObject({ state: 'COMPLETED', attempt: 1, result: { through: 'the outage' } });
      expect((await client.attempts(id)).map((a) => [a.attempt, a.outcome])).toEqual([[1, 'COMPLETED']]);
    }
    expect(lines.filter((l) => l.msg.startsWith('leases expired while their worker held them'))).toEqual([]);
  });
});

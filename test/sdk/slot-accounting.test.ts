import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { EvoraClient, EvoraWorker, type JobOutcome } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { call, serverSetup } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The worker counts its slots as the server does (src/dispatcher/session.ts): a lease holds
 * a slot from its push until its write commits or the server finds it lost. A report still
 * waiting for its ack when the server declares its lease lost must stop taking a slot at
 * once, or the server, which has freed that slot, pushes a job into it and the worker
 * counts more than `slots` ("the server pushed more jobs than this worker has slots").
 *
 * Reproduced for real: a completion of another job, row-locked by the test, holds the
 * server's completion batch in flight, so the worker's report waits for its ack; the
 * lease of the reported job is then expired and swept, the worker's next heartbeat is
 * answered lease_lost, and the freed slot is filled by a new push.
 */

const { server, address, clients, databaseUrl } = await serverSetup();
const sql = new pg.Pool({ connectionString: databaseUrl, max: 3 });
sql.on('error', () => undefined);
const client = new EvoraClient({ address });
afterAll(async () => {
  client.close();
  await sql.end();
});

const submit = async (queue: string, type: string) => (await client.submit({ queue, type, payload: {} })).job;

describe('slot accounting against a real server', () => {
  it('a report awaiting its ack whose lease the server declares lost frees its slot at once; the worker never counts more than its slots', async () => {
    const queue = queueName('slots');
    const blockerQueue = queueName('blocker');
    // A short lease: the worker heartbeats every second, so the loss is found quickly.
    await client.upsertQueue(queue, { leaseSeconds: 3 });

    // Y: leased by a unary worker; its completion will hang on the test's row lock.
    const y = await submit(blockerQueue, 'blocker');
    const claimed = await call(clients.workers, 'claimJobs', { workerId: 'unary', queues: [blockerQueue], max: 1, jobTypes: [] });
    const yLease = claimed.jobs[0]!;
    expect(yLease.job?.id).toBe(y.id);

    const warnings: string[] = [];
    const worker = new EvoraWorker({
      address,
      queues: [queue],
      slots: 1,
      logger: { warn: (_f, msg) => warnings.push(msg), error: (_f, msg) => warnings.push(msg) },
    });
    let maxHeld = 0;
    const sample = () => (maxHeld = Math.max(maxHeld, worker.stats().held));
    const finished: JobOutcome[] = [];
    worker.on('jobStarted', sample);
    worker.on('jobFinished', (o) => {
      finished.push(o);
      sample();
    });
    let releaseX!: () => void;
    const xGate = new Promise<void>((r) => (releaseX = r));
    worker.handle('x', async () => {
      await xGate;
      return { x: true };
    });
    worker.handle('z', () => ({ z: true }));
    await worker.start();
    try {
      const x = await submit(queue, 'x');
      await waitFor(() => worker.stats().running === 1, { what: 'X running' });
      // Z waits: the worker's only slot is X's.
      const z = await submit(queue, 'z');

      const locker = await sql.connect();
      try {
        await locker.query('BEGIN');
        await locker.query('SELECT 1 FROM evora.jobs WHERE id = $1 FOR UPDATE', [y.id]);
        const yDone = call(clients.workers, 'completeJob', { jobId: y.id, leaseToken: yLease.leaseToken, result: {} });
        await waitFor(
          async () =>
            (await sql.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rowCount === 1,
          { what: "Y's completion waiting on the row lock" },
        );

        // X's report waits behind Y's in the server's completion batch.
        releaseX();
        await waitFor(() => worker.stats().awaitingAck === 1 && worker.stats().running === 0, { what: "X's report written" });
        expect(worker.stats().held).toBe(1);

        // X's lease ends as a lease does when its worker is silent: it expires and the sweep
        // requeues it (far in the future, so it is not claimed again here). Y is locked: skipped.
        const swept = await server.store.jobSweepExpired({ limit: 10, now: new Date(Date.now() + 3_600_000) });
        expect(swept.jobs.map((j) => j.id)).toEqual([x.id]);

        // The next heartbeat is answered lease_lost for X: the server frees the slot and pushes Z.
        await waitFor(() => finished.some((o) => o.job.id === z.id) || worker.stats().running > 0 || worker.stats().awaitingAck > 1, {
          what: 'Z pushed into the slot X left',
          timeoutMs: 15_000,
        });
        sample();
        // X still waits for its ack, but holds no slot.
        expect(finished.find((o) => o.job.id === x.id)).toBeUndefined();
        expect(worker.stats().held).toBeLessThanOrEqual(1);

        await locker.query('ROLLBACK');
        await yDone;
      } finally {
        locker.release();
      }
      // X's write meets its lost lease; Z's is applied.
      await waitFor(() => finished.length === 2, { what: 'both reports settled' });
      expect(finished.find((o) => o.job.id === x.id)).toMatchObject({ outcome: 'completed', accepted: false, ackResult: 'lease_lost' });
      expect(finished.find((o) => o.job.id === z.id)).toMatchObject({ outcome: 'completed', accepted: true, ackResult: 'accepted' });
      expect(maxHeld).toBeLessThanOrEqual(1);
      expect(warnings.filter((w) => w.includes('more jobs than this worker has slots'))).toEqual([]);
      expect(worker.stats()).toMatchObject({ held: 0, awaitingAck: 0 });
    } finally {
      await worker.stop({ timeoutMs: 1000, graceMs: 1000 });
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Queue.rate_limit is a global token bucket: job starts of the queue, on any server, never
 * exceed burst + rate × window in any window of time. Two servers on one database, each with
 * two SDK workers of several slots. Every start is read back from PostgreSQL, retries
 * included: the test (not Evora) adds a trigger that records each move into RUNNING. The fallback poll is set to a minute, so the jobs can only all start in time if the
 * claimers wake when the next token is due.
 */
let a: { clients: Clients; address: string };
let b: { clients: Clients; address: string };
let databaseUrl: string;
let sql: pg.Client;

beforeAll(async () => {
  const slow = { pollIntervalMs: '60000' };
  const first = await serverSetup(slow);
  databaseUrl = first.databaseUrl;
  a = first;
  b = await serverSetup({ databaseUrl, ...slow });
  sql = new pg.Client({ connectionString: databaseUrl });
  await sql.connect();
  // Test instrumentation on the test's own database: one row per start (claim or hand-off).
  await sql.query(`
    CREATE TABLE public.test_starts (queue text NOT NULL, at timestamptz NOT NULL);
    CREATE FUNCTION public.test_record_start() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO public.test_starts VALUES (NEW.queue, NEW.started_at);
      RETURN NULL;
    END $$;
    CREATE TRIGGER test_record_start AFTER INSERT OR UPDATE OF state ON evora.jobs
      FOR EACH ROW WHEN (NEW.state = 'RUNNING') EXECUTE FUNCTION public.test_record_start();`);
});
afterAll(async () => {
  await sql.end();
});

/** Every start of the queue's jobs (claims, retries included), in time order, in ms. */
async function startsOf(queue: string): Promise<number[]> {
  const { rows } = await sql.query<{ ms: number }>(
    `SELECT extract(epoch FROM at)::float8 * 1000 AS ms FROM public.test_starts WHERE queue = $1 ORDER BY at`,
    [queue],
  );
  return rows.map((r) => r.ms);
}

/** Asserts that in every window [t_i, t_j] the starts number at most burst + rate × (t_j − t_i). */
function expectWithinBucket(starts: number[], perSecond: number, burst: number): void {
  for (let i = 0; i < starts.length; i++) {
    for (let j = i; j < starts.length; j++) {
      const allowed = burst + (perSecond * ((starts[j] as number) - (starts[i] as number))) / 1000 + 1e-6;
      if (j - i + 1 > allowed) {
        throw new Error(`${j - i + 1} starts within ${((starts[j] as number) - (starts[i] as number)).toFixed(3)} ms (allowed ${allowed.toFixed(3)})`);
      }
    }
  }
}

describe('rate_limit across two servers', () => {
  it('5 per second with burst 1 starts 20 jobs (and 2 retries) never faster than the bucket, over both servers', async () => {
    const queue = queueName('rate');
    const perSecond = 5;
    const burst = 1;
    const jobs = 20;
    const failOnce = 2;
    const client = new EvoraClient({ address: a.address });
    const clientB = new EvoraClient({ address: b.address });
    await client.upsertQueue(queue, { rateLimit: { perSecond, burst }, backoff: { kind: 'fixed', baseSeconds: 0, jitter: 0 } });
    expect((await clientB.getQueue(queue)).rateLimit).toEqual({ perSecond, burst });

    const workers: EvoraWorker[] = [];
    for (const [address, name] of [
      [a.address, 'a1'],
      [a.address, 'a2'],
      [b.address, 'b1'],
      [b.address, 'b2'],
    ] as const) {
      const w = new EvoraWorker({ address, workerId: name, queues: [queue], slots: 4 });
      w.handle('work', async (job) => {
        // A retry is a start too: it must take a token like any other.
        if (job.payload.failOnce === true && job.attempt === 1) throw new Error('first attempt fails');
        return { by: name };
      });
      workers.push(w);
    }
    try {
      // Half the jobs wait before the workers start; the other half arrive while they run,
      // through both servers (a submit's hand-off would start a job without a token).
      await client.submitMany(
        Array.from({ length: jobs / 2 }, (_, n) => ({ queue, type: 'work', payload: { n, failOnce: n < failOnce } })),
      );
      await Promise.all(workers.map((w) => w.start()));
      for (let n = jobs / 2; n < jobs; n++) await (n % 2 === 0 ? client : clientB).submit({ queue, type: 'work', payload: { n } });
      await waitFor(
        async () => {
          const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM evora.jobs WHERE state = 'COMPLETED' AND queue = $1`, [
            queue,
          ]);
          return rows[0]!.n === jobs;
        },
        { timeoutMs: 30_000, what: 'every job completed' },
      );
    } finally {
      await Promise.all(workers.map((w) => w.stop({ timeoutMs: 5_000 })));
      client.close();
      clientB.close();
    }

    const starts = await startsOf(queue);
    expect(starts).toHaveLength(jobs + failOnce);
    expectWithinBucket(starts, perSecond, burst);
    // The jobs' own start times (their last attempt's) keep to the bucket too.
    const { rows } = await sql.query<{ ms: number; attempt: number }>(
      `SELECT extract(epoch FROM started_at)::float8 * 1000 AS ms, attempt FROM evora.jobs WHERE queue = $1 ORDER BY started_at`,
      [queue],
    );
    expect(rows).toHaveLength(jobs);
    expect(rows.filter((r) => r.attempt === 2)).toHaveLength(failOnce);
    expectWithinBucket(
      rows.map((r) => r.ms),
      perSecond,
      burst,
    );
    // Both servers started jobs.
    const { rows: by } = await sql.query<{ worker: string }>(
      `SELECT DISTINCT left(result->>'by', 1) AS worker FROM evora.jobs WHERE queue = $1 ORDER BY 1`,
      [queue],
    );
    expect(by.map((r) => r.worker)).toEqual(['a', 'b']);
  });

  it('ClaimJobs takes at most the whole tokens, across servers, and a long-poll starts a held-back job when its token is due', async () => {
    const queue = queueName('unaryrate');
    await call(a.clients.queues, 'upsertQueue', { name: queue, rateLimit: { perSecond: 4, burst: 2 } });
    const job = (n: number) => ({ queue, type: 't', payload: { n }, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
    await call(a.clients.jobs, 'submitJobs', { idsOnly: false, jobs: [job(1), job(2), job(3), job(4)] });

    // The bucket starts full: two at once, then none on either server until a token is due.
    const first = await call(a.clients.workers, 'claimJobs', { workerId: 'u1', queues: [queue], max: 4, jobTypes: [] });
    expect(first.jobs).toHaveLength(2);
    // A long-poll (with a minute-long fallback poll) gets the next token's job when it is due.
    const next = await call(b.clients.workers, 'claimJobs', { workerId: 'u2', queues: [queue], max: 4, wait: { seconds: 10, nanos: 0 }, jobTypes: [] });
    // One token is due 250 ms after the first claim (two if this machine was slow meanwhile).
    expect(next.jobs.length).toBeGreaterThanOrEqual(1);
    const starts = await startsOf(queue);
    expect(starts).toHaveLength(2 + next.jobs.length);
    expectWithinBucket(starts, 4, 2);
    // The others are still PENDING, not lost: they wait for their tokens.
    const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1 AND state = 'PENDING'`, [queue]);
    expect(rows[0]!.n).toBe(4 - 2 - next.jobs.length);
  });
});

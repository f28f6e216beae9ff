import type { ChildProcess } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabaseCreate, type TestDatabase } from '../helpers/db.js';
import { queueName } from '../helpers/factories.js';
import { call, clientsFor, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';
import { freePort, serveChild } from '../helpers/private-pg.js';

/**
 * A frozen leader (SIGSTOP: its TCP connections stay up) must not keep the leadership, or
 * no server sweeps expired leases and a max_concurrency queue whose room they hold waits
 * forever on every server. Two real `evora serve` processes on one database; the leader is
 * stopped, a job leased through the other one is never finished: its lease must be swept.
 */

interface Serve {
  port: number;
  child: ChildProcess;
  out: () => string;
  exited: Promise<void>;
  clients: Clients;
}

let db: TestDatabase;
const serves: Serve[] = [];

async function serve(): Promise<Serve> {
  const port = await freePort();
  const srv = serveChild(['--port', String(port)], {
    DATABASE_URL: db.url,
    EVORA_ELECTION_INTERVAL_MS: '200',
    EVORA_SWEEP_INTERVAL_MS: '200',
    EVORA_LOG_LEVEL: 'info',
  });
  const s = { port, child: srv.child, out: srv.output, exited: srv.exited.then(() => undefined), clients: clientsFor(`127.0.0.1:${port}`) };
  serves.push(s);
  await waitFor(() => s.out().includes(`Evora listening on 127.0.0.1:${port}`), { timeoutMs: 30_000, what: 'the server listening' });
  return s;
}

const leads = (s: Serve) => s.out().includes('leader: starting the maintenance services');

beforeAll(async () => {
  db = await testDatabaseCreate();
});
afterAll(async () => {
  for (const s of serves) {
    s.child.kill('SIGCONT');
    if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGTERM');
    await s.exited;
    s.clients.close();
  }
  await db.drop();
});

describe('a frozen leader', () => {
  it('loses the leadership: the other server sweeps the expired lease that held a max_concurrency queue full', { timeout: 90_000 }, async () => {
    const a = await serve();
    await waitFor(() => leads(a), { timeoutMs: 30_000, what: 'the first server to lead' });
    const b = await serve();
    const queue = queueName('frozen');
    await call(b.clients.queues, 'upsertQueue', { name: queue, maxConcurrency: 1, leaseSeconds: 1 });
    const job = (n: number) => ({ queue, type: 't', payload: { n }, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
    await call(b.clients.jobs, 'submitJobs', { idsOnly: false, jobs: [job(1), job(2)] });

    a.child.kill('SIGSTOP');
    // A worker that dies holding the job: its lease (1 s) expires; only a leader sweeps it.
    const [leased] = (await call(b.clients.workers, 'claimJobs', { workerId: 'gone', queues: [queue], max: 1, jobTypes: [] })).jobs;
    expect(leased).toBeDefined();
    const sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
    try {
      await waitFor(
        async () => {
          const { rows } = await sql.query<{ state: string }>(`SELECT state FROM evora.jobs WHERE id = $1`, [leased!.job!.id]);
          return rows[0]?.state === 'PENDING';
        },
        { timeoutMs: 45_000, what: 'the expired lease to be swept while the leader is frozen' },
      );
      expect(leads(b)).toBe(true);
      // The queue has room again: the next claim gets a job.
      const next = await call(b.clients.workers, 'claimJobs', { workerId: 'w2', queues: [queue], max: 1, jobTypes: [] });
      expect(next.jobs).toHaveLength(1);
    } finally {
      await sql.end();
    }
  });
});

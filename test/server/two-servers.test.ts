import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { LeasedJob } from '../../src/gen/evora/v1/worker.js';
import { queueName } from '../helpers/factories.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

let a: Clients;
let b: Clients;
let databaseUrl: string;
const workers: RawWorker[] = [];

beforeAll(async () => {
  const first = await serverSetup();
  databaseUrl = first.databaseUrl;
  a = first.clients;
  b = (await serverSetup({ databaseUrl })).clients;
});
afterAll(() => {
  for (const w of workers) w.close();
});

describe('two server processes on one database', () => {
  it('two workers on each server complete 2,000 jobs, each exactly once', async () => {
    const queue = queueName('shared');
    const total = 2000;
    // Deliveries seen by all workers, by job id: more than one would be a double delivery.
    const deliveries = new Map<string, string[]>();
    const make = async (clients: Clients, name: string) => {
      const w = new RawWorker(clients);
      workers.push(w);
      await w.hello(name, [queue], 8);
      let answered = 0;
      w.stream.on('data', () => {
        for (; answered < w.jobs.length; answered++) {
          const leased = w.jobs[answered] as LeasedJob;
          const id = leased.job!.id;
          deliveries.set(id, [...(deliveries.get(id) ?? []), name]);
          w.complete(leased, { by: name });
        }
      });
      return w;
    };
    const ws = await Promise.all([make(a, 'a1'), make(a, 'a2'), make(b, 'b1'), make(b, 'b2')]);
    for (let i = 0; i < total; i += 500) {
      await call(i % 1000 === 0 ? a.jobs : b.jobs, 'submitJobs', { idsOnly: false,
        jobs: Array.from({ length: 500 }, (_, k) => ({ queue, type: 't', payload: { n: i + k }, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) })),
      });
    }
    const acked = () => ws.reduce((n, w) => n + w.received.filter((r) => r.msg?.$case === 'ack' && r.msg.value.accepted).length, 0);
    await waitFor(() => acked() === total, { timeoutMs: 50_000, what: 'all acks' });

    expect(deliveries.size).toBe(total);
    expect([...deliveries.values()].every((by) => by.length === 1)).toBe(true);
    // Every worker on both servers took part.
    const perWorker = new Map<string, number>();
    for (const [by] of deliveries.values()) perWorker.set(by!, (perWorker.get(by!) ?? 0) + 1);
    expect([...perWorker.keys()].sort()).toEqual(['a1', 'a2', 'b1', 'b2']);

    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    const { rows } = await client.query(
      `SELECT state, count(*)::int AS n, max(attempt) AS max_attempt FROM evora.jobs WHERE queue = $1 GROUP BY state`,
      [queue],
    );
    await client.end();
    expect(rows).toEqual([{ state: 'COMPLETED', n: total, max_attempt: 1 }]);
  });
});

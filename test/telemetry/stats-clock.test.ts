import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { EvoraServer } from '../../src/server/server.js';
import { jobInputs, queueName } from '../helpers/factories.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The stats' and series' windows (GetQueueStats, ListQueueStats, GetQueueSeries) are read by
 * the database's clock, the one the events' times and so the minute buckets come from: a
 * server whose own clock is off (here: this process's Date moved two hours, PostgreSQL's
 * clock untouched) still counts the last hour's jobs.
 */

let server: EvoraServer;
let clients: Clients;
beforeAll(async () => {
  ({ server, clients } = await serverSetup());
});
afterEach(() => {
  vi.useRealTimers();
});

const HOUR = 3_600_000;

describe("a server whose clock is off reads the stats' windows by the database's clock", () => {
  it('the last hour of completions is in the stats and the series with the server two hours ahead, and two hours behind', async () => {
    const queue = queueName('clock');
    const { store } = server;
    await store.jobSubmitMany({ jobs: jobInputs(queue, 5) });
    const claimed = await store.jobClaim({ queues: [queue], limit: 5, workerId: 'w' });
    await store.jobCompleteMany({ completions: claimed.map((j) => ({ id: j.id, token: j.leaseToken! })) });
    await waitFor(async () => (await call(clients.queues, 'getQueueStats', { name: queue })).stats!.completed60m === 5, {
      what: 'the projector to count the 5 completions',
      timeoutMs: 20_000,
    });

    for (const offset of [2 * HOUR, -2 * HOUR]) {
      const what = `server clock ${offset > 0 ? 'ahead' : 'behind'}`;
      vi.useFakeTimers({ toFake: ['Date'] });
      vi.setSystemTime(new Date(Date.now() + offset));
      try {
        const stats = (await call(clients.queues, 'getQueueStats', { name: queue })).stats!;
        expect(stats, what).toMatchObject({ completed: 5, submitted60m: 5, completed60m: 5 });
        expect(stats.throughput!.last60m, what).toBeCloseTo(5 / 3600, 9);
        const listed = (await call(clients.queues, 'listQueueStats', {})).stats.find((s) => s.queue === queue);
        expect(listed, what).toMatchObject({ completed60m: 5 });
        const series = await call(clients.queues, 'getQueueSeries', { queue, minutes: 5 });
        expect(series.points.reduce((n, p) => n + p.completed, 0), what).toBe(5);
      } finally {
        vi.useRealTimers();
      }
    }
  });
});

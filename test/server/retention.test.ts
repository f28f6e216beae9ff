import { beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/server/embedded-postgres.js';
import type { EvoraServer } from '../../src/server/server.js';
import { jobInputs, queueName } from '../helpers/factories.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Retention end to end in a real server: a queue's retention set over the API, the leader's
 * pruner (wired in src/server/server.ts with EVORA_PRUNE_INTERVAL_MS) deleting the expired
 * jobs once projected, and /metrics counting them.
 */

let server: EvoraServer;
let clients: Clients;
let base: string;
beforeAll(async () => {
  const port = await freePort();
  ({ server, clients } = await serverSetup({ metricsPort: String(port), pruneIntervalMs: '50', pruneBatchSize: '2' }));
  base = `http://127.0.0.1:${port}`;
});

describe('retention in a running server', () => {
  it("the leader deletes jobs past their queue's retention and counts them in evora_jobs_pruned_total", async () => {
    const queue = queueName();
    // A day's lease: the jobs are claimed "an hour ago", and the sweeper must not take them back.
    const res = await call(clients.queues, 'upsertQueue', { name: queue, leaseSeconds: 86_400, completedRetention: { seconds: 60, nanos: 0 } });
    expect(res.queue).toMatchObject({ completedRetention: { seconds: 60, nanos: 0 }, dlqRetention: { seconds: 2_592_000, nanos: 0 } });

    // Jobs that completed an hour ago (by the store's `now`: the server's pruner runs on the database clock).
    const hourAgo = new Date(Date.now() - 3600_000);
    const submitted = await server.store.jobSubmitMany({ jobs: jobInputs(queue, 5), now: hourAgo });
    const claimed = await server.store.jobClaim({ queues: [queue], limit: 5, workerId: 'w', now: hourAgo });
    const completed = await server.store.jobCompleteMany({ completions: claimed.map((j) => ({ id: j.id, token: j.leaseToken! })), now: hourAgo });
    expect(completed.filter((c) => c.accepted)).toHaveLength(5);

    await waitFor(async () => (await server.store.jobList({ queue, limit: 10 })).jobs.length === 0, { what: 'the pruner' });
    await expect(call(clients.jobs, 'getJob', { id: submitted[0]!.job.id })).rejects.toMatchObject({ code: 5 }); // NOT_FOUND
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(text).toContain(`evora_jobs_pruned_total{queue="${queue}",state="COMPLETED"} 5`);
  });
});

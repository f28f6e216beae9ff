import { beforeAll, describe, expect, it } from 'vitest';
import { JobState } from '../../src/gen/evora/v1/job.js';
import type { EvoraServer } from '../../src/server/server.js';
import { queueName } from '../helpers/factories.js';
import { rawWorkers } from '../helpers/raw-worker.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/** SubmitJob through the gRPC layer hands its job to an idle worker of the same server. */

let clients: Clients;
let server: EvoraServer;
beforeAll(async () => {
  // No fallback poll: only the submit itself (or its NOTIFY) can bring the job to the worker.
  ({ clients, server } = await serverSetup({ pollIntervalMs: '3600000' }));
});
const worker = rawWorkers(() => clients);

const submit = (queue: string, i: number) =>
  call(clients.jobs, 'submitJob', { queue, type: 't', payload: { i }, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });

describe('SubmitJob with an idle worker on this server', () => {
  it('answers RUNNING, leased to that worker, which gets the job and completes it; a busy worker leaves the next to a claim', async () => {
    const queue = queueName();
    await call(clients.queues, 'upsertQueue', { name: queue, maxAttempts: 3 });
    const w = worker();
    await w.hello('idle-worker', [queue], 1, { batches: true });
    // The session's first claim (nothing to claim) has come back: the queue is idle.
    await waitFor(() => server.dispatcher.queueWorkers(queue).freeSlots === 1, { what: 'the first claim to come back' });

    const first = await submit(queue, 1);
    expect(first.created).toBe(true);
    expect(first.job).toMatchObject({ state: JobState.JOB_STATE_RUNNING, attempt: 1, workerId: 'idle-worker' });
    await w.until(() => w.jobs.length === 1);
    expect(w.jobs[0]!.job!.id).toBe(first.job!.id);

    // Its one slot is taken: the next job waits PENDING, and comes by a claim once the slot frees.
    const second = await submit(queue, 2);
    expect(second.job!.state).toBe(JobState.JOB_STATE_PENDING);
    w.complete(w.jobs[0]!, { ok: true });
    await w.until(() => w.jobs.length === 2);
    expect(w.jobs[1]!.job!.id).toBe(second.job!.id);
    w.complete(w.jobs[1]!, {});
    await w.until(() => w.allAcks().length === 2);
    expect(w.allAcks().every((a) => a.accepted)).toBe(true);
    const got = await call(clients.jobs, 'getJob', { id: first.job!.id });
    expect(got.job).toMatchObject({ state: JobState.JOB_STATE_COMPLETED, result: { ok: true } });
  });
});

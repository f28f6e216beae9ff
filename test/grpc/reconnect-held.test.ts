import { beforeAll, describe, expect, it } from 'vitest';
import { LeaseLostReason } from '../../src/gen/evora/v1/worker.js';
import { queueName } from '../helpers/factories.js';
import { rawWorkers } from '../helpers/raw-worker.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';

/**
 * A worker that reconnects names the leases it still holds in hello.held: those that are
 * no longer current are told lost, with their token and the code NOT_HELD_ON_RECONNECT,
 * right after the welcome; the current ones keep their slots.
 */

let clients: Clients;
beforeAll(async () => {
  ({ clients } = await serverSetup());
});
const worker = rawWorkers(() => clients);

describe('hello.held after a reconnect', () => {
  it('a lease that is no longer current is told lost (NOT_HELD_ON_RECONNECT, with its token); a current one is kept', async () => {
    const queue = queueName();
    const submit = async () =>
      (await call(clients.jobs, 'submitJob', { queue, type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) })).job!;
    const finished = await submit();
    const running = await submit();
    const { jobs } = await call(clients.workers, 'claimJobs', { workerId: 'before', queues: [queue], max: 2, jobTypes: [] });
    expect(jobs).toHaveLength(2);
    const stale = jobs.find((j) => j.job!.id === finished.id)!;
    const current = jobs.find((j) => j.job!.id === running.id)!;
    // The first lease ends while the worker is away: its job is completed (by a unary twin).
    await call(clients.workers, 'completeJob', { jobId: stale.job!.id, leaseToken: stale.leaseToken });

    const w = worker();
    await w.hello('after', [queue], 2, {
      held: [
        { jobId: stale.job!.id, leaseToken: stale.leaseToken },
        { jobId: current.job!.id, leaseToken: current.leaseToken },
      ],
    });
    await w.until(() => w.messages('leaseLost').length === 1);
    expect(w.messages('leaseLost')).toEqual([
      { jobId: stale.job!.id, leaseToken: stale.leaseToken, code: LeaseLostReason.LEASE_LOST_REASON_NOT_HELD_ON_RECONNECT, reason: expect.any(String) },
    ]);
    // The current lease is this session's: completing it on the stream is accepted.
    w.complete(current, { done: true });
    await w.until(() => w.acks(current.job!.id).length === 1);
    expect(w.acks(current.job!.id)[0]).toMatchObject({ accepted: true, leaseToken: current.leaseToken });
  });
});

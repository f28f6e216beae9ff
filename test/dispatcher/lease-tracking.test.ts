import { describe, expect, it } from 'vitest';
import { dispatcherTestSetup } from '../helpers/dispatcher-setup.js';
import { jobInput, queueName } from '../helpers/factories.js';
import { sqlFor } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';

const t = dispatcherTestSetup();

describe('the slots a session holds follow its current leases', () => {
  it('a late write of an earlier run of a job, claimed again by the same session, does not free the new run slot', async () => {
    const queue = queueName();
    await t.store.queueUpsert({ name: queue, backoffBaseSeconds: 0, backoffJitter: 0, leaseSeconds: 1 });
    const { job } = await t.store.jobSubmit({ job: jobInput({ queue }) });
    const { dispatcher, session, pushed } = await t.open({ queue, slots: 2 });
    dispatcher.notifyQueue(queue);
    await waitFor(() => pushed.length === 1, { what: 'the first run pushed' });
    const first = pushed[0]!;
    // Its lease expires and the sweeper requeues it; the same session gets it again.
    await sqlFor(t.store).query(`UPDATE evora.jobs SET locked_until = now() - interval '1 second' WHERE id = $1`, [job.id]);
    expect((await t.store.jobSweepExpired({ limit: 10 })).requeued).toBe(1);
    dispatcher.notifyQueue(queue);
    await waitFor(() => pushed.length === 2, { what: 'the second run pushed' });
    const second = pushed[1]!;
    expect(second.id).toBe(job.id);
    expect(second.leaseToken).not.toBe(first.leaseToken);
    // The claim that got the second run filled every slot it asked for, so the dispatcher
    // claims once more (reserving the free slot until it comes back empty): wait for that.
    await waitFor(() => session.free === 1, { what: 'one slot free once the follow-up claim is back' });

    // The first run reports late: refused, and the second run keeps its slot.
    expect(await dispatcher.complete(session, { id: job.id, token: first.leaseToken!, result: null })).toMatchObject({ accepted: false });
    expect(session.free).toBe(1);
    expect(await dispatcher.complete(session, { id: job.id, token: second.leaseToken!, result: null })).toMatchObject({ accepted: true });
    expect(session.free).toBe(2);
  });
});

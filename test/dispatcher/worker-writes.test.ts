import { describe, expect, it } from 'vitest';
import { Dispatcher, type WorkerSession, type WriteAck, type WriteListener, type WriteRequest } from '../../src/dispatcher/dispatcher.js';
import type { Job } from '../../src/domain/job.js';
import { silentLogger } from '../../src/logger.js';
import { dispatcherTestSetup } from '../helpers/dispatcher-setup.js';
import { jobInputs, queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

const t = dispatcherTestSetup();

/** A listener that records what it is told, and the session's free slots at that moment. */
function recorder(session: WorkerSession, opts: { throwOn?: string } = {}) {
  const told: { jobId: string; what: 'written' | 'failed'; result?: string; freeThen: number }[] = [];
  const listener: WriteListener = {
    written: (request: WriteRequest, ack: WriteAck) => {
      told.push({ jobId: request.write.id, what: 'written', result: ack.result, freeThen: session.free });
      if (request.write.id === opts.throwOn) throw new Error('a listener with a bug');
    },
    failed: (request: WriteRequest) => {
      told.push({ jobId: request.write.id, what: 'failed', freeThen: session.free });
    },
  };
  return { told, listener };
}

/** A dispatcher (with `observer.written`) and one session of `slots` that has been pushed `n` jobs. */
async function withJobs(n: number, written?: (job: { id: string }) => void) {
  const queue = queueName();
  const dispatcher = new Dispatcher({
    store: t.store,
    logger: silentLogger(),
    pollIntervalMs: 3_600_000,
    claimCooldownMs: 0,
    observer: written ? { written: (_kind, job) => written(job) } : undefined,
  });
  const pushed: Job[] = [];
  const session = await dispatcher.sessionOpen({
    workerId: 'w',
    queues: [queue],
    slots: n,
    send: (msg) => {
      if (msg.kind === 'jobs') pushed.push(...msg.jobs);
    },
  });
  await t.store.jobSubmitMany({ jobs: jobInputs(queue, n) });
  dispatcher.notifyQueue(queue);
  await waitFor(() => pushed.length === n, { what: 'the jobs pushed' });
  return { dispatcher, session, pushed, stop: () => dispatcher.drainAll(0) };
}

describe("a stream's reports through group commit", () => {
  it('each report is answered once, after its statement committed, with its slot already free', async () => {
    const { dispatcher, session, pushed, stop } = await withJobs(3);
    const { told, listener } = recorder(session);
    for (const job of pushed) dispatcher.report({ kind: 'complete', write: { id: job.id, token: job.leaseToken!, result: null }, session, listener });
    expect(told).toEqual([]); // nothing before the commit
    await waitFor(() => told.length === 3, { what: 'the answers' });
    expect(told.map((a) => [a.what, a.result])).toEqual(Array.from({ length: 3 }, () => ['written', 'accepted']));
    // Each slot is free before its report is answered (a worker told "accepted" may be sent a new job).
    expect(told.map((a) => a.freeThen)).toEqual([1, 2, 3]);
    expect((await t.store.jobGet({ id: pushed[0]!.id }))?.state).toBe('COMPLETED');
    await stop();
  });

  it('a listener that throws does not cost the other reports of its batch their answers', async () => {
    const { dispatcher, session, pushed, stop } = await withJobs(3);
    const { told, listener } = recorder(session, { throwOn: pushed[0]!.id });
    for (const job of pushed) dispatcher.report({ kind: 'complete', write: { id: job.id, token: job.leaseToken!, result: null }, session, listener });
    await waitFor(() => told.length === 3, { what: 'the answers' });
    // Told once each: the one whose listener threw is not told again.
    expect(told.map((a) => a.what)).toEqual(['written', 'written', 'written']);
    // (A follow-up claim, woken by the freed slots, reserves them until it comes back empty.)
    await waitFor(() => session.free === 3, { what: 'every slot free' });
    await stop();
  });

  it('an observer that throws: that report is told it failed (the worker sends it again), the others are written', async () => {
    let first = true;
    const { dispatcher, session, pushed, stop } = await withJobs(2, () => {
      if (first) {
        first = false;
        throw new Error('an observer with a bug');
      }
    });
    const { told, listener } = recorder(session);
    for (const job of pushed) dispatcher.report({ kind: 'complete', write: { id: job.id, token: job.leaseToken!, result: null }, session, listener });
    await waitFor(() => told.length === 2, { what: 'the answers' });
    expect(told.map((a) => a.what)).toEqual(['failed', 'written']);
    // The slot freed before the observer threw (a follow-up claim may hold it for a moment).
    await waitFor(() => session.free === 2, { what: 'both slots free' });
    await stop();
  });
});

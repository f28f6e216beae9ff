import { afterEach, describe, expect, it } from 'vitest';
import { AckResult, CancelReason, type WorkRequest } from '../../src/gen/evora/v1/worker.js';
import { EvoraWorker, type JobOutcome } from '../../src/sdk/index.js';
import { waitFor } from '../helpers/wait.js';
import { fakeWorkServer, leasedJob as leased } from './fake-work-server.js';

/**
 * The SDK worker's side of the batch messages, against a scripted server that records
 * every message: what it sends depends on what the welcome says the server takes.
 */

const kinds = (reqs: WorkRequest[]) => reqs.map((r) => r.msg?.$case);

let cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function setup(acceptsBatches: boolean) {
  const server = await fakeWorkServer({ acceptsBatches });
  cleanup.push(() => server.stop());
  const worker = new EvoraWorker({ address: server.address, queues: ['q'], slots: 100, workerId: 'w' });
  cleanup.push(() => worker.stop({ timeoutMs: 0, graceMs: 0 }));
  const finished: JobOutcome[] = [];
  worker.on('jobFinished', (o) => finished.push(o));
  return { server, worker, finished };
}

describe('EvoraWorker and batch messages', () => {
  it('says accepts_batches; takes a `jobs` batch; reports the completions of one tick as one `completes`; takes an `acks` batch', async () => {
    const { server, worker, finished } = await setup(true);
    worker.handle<{ i: number }>('noop', (job) => ({ twice: job.payload.i * 2 }));
    await worker.start();
    expect(server.hello).toMatchObject({ workerId: 'w', slots: 100, acceptsBatches: true });

    server.send({ msg: { $case: 'jobs', value: { jobs: Array.from({ length: 20 }, (_, i) => leased(i)) } } });
    await waitFor(() => server.received.length > 0 && worker.stats().awaitingAck === 20, { what: 'the reports' });
    expect(kinds(server.received)).toEqual(['completes']);
    const batch = server.received[0]!.msg;
    if (batch?.$case !== 'completes') throw new Error('expected completes');
    expect(batch.value.completes).toHaveLength(20);
    expect(batch.value.completes[3]).toEqual({ jobId: 'job-3', leaseToken: 'token-3', result: { twice: 6 } });

    const acks = Array.from({ length: 20 }, (_, i) => ({ jobId: `job-${i}`, accepted: i !== 7, reason: i === 7 ? 'lease lost' : '', result: i === 7 ? AckResult.ACK_RESULT_LEASE_LOST : AckResult.ACK_RESULT_ACCEPTED, leaseToken: `token-${i}`, databaseUnavailable: false }));
    server.send({ msg: { $case: 'acks', value: { acks } } });
    await waitFor(() => finished.length === 20, { what: 'every job finished' });
    expect(finished.filter((o) => o.accepted)).toHaveLength(19);
    expect(finished.find((o) => !o.accepted)).toMatchObject({ job: { id: 'job-7' }, outcome: 'completed', reason: 'lease lost', ackResult: 'lease_lost' });
    expect(worker.stats()).toMatchObject({ held: 0, awaitingAck: 0, running: 0 });
  });

  it('failures of one tick go as one `fails`; a lone completion goes as `complete` without waiting for company', async () => {
    const { server, worker } = await setup(true);
    worker.handle('boom', () => {
      throw new Error('boom');
    });
    worker.handle('noop', () => undefined);
    await worker.start();
    server.send({ msg: { $case: 'jobs', value: { jobs: [leased(0, 'boom'), leased(1, 'boom'), leased(2, 'boom')] } } });
    await waitFor(() => server.received.length === 1, { what: 'the failures' });
    const fails = server.received[0]!.msg;
    expect(fails?.$case).toBe('fails');
    if (fails?.$case !== 'fails') return;
    expect(fails.value.fails.map((f) => [f.jobId, f.error, f.nonRetryable])).toEqual([
      ['job-0', 'boom', false],
      ['job-1', 'boom', false],
      ['job-2', 'boom', false],
    ]);

    server.send({ msg: { $case: 'job', value: leased(3) } });
    await waitFor(() => server.received.length === 2, { what: 'the completion' });
    expect(server.received[1]?.msg).toEqual({ $case: 'complete', value: { jobId: 'job-3', leaseToken: 'token-3', result: undefined } });
  });

  it('against a server whose welcome does not take batches: one `complete` per job', async () => {
    const { server, worker, finished } = await setup(false);
    worker.handle('noop', () => undefined);
    await worker.start();
    // An older server pushes single jobs, several in one burst.
    for (let i = 0; i < 5; i++) server.send({ msg: { $case: 'job', value: leased(i) } });
    await waitFor(() => server.received.length === 5, { what: 'five reports' });
    expect(kinds(server.received)).toEqual(Array(5).fill('complete'));
    for (let i = 0; i < 5; i++) server.send({ msg: { $case: 'ack', value: { jobId: `job-${i}`, accepted: true, reason: '', result: AckResult.ACK_RESULT_ACCEPTED, leaseToken: '', databaseUnavailable: false } } });
    await waitFor(() => finished.length === 5, { what: 'every job finished' });
    expect(finished.every((o) => o.accepted && o.outcome === 'completed')).toBe(true);
  });

  it('a handler that never reads ctx.signal is still cancelled; one that reads it after the cancel sees it aborted', async () => {
    const { server, worker } = await setup(true);
    const reasons: string[] = [];
    let releaseLate!: () => void;
    const late = new Promise<void>((r) => (releaseLate = r));
    let releaseBlind!: () => void;
    const blindGate = new Promise<void>((r) => (releaseBlind = r));
    worker.handle('late', async (_job, ctx) => {
      await late;
      // Read for the first time after the cancel arrived.
      reasons.push(`${ctx.signal.aborted}:${(ctx.signal.reason as { kind?: string })?.kind}`);
      ctx.signal.throwIfAborted();
    });
    worker.handle('blind', async () => {
      await blindGate;
      throw new Error('gave up');
    });
    const aborted: string[] = [];
    worker.on('jobAborted', (e) => aborted.push(`${e.job.id}:${e.kind}`));
    await worker.start();
    server.send({ msg: { $case: 'jobs', value: { jobs: [leased(0, 'late'), leased(1, 'blind')] } } });
    await waitFor(() => worker.stats().running === 2, { what: 'both handlers running' });
    server.send({ msg: { $case: 'cancel', value: { jobId: 'job-0', code: CancelReason.CANCEL_REASON_OPERATOR } } });
    server.send({ msg: { $case: 'cancel', value: { jobId: 'job-1', code: CancelReason.CANCEL_REASON_OPERATOR } } });
    await waitFor(() => aborted.length === 2, { what: 'both aborted' });
    releaseLate();
    releaseBlind();
    await waitFor(() => worker.stats().awaitingAck === 2, { what: 'both reported' });
    expect(reasons).toEqual(['true:cancelled']);
    const fails = server.received.flatMap((r) => (r.msg?.$case === 'fails' ? r.msg.value.fails : r.msg?.$case === 'fail' ? [r.msg.value] : []));
    // A cancelled job's failure is non-retryable, whether or not the handler looked at the signal.
    expect(fails.map((f) => [f.jobId, f.nonRetryable])).toEqual([
      ['job-0', true],
      ['job-1', true],
    ]);
  });
});

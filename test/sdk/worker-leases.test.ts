import { afterEach, describe, expect, it } from 'vitest';
import { AckResult, LeaseLostReason } from '../../src/gen/evora/v1/worker.js';
import { JobAbortedError, SnoozeError } from '../../src/sdk/index.js';
import { waitFor } from '../helpers/wait.js';
import { leasedJob, workerOnFakeServer } from './fake-work-server.js';

/**
 * What the worker sends, and does not send, about a lease: a lease_lost names the lease
 * that was lost (ServerLeaseLost.lease_token) and touches only that one; a job given back
 * (a stop, ctx.snooze(0)) carries no run_at, so it is due at once by the database's clock,
 * not the worker's.
 */

let cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

const setup = () => workerOnFakeServer(cleanup);

describe('EvoraWorker and lease_lost', () => {
  it('lease_lost aborts the handler with cause lease_lost (any code), and nothing is reported about the job', async () => {
    const { server, worker, finished, aborted, reportsOf } = await setup();
    const seen: { id: string; kind: string; message: string }[] = [];
    const release = new Set<string>();
    worker.handle('wait', async (job, ctx) => {
      await new Promise<void>((resolve) => {
        ctx.signal.addEventListener('abort', () => {
          const reason = ctx.signal.reason as JobAbortedError;
          seen.push({ id: job.id, kind: reason.kind, message: reason.message });
          resolve();
        });
        const poll = setInterval(() => release.has(job.id) && (clearInterval(poll), resolve()), 5);
        ctx.signal.addEventListener('abort', () => clearInterval(poll));
      });
      return { stale: true };
    });
    worker.handle('noop', () => undefined);
    await worker.start();
    server.send({ msg: { $case: 'jobs', value: { jobs: [leasedJob(0, 'wait'), leasedJob(1, 'wait'), leasedJob(2, 'wait')] } } });
    await waitFor(() => worker.stats().running === 3, { what: 'the handlers running' });

    // job-0: no token (a server older than lease_token); job-1: its own token; job-2: a
    // token of another lease of the job, so the running handler keeps its own.
    server.send({ msg: { $case: 'leaseLost', value: { jobId: 'job-0', leaseToken: '', code: LeaseLostReason.LEASE_LOST_REASON_EXPIRED, reason: 'cancelled by an operator' } } });
    server.send({ msg: { $case: 'leaseLost', value: { jobId: 'job-1', leaseToken: 'token-1', code: LeaseLostReason.LEASE_LOST_REASON_NOT_HELD_ON_RECONNECT, reason: '' } } });
    server.send({ msg: { $case: 'leaseLost', value: { jobId: 'job-2', leaseToken: 'token-2-earlier', code: LeaseLostReason.LEASE_LOST_REASON_EXPIRED, reason: '' } } });
    await waitFor(() => finished.length === 2, { what: 'the two handlers to end' });
    expect(seen.map((s) => [s.id, s.kind])).toEqual([
      ['job-0', 'lease_lost'],
      ['job-1', 'lease_lost'],
    ]);
    // The message is the SDK's own words for the code, not the server's text.
    expect(seen[0]!.message).toMatch(/expired/);
    expect(seen[1]!.message).toMatch(/reconnected/);
    expect(aborted.map((a) => [a.job.id, a.kind])).toEqual([
      ['job-0', 'lease_lost'],
      ['job-1', 'lease_lost'],
    ]);
    expect(finished.map((o) => [o.job.id, o.outcome, o.accepted, o.ackResult])).toEqual([
      ['job-0', 'lost', false, null],
      ['job-1', 'lost', false, null],
    ]);
    expect(worker.stats()).toMatchObject({ running: 1, held: 1 });

    // job-2 runs on and reports under its own lease.
    release.add('job-2');
    await waitFor(() => reportsOf('job-2').length === 1, { what: "job-2's report" });
    expect(reportsOf('job-2')[0]).toMatchObject({ kind: 'complete', value: { leaseToken: 'token-2', result: { stale: true } } });
    expect(reportsOf('job-0')).toEqual([]);
    expect(reportsOf('job-1')).toEqual([]);
  });

  it('lease_lost naming the lease of a report waiting for its resend drops the report; a newer lease of the job runs on', async () => {
    const { server, worker, finished, aborted, reportsOf, ack } = await setup();
    let releaseSecond!: () => void;
    worker.handle('noop', async (job, ctx) => {
      // The job's second lease runs until the test lets it finish.
      if (ctx.leaseToken === 'token-0b') await new Promise<void>((r) => (releaseSecond = r));
      return { lease: job.attempt };
    });
    await worker.start();
    const first = leasedJob(0);
    server.send({ msg: { $case: 'job', value: first } });
    await waitFor(() => reportsOf('job-0').length === 1, { what: 'the first report' });
    // The report waits to be resent (200 ms) ...
    ack('job-0', AckResult.ACK_RESULT_RETRY_LATER, { leaseToken: 'token-0' });
    // ... when the job, leased again, runs here under a new lease, and the first lease is lost.
    server.send({ msg: { $case: 'job', value: { ...first, leaseToken: 'token-0b', job: { ...first.job!, attempt: 2 } } } });
    server.send({ msg: { $case: 'leaseLost', value: { jobId: 'job-0', leaseToken: 'token-0', code: LeaseLostReason.LEASE_LOST_REASON_EXPIRED, reason: '' } } });
    await waitFor(() => finished.length === 1, { what: 'the first report to be dropped' });
    expect(finished[0]).toMatchObject({ job: { id: 'job-0', attempt: 1 }, outcome: 'completed', accepted: false, ackResult: 'lease_lost' });
    expect(aborted).toEqual([]);
    expect(worker.stats()).toMatchObject({ running: 1, held: 1, awaitingAck: 0 });

    // Another report's resend, due after the dropped one's would have been, goes out; the
    // dropped one never did.
    server.send({ msg: { $case: 'job', value: leasedJob(1) } });
    await waitFor(() => reportsOf('job-1').length === 1, { what: "job-1's report" });
    ack('job-1', AckResult.ACK_RESULT_RETRY_LATER);
    await waitFor(() => reportsOf('job-1').length === 2, { what: "job-1's resend" });
    expect(reportsOf('job-0')).toHaveLength(1);

    // The running lease is untouched: its report goes out under its token.
    releaseSecond();
    await waitFor(() => reportsOf('job-0').length === 2, { what: "the second lease's report" });
    expect(reportsOf('job-0')[1]).toEqual({ kind: 'complete', value: { jobId: 'job-0', leaseToken: 'token-0b', result: { lease: 2 } } });
  });

  it('lease_lost naming the lease of a report already written leaves it to its ack', async () => {
    const { server, worker, finished, reportsOf, ack } = await setup();
    worker.handle('noop', () => undefined);
    await worker.start();
    server.send({ msg: { $case: 'job', value: leasedJob(0) } });
    await waitFor(() => reportsOf('job-0').length === 1, { what: 'the report' });
    // The server may have applied the report just before it found the lease gone.
    server.send({ msg: { $case: 'leaseLost', value: { jobId: 'job-0', leaseToken: 'token-0', code: LeaseLostReason.LEASE_LOST_REASON_EXPIRED, reason: '' } } });
    // The server freed its slot: so does the worker, at once, while the ack is awaited.
    await waitFor(() => worker.stats().held === 0, { what: 'the slot freed' });
    expect(worker.stats()).toMatchObject({ awaitingAck: 1, held: 0 });
    ack('job-0', AckResult.ACK_RESULT_ACCEPTED, { leaseToken: 'token-0' });
    await waitFor(() => finished.length === 1, { what: 'the ack' });
    expect(finished[0]).toMatchObject({ outcome: 'completed', accepted: true, ackResult: 'accepted' });
  });

  it('a written report whose lease was lost is neither renewed nor named in hello, and settles as lost if the stream ends first', async () => {
    const { server, worker, finished, reportsOf } = await setup();
    worker.handle('noop', () => undefined);
    await worker.start();
    server.send({ msg: { $case: 'jobs', value: { jobs: [leasedJob(0), leasedJob(1)] } } });
    await waitFor(() => reportsOf('job-0').length === 1 && reportsOf('job-1').length === 1, { what: 'the reports' });
    server.send({ msg: { $case: 'leaseLost', value: { jobId: 'job-0', leaseToken: 'token-0', code: LeaseLostReason.LEASE_LOST_REASON_EXPIRED, reason: '' } } });
    await waitFor(() => worker.stats().held === 1, { what: "job-0's slot freed" });
    // The stream ends before either ack: job-1 (lease held) is named in the next hello and
    // resent; job-0 (lease lost) is settled as lost and never sent again.
    server.endStream();
    await waitFor(() => server.hellos.length === 2 && reportsOf('job-1').length === 2, { what: 'the reconnect and the resend' });
    expect(server.hello?.held).toEqual([{ jobId: 'job-1', leaseToken: 'token-1' }]);
    expect(reportsOf('job-0')).toHaveLength(1);
    expect(finished).toEqual([expect.objectContaining({ job: expect.objectContaining({ id: 'job-0' }), accepted: false, ackResult: 'lease_lost' })]);
    expect(worker.stats()).toMatchObject({ held: 1, awaitingAck: 1 });
  });

  it('a push of a job under a new lease ends the lease of that job the worker still runs, before counting slots', async () => {
    const { server, worker, finished, aborted, logged } = await setup();
    const runs: string[] = [];
    worker.handle('wait', async (_job, ctx) => {
      runs.push(ctx.leaseToken);
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
    });
    await worker.start();
    const first = leasedJob(0, 'wait');
    server.send({ msg: { $case: 'job', value: first } });
    await waitFor(() => worker.stats().running === 1, { what: 'the first lease running' });
    // The lease expired meanwhile and the server leased the job again, to this worker.
    server.send({ msg: { $case: 'job', value: { ...first, leaseToken: 'token-0b', job: { ...first.job!, attempt: 2 } } } });
    await waitFor(() => runs.length === 2 && finished.length === 1, { what: 'the second lease running, the first ended' });
    expect(runs).toEqual(['token-0', 'token-0b']);
    expect(aborted.map((a) => [a.job.id, a.kind])).toEqual([['job-0', 'lease_lost']]);
    expect(finished[0]).toMatchObject({ outcome: 'lost', accepted: false });
    expect(worker.stats()).toMatchObject({ running: 1, held: 1 });
    expect(logged.filter((l) => l.msg.includes('more jobs than this worker has slots'))).toEqual([]);
  });
});

describe('EvoraWorker gives jobs back due now by the server\'s clock', () => {
  it('ctx.snooze(0) and SnoozeError() send no run_at; ctx.snooze(ms) and a date send one', async () => {
    const { server, worker, reportsOf } = await setup();
    const later = new Date(Date.now() + 3_600_000);
    worker.handle<{ i: number }>('noop', (job, ctx) => {
      switch (job.payload.i) {
        case 0:
          return ctx.snooze(0);
        case 1:
          throw new SnoozeError();
        case 2:
          return ctx.snooze(60_000);
        default:
          return ctx.snooze(later);
      }
    });
    await worker.start();
    const before = Date.now();
    server.send({ msg: { $case: 'jobs', value: { jobs: [0, 1, 2, 3].map((i) => leasedJob(i)) } } });
    await waitFor(() => [0, 1, 2, 3].every((i) => reportsOf(`job-${i}`).length === 1), { what: 'the four snoozes' });
    const [now0, now1, delayed, dated] = [0, 1, 2, 3].map((i) => reportsOf(`job-${i}`)[0]!);
    expect(now0).toEqual({ kind: 'snooze', value: { jobId: 'job-0', leaseToken: 'token-0', runAt: undefined } });
    expect(now1).toEqual({ kind: 'snooze', value: { jobId: 'job-1', leaseToken: 'token-1', runAt: undefined } });
    expect(delayed).toMatchObject({ kind: 'snooze', value: { jobId: 'job-2' } });
    const delayedAt = (delayed!.value as { runAt?: Date }).runAt!.getTime();
    expect(delayedAt).toBeGreaterThanOrEqual(before + 60_000);
    expect(dated).toEqual({ kind: 'snooze', value: { jobId: 'job-3', leaseToken: 'token-3', runAt: later } });
  });

  it('a handler aborted by stop() gives its job back with no run_at', async () => {
    const { server, worker, aborted, reportsOf, ack } = await setup();
    worker.handle('wait', async (_job, ctx) => {
      await new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
    });
    await worker.start();
    server.send({ msg: { $case: 'job', value: leasedJob(0, 'wait') } });
    await waitFor(() => worker.stats().running === 1, { what: 'the handler running' });
    const stopped = worker.stop({ timeoutMs: 0, graceMs: 10_000 });
    await waitFor(() => reportsOf('job-0').length === 1, { what: 'the give-back' });
    expect(aborted.map((a) => [a.job.id, a.kind])).toEqual([['job-0', 'shutdown']]);
    expect(reportsOf('job-0')[0]).toEqual({ kind: 'snooze', value: { jobId: 'job-0', leaseToken: 'token-0', runAt: undefined } });
    ack('job-0', AckResult.ACK_RESULT_ACCEPTED, { leaseToken: 'token-0' });
    expect(await stopped).toEqual({ unfinished: [] });
  });

  it('a job pushed while the worker stops is given back untouched, with no run_at', async () => {
    const { server, worker, reportsOf, ack } = await setup();
    const ran: string[] = [];
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    worker.handle('noop', async (job) => {
      ran.push(job.id);
      await released;
    });
    await worker.start();
    server.send({ msg: { $case: 'job', value: leasedJob(0) } });
    await waitFor(() => worker.stats().running === 1, { what: 'the first job running' });
    // stop() waits for job-0; job-1 comes before the server has seen the drain.
    const stopped = worker.stop({ timeoutMs: 10_000, graceMs: 10_000 });
    await waitFor(() => server.received.some((r) => r.msg?.$case === 'drain'), { what: 'the drain' });
    server.send({ msg: { $case: 'job', value: leasedJob(1) } });
    await waitFor(() => reportsOf('job-1').length === 1, { what: 'the give-back' });
    expect(reportsOf('job-1')[0]).toEqual({ kind: 'snooze', value: { jobId: 'job-1', leaseToken: 'token-1', runAt: undefined } });
    expect(ran).toEqual(['job-0']);

    release();
    await waitFor(() => reportsOf('job-0').length === 1, { what: "job-0's report" });
    ack('job-1', AckResult.ACK_RESULT_ACCEPTED, { leaseToken: 'token-1' });
    ack('job-0', AckResult.ACK_RESULT_ACCEPTED, { leaseToken: 'token-0' });
    expect(await stopped).toEqual({ unfinished: [] });
  });
});

import { afterEach, describe, expect, it } from 'vitest';
import { AckResult, CancelReason, DrainReason } from '../../src/gen/evora/v1/worker.js';
import type { WorkerEvents } from '../../src/sdk/index.js';
import { MAX_RESENDS } from '../../src/sdk/worker/reports.js';
import { waitFor } from '../helpers/wait.js';
import { leasedJob, workerOnFakeServer, type FakeSetup } from './fake-work-server.js';

/**
 * The worker acts on the codes of the Work stream, never on its text: each ack's result,
 * and the codes of cancel and drain messages (lease_lost: worker-leases.test.ts). A scripted server says what a
 * real one rarely does; every `reason` text here is written to mislead a worker that
 * reads it (old SDKs retried a write whose reason matched /retry/i).
 */

let cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

const setup = (opts: { acceptsBatches?: boolean } = {}) => workerOnFakeServer(cleanup, opts);

describe('EvoraWorker and ack results', () => {
  it('RETRY_LATER: the same report goes out again after a short delay, and the next ack settles it', async () => {
    const { server, worker, finished, reportsOf, ack } = await setup();
    worker.handle<{ i: number }>('noop', (job) => ({ i: job.payload.i }));
    await worker.start();
    server.send({ msg: { $case: 'job', value: leasedJob(0) } });
    await waitFor(() => reportsOf('job-0').length === 1, { what: 'the report' });

    ack('job-0', AckResult.ACK_RESULT_RETRY_LATER, { reason: 'database unavailable' });
    await waitFor(() => reportsOf('job-0').length === 2, { what: 'the resend' });
    const [first, again] = reportsOf('job-0');
    expect(again).toEqual(first);
    expect(again).toEqual({ kind: 'complete', value: { jobId: 'job-0', leaseToken: 'token-0', result: { i: 0 } } });
    // Held meanwhile: the slot and the lease stay the worker's until the report is settled.
    expect(finished).toEqual([]);
    expect(worker.stats()).toMatchObject({ held: 1, awaitingAck: 1 });

    ack('job-0', AckResult.ACK_RESULT_ACCEPTED);
    await waitFor(() => finished.length === 1, { what: 'the job to finish' });
    expect(finished[0]).toMatchObject({ job: { id: 'job-0' }, outcome: 'completed', accepted: true, ackResult: 'accepted' });
    expect(worker.stats()).toMatchObject({ held: 0, awaitingAck: 0 });
  });

  /** Answers every report of `jobId` with RETRY_LATER until the worker gives the job up. */
  async function retryLaterUntilGivenUp(t: FakeSetup, jobId: string, timeoutMs?: number) {
    let answered = 0;
    await waitFor(
      () => {
        const sent = t.reportsOf(jobId).length;
        while (answered < sent) {
          answered++;
          t.ack(jobId, AckResult.ACK_RESULT_RETRY_LATER);
        }
        return t.finished.length === 1;
      },
      { what: 'the worker to give the job up', timeoutMs },
    );
    return answered;
  }

  it('RETRY_LATER is bounded by the lease: past it the job is given up (lost), not resent forever', async () => {
    const t = await setup();
    const { server, worker, finished, reportsOf } = t;
    worker.handle('noop', () => undefined);
    await worker.start();
    // A 1.3 s lease this fake never renews (it does not answer heartbeats). Resends wait
    // 200 ms, then 400 ms, then 800 ms: the first two end by 0.6 s, well inside the lease;
    // the third would end at 1.4 s, past it, so the worker gives up after two resends
    // (however late, within 0.7 s, the acks come).
    server.send({ msg: { $case: 'job', value: leasedJob(0, 'noop', 1_300) } });
    const answered = await retryLaterUntilGivenUp(t, 'job-0');
    expect(finished[0]).toMatchObject({ job: { id: 'job-0' }, outcome: 'completed', accepted: false, ackResult: 'retry_later' });
    expect(answered).toBe(3);
    expect(reportsOf('job-0')).toHaveLength(3);
    expect(worker.stats()).toMatchObject({ held: 0, awaitingAck: 0 });
  });

  it(`RETRY_LATER under a long lease: the report is resent at most MAX_RESENDS (${MAX_RESENDS}) times`, async () => {
    const t = await setup();
    const { server, worker, finished, reportsOf, logged } = t;
    worker.handle('noop', () => undefined);
    await worker.start();
    // A lease far longer than the resends' 6.2 s, so only the bound stops them.
    server.send({ msg: { $case: 'job', value: leasedJob(0, 'noop', 600_000) } });
    await retryLaterUntilGivenUp(t, 'job-0', 30_000);
    expect(reportsOf('job-0')).toHaveLength(1 + MAX_RESENDS);
    expect(finished[0]).toMatchObject({ job: { id: 'job-0' }, accepted: false, ackResult: 'retry_later' });
    expect(logged.filter((l) => l.msg.startsWith('the server could not apply a report; sending it again'))).toHaveLength(MAX_RESENDS);
    expect(worker.stats()).toMatchObject({ held: 0, awaitingAck: 0 });
  });

  it('RETRY_LATER with database_unavailable: resent past MAX_RESENDS and past the lease, until applied', async () => {
    const t = await setup();
    const { server, worker, finished, reportsOf, ack, logged } = t;
    worker.handle('noop', () => undefined);
    await worker.start();
    // A 1.3 s lease this fake never renews: without database_unavailable the worker gives
    // the report up after two resends (the test above). Through an outage it keeps it.
    server.send({ msg: { $case: 'job', value: leasedJob(0, 'noop', 1_300) } });
    const outage = { reason: 'retry', databaseUnavailable: true };
    for (let sent = 1; sent <= MAX_RESENDS + 1; sent++) {
      await waitFor(() => reportsOf('job-0').length === sent, { what: `report ${sent}`, timeoutMs: 5_000 });
      expect(finished).toEqual([]);
      ack('job-0', AckResult.ACK_RESULT_RETRY_LATER, outage);
    }
    await waitFor(() => reportsOf('job-0').length === MAX_RESENDS + 2, { what: 'a resend past the bound', timeoutMs: 5_000 });
    ack('job-0', AckResult.ACK_RESULT_ACCEPTED);
    await waitFor(() => finished.length === 1, { what: 'the job to finish' });
    expect(finished[0]).toMatchObject({ job: { id: 'job-0' }, outcome: 'completed', accepted: true, ackResult: 'accepted' });
    const reports = reportsOf('job-0');
    expect(new Set(reports.map((r) => JSON.stringify(r))).size).toBe(1); // the same report each time
    // One warn when the outage first held a report back, debug lines, one info once over.
    expect(logged.filter((l) => l.msg === 'the server cannot reach its database; its reports are sent again until it can')).toHaveLength(1);
    expect(logged.filter((l) => l.msg.startsWith('the server reaches its database again'))).toHaveLength(1);
    expect(logged.filter((l) => l.msg.startsWith('the server could not apply a report'))).toEqual([]);
    expect(worker.stats()).toMatchObject({ held: 0, awaitingAck: 0 });
  });

  /** job-0 completes, its report is acked INVALID (`reason`), and the fail sent instead has gone out. */
  async function refusedOnce(reason: string) {
    const t = await setup();
    t.worker.handle('noop', () => ({ big: true }));
    await t.worker.start();
    t.server.send({ msg: { $case: 'job', value: leasedJob(0) } });
    await waitFor(() => t.reportsOf('job-0').length === 1, { what: 'the report' });
    t.ack('job-0', AckResult.ACK_RESULT_INVALID, { reason });
    await waitFor(() => t.reportsOf('job-0').length === 2, { what: 'the fail sent instead' });
    expect(t.reportsOf('job-0')[1]).toEqual({
      kind: 'fail',
      value: expect.objectContaining({ leaseToken: 'token-0', nonRetryable: true, error: `complete refused: ${reason}` }),
    });
    // Still held, under its lease, until that fail's ack.
    expect(t.worker.stats()).toMatchObject({ held: 1, awaitingAck: 1 });
    return t;
  }

  it('INVALID: the job is failed instead, once, under the same lease (non-retryable, the reason in its error)', async () => {
    const reason = 'result is over the size limit; retry later';
    const { worker, finished, logged, ack } = await refusedOnce(reason);
    ack('job-0', AckResult.ACK_RESULT_ACCEPTED);
    await waitFor(() => finished.length === 1 && worker.stats().held === 0, { what: 'the job to finish' });
    // The job ended as the fail said (DLQ), and jobFinished names the refused completion.
    expect(finished[0]).toMatchObject({ outcome: 'failed', accepted: true, ackResult: 'accepted', error: `complete refused: ${reason}` });
    expect(finished[0]!.refused).toEqual({ outcome: 'completed', reason });
    expect(logged.filter((l) => l.level === 'error')).toEqual([
      expect.objectContaining({ obj: expect.objectContaining({ job_id: 'job-0', ack: 'invalid' }) }),
    ]);
  });

  it('INVALID twice: the fail sent instead is refused too, so the job is given up and nothing more is sent', async () => {
    const reason = 'lease_token is not a UUID';
    const { server, worker, finished, reportsOf, ack } = await refusedOnce(reason);
    ack('job-0', AckResult.ACK_RESULT_INVALID, { reason });
    await waitFor(() => finished.length === 1, { what: 'the job to be given up' });
    expect(finished[0]).toMatchObject({ outcome: 'failed', accepted: false, ackResult: 'invalid', reason, refused: { outcome: 'completed', reason } });
    expect(worker.stats()).toMatchObject({ held: 0, awaitingAck: 0 });

    // A later job's report goes out and is settled; job-0's never again.
    server.send({ msg: { $case: 'job', value: leasedJob(1) } });
    await waitFor(() => reportsOf('job-1').length === 1, { what: 'the next report' });
    ack('job-1', AckResult.ACK_RESULT_ACCEPTED);
    await waitFor(() => finished.length === 2, { what: 'the next job to finish' });
    expect(reportsOf('job-0')).toHaveLength(2);
  });

  it("an older server's ack without a result: accepted true is accepted, false is a lost lease (not resent, whatever its text)", async () => {
    const { server, worker, finished, ack } = await setup({ acceptsBatches: false });
    worker.handle('noop', () => undefined);
    await worker.start();
    server.send({ msg: { $case: 'job', value: leasedJob(0) } });
    server.send({ msg: { $case: 'job', value: leasedJob(1) } });
    await waitFor(() => worker.stats().awaitingAck === 2 && server.received.length === 2, { what: 'both reports' });

    ack('job-0', AckResult.ACK_RESULT_UNSPECIFIED, { accepted: true });
    ack('job-1', AckResult.ACK_RESULT_UNSPECIFIED, { accepted: false, reason: 'internal error; retry the write' });
    await waitFor(() => finished.length === 2, { what: 'both jobs to finish' });
    expect(finished.map((o) => [o.job.id, o.accepted, o.ackResult])).toEqual([
      ['job-0', true, 'accepted'],
      ['job-1', false, 'lease_lost'],
    ]);
    expect(worker.stats()).toMatchObject({ held: 0, awaitingAck: 0 });
  });

  it('LEASE_LOST: the job is dropped, whatever the text says', async () => {
    const { server, worker, finished, reportsOf, ack } = await setup();
    worker.handle('noop', () => undefined);
    await worker.start();
    server.send({ msg: { $case: 'job', value: leasedJob(0) } });
    await waitFor(() => reportsOf('job-0').length === 1, { what: 'the report' });
    ack('job-0', AckResult.ACK_RESULT_LEASE_LOST, { reason: 'please retry later' });
    await waitFor(() => finished.length === 1, { what: 'the job to finish' });
    // Its only write was answered: not applied.
    expect(finished[0]).toMatchObject({ accepted: false, ackResult: 'lease_lost', reason: 'please retry later', maybeApplied: false });
    expect(worker.stats()).toMatchObject({ held: 0, awaitingAck: 0 });
  });
});

describe('EvoraWorker matches acks to reports by job and lease token', () => {
  /**
   * job-0 reported twice: its first lease (token-0) fails; before that report's ack, the
   * job is leased again (token-0b, attempt 2) and completes. Both reports await their acks.
   */
  async function twoReportsOfOneJob() {
    const t = await setup();
    const { server, worker, reportsOf } = t;
    worker.handle('noop', (job) => {
      if (job.attempt === 1) throw new Error('the first attempt fails');
      return { attempt: job.attempt };
    });
    await worker.start();
    const first = leasedJob(0);
    server.send({ msg: { $case: 'job', value: first } });
    await waitFor(() => reportsOf('job-0').length === 1, { what: "the first lease's report" });
    server.send({ msg: { $case: 'job', value: { ...first, leaseToken: 'token-0b', job: { ...first.job!, attempt: 2 } } } });
    await waitFor(() => reportsOf('job-0').length === 2, { what: "the second lease's report" });
    expect(reportsOf('job-0').map((r) => [r.kind, r.value.leaseToken])).toEqual([
      ['fail', 'token-0'],
      ['complete', 'token-0b'],
    ]);
    // Two reports await acks, but one lease is held: a job has one current lease, so the push
    // under token-0b says token-0 is lost (the server counts one slot for the job, too).
    expect(worker.stats()).toMatchObject({ held: 1, awaitingAck: 2 });
    return t;
  }

  it('acks in reverse order, each naming its lease: each settles (or resends) its own report', async () => {
    const { worker, finished, reportsOf, ack } = await twoReportsOfOneJob();

    // The later report is answered first: RETRY_LATER resends that one, not the older fail.
    ack('job-0', AckResult.ACK_RESULT_RETRY_LATER, { leaseToken: 'token-0b' });
    await waitFor(() => reportsOf('job-0').length === 3, { what: 'the resend' });
    expect(reportsOf('job-0')[2]).toEqual({ kind: 'complete', value: { jobId: 'job-0', leaseToken: 'token-0b', result: { attempt: 2 } } });

    ack('job-0', AckResult.ACK_RESULT_ACCEPTED, { leaseToken: 'token-0b' });
    await waitFor(() => finished.length === 1, { what: "the second lease's report to settle" });
    expect(finished[0]).toMatchObject({ job: { id: 'job-0', attempt: 2 }, outcome: 'completed', accepted: true, ackResult: 'accepted' });
    expect(worker.stats()).toMatchObject({ held: 0, awaitingAck: 1 });

    ack('job-0', AckResult.ACK_RESULT_LEASE_LOST, { leaseToken: 'token-0' });
    await waitFor(() => finished.length === 2, { what: "the first lease's report to settle" });
    expect(finished[1]).toMatchObject({ job: { id: 'job-0', attempt: 1 }, outcome: 'failed', accepted: false, ackResult: 'lease_lost' });
    expect(worker.stats()).toMatchObject({ held: 0, awaitingAck: 0 });
    // Nothing but the one resend asked for.
    expect(reportsOf('job-0')).toHaveLength(3);
  });

  it('an ack naming a lease none of the reports carried settles nothing', async () => {
    const { worker, finished, logged, ack } = await twoReportsOfOneJob();
    ack('job-0', AckResult.ACK_RESULT_ACCEPTED, { leaseToken: 'token-other' });
    // Acks are handled in order: once the next one is, the stray one was too.
    ack('job-0', AckResult.ACK_RESULT_ACCEPTED, { leaseToken: 'token-0' });
    await waitFor(() => finished.length === 1, { what: "the first lease's report to settle" });
    expect(finished[0]).toMatchObject({ job: { attempt: 1 }, outcome: 'failed', accepted: true });
    expect(logged).toContainEqual(expect.objectContaining({ level: 'debug', obj: { job_id: 'job-0', lease_token: 'token-other' } }));
    expect(worker.stats()).toMatchObject({ held: 1, awaitingAck: 1 });
  });

  it("an ack without a token (an older server) answers the job's oldest report", async () => {
    const { worker, finished, ack } = await twoReportsOfOneJob();
    ack('job-0', AckResult.ACK_RESULT_ACCEPTED);
    await waitFor(() => finished.length === 1, { what: 'the oldest report to settle' });
    expect(finished[0]).toMatchObject({ job: { id: 'job-0', attempt: 1 }, outcome: 'failed', accepted: true, ackResult: 'accepted' });
    expect(worker.stats()).toMatchObject({ held: 1, awaitingAck: 1 });

    ack('job-0', AckResult.ACK_RESULT_LEASE_LOST);
    await waitFor(() => finished.length === 2, { what: 'the other report to settle' });
    expect(finished[1]).toMatchObject({ job: { id: 'job-0', attempt: 2 }, outcome: 'completed', accepted: false, ackResult: 'lease_lost' });
    expect(worker.stats()).toMatchObject({ held: 0, awaitingAck: 0 });
  });
});

describe('EvoraWorker and the codes of cancel and drain', () => {
  it('cancel aborts the handler with cause cancelled, with the operator code or none (an older server); the failure is non-retryable', async () => {
    const { server, worker, aborted, reportsOf } = await setup();
    worker.handle('wait', async (_job, ctx) => {
      await new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
    });
    await worker.start();
    server.send({ msg: { $case: 'jobs', value: { jobs: [leasedJob(0, 'wait'), leasedJob(1, 'wait')] } } });
    await waitFor(() => worker.stats().running === 2, { what: 'both handlers running' });
    server.send({ msg: { $case: 'cancel', value: { jobId: 'job-0', code: CancelReason.CANCEL_REASON_OPERATOR } } });
    server.send({ msg: { $case: 'cancel', value: { jobId: 'job-1', code: CancelReason.CANCEL_REASON_UNSPECIFIED } } });
    await waitFor(() => reportsOf('job-0').length === 1 && reportsOf('job-1').length === 1, { what: 'both reports' });
    expect(aborted.map((a) => [a.job.id, a.kind])).toEqual([
      ['job-0', 'cancelled'],
      ['job-1', 'cancelled'],
    ]);
    for (const id of ['job-0', 'job-1']) {
      expect(reportsOf(id)[0]).toMatchObject({ kind: 'fail', value: { nonRetryable: true, error: 'an operator cancelled the job' } });
    }
  });

  it('drain: answered with drain, the `drain` event carries the code; the next stream takes work again', async () => {
    const { server, worker } = await setup();
    worker.handle('noop', () => undefined);
    const drains: WorkerEvents['drain'][0][] = [];
    worker.on('drain', (d) => drains.push(d));
    await worker.start();

    server.send({ msg: { $case: 'drain', value: { code: DrainReason.DRAIN_REASON_SERVER_SHUTDOWN, reason: '' } } });
    await waitFor(() => drains.length === 1, { what: 'the drain event' });
    expect(drains[0]).toEqual({ code: 'server_shutdown', reason: '' });
    await waitFor(() => server.received.some((r) => r.msg?.$case === 'drain'), { what: 'the drain answer' });
    expect(worker.stats()).toMatchObject({ connected: true, draining: true });

    // The server goes away; the worker reconnects and takes work again.
    server.endStream();
    await waitFor(() => server.hellos.length === 2 && worker.stats().connected, { what: 'the reconnect' });
    expect(worker.stats()).toMatchObject({ draining: false, reconnects: 1 });

    // A server without codes: the cause is 'unspecified'.
    server.send({ msg: { $case: 'drain', value: { code: DrainReason.DRAIN_REASON_UNSPECIFIED, reason: 'server shutting down' } } });
    await waitFor(() => drains.length === 2, { what: 'the second drain event' });
    expect(drains[1]).toEqual({ code: 'unspecified', reason: 'server shutting down' });
  });
});

describe('EvoraWorker across a stream break (scripted)', () => {
  /** job-0 completes; the stream ends before the report's ack; the report goes out again on the next stream. */
  async function resentAfterBreak() {
    const t = await setup();
    t.worker.handle('noop', () => ({ ok: true }));
    await t.worker.start();
    t.server.send({ msg: { $case: 'job', value: leasedJob(0) } });
    await waitFor(() => t.reportsOf('job-0').length === 1, { what: 'the report' });
    t.server.endStream();
    await waitFor(() => t.server.hellos.length === 2 && t.reportsOf('job-0').length === 2, { what: 'the report on the new stream' });
    return t;
  }

  it('a report written on a stream that ended is written again on the next session, whose hello names the lease', async () => {
    const { server, worker, finished, reportsOf, ack } = await resentAfterBreak();
    expect(server.hellos[1]!.held).toEqual([{ jobId: 'job-0', leaseToken: 'token-0' }]);
    expect(reportsOf('job-0')[1]).toEqual(reportsOf('job-0')[0]);
    ack('job-0', AckResult.ACK_RESULT_ACCEPTED);
    await waitFor(() => finished.length === 1, { what: 'the job to finish' });
    expect(finished[0]).toMatchObject({ accepted: true, ackResult: 'accepted', maybeApplied: false });
    expect(worker.stats()).toMatchObject({ held: 0, reconnects: 1 });
  });

  it('a report resent after a stream break and answered LEASE_LOST is finished as maybe applied', async () => {
    // What a server does when the first write was applied before the stream broke: the
    // completion ended the lease, so the resend meets LEASE_LOST.
    const { worker, finished, logged, ack } = await resentAfterBreak();
    ack('job-0', AckResult.ACK_RESULT_LEASE_LOST, { reason: 'the lease is not current' });
    await waitFor(() => finished.length === 1, { what: 'the job to finish' });
    expect(finished[0]).toMatchObject({ outcome: 'completed', accepted: false, ackResult: 'lease_lost', maybeApplied: true });
    expect(logged).toContainEqual(expect.objectContaining({ level: 'info', obj: expect.objectContaining({ job_id: 'job-0', resent: true }) }));
    expect(worker.stats()).toMatchObject({ held: 0, awaitingAck: 0 });
  });
});

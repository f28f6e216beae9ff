import { afterEach, describe, expect, it } from 'vitest';
import { AckResult, WorkRequest } from '../../src/gen/evora/v1/worker.js';
import { DEFAULT_MAX_MESSAGE_BYTES, MAX_ERROR_CHARS } from '../../src/sdk/worker/limits.js';
import { waitFor } from '../helpers/wait.js';
import { leasedJob, workerOnFakeServer } from './fake-work-server.js';

/**
 * The worker never writes what the server would refuse for its size or could not receive
 * (ServerWelcome.max_result_bytes, max_message_bytes): a message over the server's limit
 * ends the whole stream with RESOURCE_EXHAUSTED, and the same report written again on the
 * next stream ended that one too, for ever. Such a report is replaced before it goes out by
 * a non-retryable fail under the same lease whose error says why; batches are split below
 * the limit; errors are cut to what the server stores. A scripted server tells the limits
 * (a real server's: test/sdk/worker-refused.test.ts).
 */

let cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

describe('EvoraWorker and the server\'s size limits', () => {
  it('a server that tells no limits: a result over gRPC\'s default 4 MiB is failed instead, the stream kept', async () => {
    const t = await workerOnFakeServer(cleanup);
    t.worker.handle('noop', () => ({ text: 'x'.repeat(DEFAULT_MAX_MESSAGE_BYTES) }));
    await t.worker.start();
    t.server.send({ msg: { $case: 'job', value: leasedJob(0) } });
    await waitFor(() => t.reportsOf('job-0').length === 1, { what: 'the report' });
    const [sent] = t.reportsOf('job-0');
    expect(sent).toEqual({
      kind: 'fail',
      value: expect.objectContaining({ leaseToken: 'token-0', nonRetryable: true, error: expect.stringMatching(/^complete refused: the report is \d+ bytes; the server takes messages of at most 4194304$/) }),
    });
    t.ack('job-0', AckResult.ACK_RESULT_ACCEPTED);
    await waitFor(() => t.finished.length === 1, { what: 'the job to finish' });
    expect(t.finished[0]).toMatchObject({ outcome: 'failed', accepted: true, refused: { outcome: 'completed' } });
    expect(t.finished[0]!.error).toBe(`complete refused: ${t.finished[0]!.refused!.reason}`);
    expect(t.logged.filter((l) => l.msg.startsWith('the report is more than the server takes'))).toHaveLength(1);
    expect(t.worker.stats()).toMatchObject({ reconnects: 0, held: 0 });
    expect(t.server.hellos).toHaveLength(1);
  });

  it('max_result_bytes: a result over it is failed instead with the worker\'s own reason; one at it goes out', async () => {
    const t = await workerOnFakeServer(cleanup, { welcome: { maxResultBytes: 1000 } });
    // {"s":"…"} is 8 bytes of JSON around the string.
    t.worker.handle<{ i: number }>('noop', (job) => ({ s: 'é'.repeat(job.payload.i === 0 ? 496 : 497) }));
    await t.worker.start();
    t.server.send({ msg: { $case: 'job', value: leasedJob(0) } });
    t.server.send({ msg: { $case: 'job', value: leasedJob(1) } });
    await waitFor(() => t.reportsOf('job-0').length === 1 && t.reportsOf('job-1').length === 1, { what: 'the reports' });
    expect(t.reportsOf('job-0')[0]).toMatchObject({ kind: 'complete' });
    expect(t.reportsOf('job-1')[0]).toEqual({
      kind: 'fail',
      value: expect.objectContaining({ nonRetryable: true, error: 'complete refused: result is 1002 bytes of JSON; the server takes at most 1000' }),
    });
  });

  it('max_message_bytes: completions gather into batches each under it, and a result over it is failed instead', async () => {
    const limit = 64 * 1024;
    const t = await workerOnFakeServer(cleanup, { welcome: { maxMessageBytes: limit } });
    t.worker.handle<{ i: number }>('noop', (job) => ({ s: 'x'.repeat(job.payload.i === 0 ? 2 * limit : 8_000) }));
    await t.worker.start();
    for (let i = 0; i < 10; i++) t.server.send({ msg: { $case: 'job', value: leasedJob(i) } });
    await waitFor(() => Array.from({ length: 10 }, (_, i) => t.reportsOf(`job-${i}`).length).every((n) => n === 1), { what: 'every report' });
    expect(t.reportsOf('job-0')[0]).toMatchObject({ kind: 'fail', value: { error: expect.stringMatching(/^complete refused: the report is \d+ bytes; the server takes messages of at most 65536$/) } });
    for (let i = 1; i < 10; i++) expect(t.reportsOf(`job-${i}`)[0]).toMatchObject({ kind: 'complete' });
    // More than one message carried the nine completions (72 kB of results), none over the limit.
    const completions = t.server.received.filter((r) => r.msg?.$case === 'complete' || r.msg?.$case === 'completes');
    expect(completions.length).toBeGreaterThan(1);
    for (const r of t.server.received) expect(WorkRequest.encode(r).finish().length).toBeLessThanOrEqual(limit);
  });

  it('a handler that throws a huge error: the fail carries its first MAX_ERROR_CHARS characters', async () => {
    const t = await workerOnFakeServer(cleanup);
    t.worker.handle('noop', () => {
      throw new Error('e'.repeat(8 * 1024 * 1024));
    });
    await t.worker.start();
    t.server.send({ msg: { $case: 'job', value: leasedJob(0) } });
    await waitFor(() => t.reportsOf('job-0').length === 1, { what: 'the report' });
    expect(t.reportsOf('job-0')[0]).toEqual({ kind: 'fail', value: expect.objectContaining({ error: 'e'.repeat(MAX_ERROR_CHARS) }) });
    expect(t.worker.stats().reconnects).toBe(0);
  });

  it('ctx.progress with a checkpoint over max_result_bytes throws RangeError and sends nothing; a smaller one goes out', async () => {
    const t = await workerOnFakeServer(cleanup, { welcome: { maxResultBytes: 100 } });
    let thrown: unknown = null;
    t.worker.handle('noop', (_job, ctx) => {
      try {
        ctx.progress({ percent: 10, checkpoint: { s: 'x'.repeat(200) } });
      } catch (err) {
        thrown = err;
      }
      ctx.progress({ percent: 20, checkpoint: { s: 'small' } });
      return undefined;
    });
    await t.worker.start();
    t.server.send({ msg: { $case: 'job', value: leasedJob(0) } });
    await waitFor(() => t.reportsOf('job-0').length === 1, { what: 'the report' });
    expect(thrown).toBeInstanceOf(RangeError);
    expect((thrown as Error).message).toBe('checkpoint is 208 bytes of JSON; the server takes at most 100');
    const progress = t.server.received.filter((r) => r.msg?.$case === 'progress');
    expect(progress.map((r) => (r.msg?.$case === 'progress' ? r.msg.value.percent : null))).toEqual([20]);
  });
});

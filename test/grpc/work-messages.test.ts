import { describe, expect, it } from 'vitest';
import { WorkResponse } from '../../src/gen/evora/v1/worker.js';
import { leasedJobToPb } from '../../src/grpc/convert.js';
import {
  EncodedWorkResponse,
  JOBS_BATCH_MAX_BYTES,
  leasedJobsMessages,
  workResponseSerialize,
} from '../../src/grpc/work-messages.js';
import type { Job } from '../../src/domain/job.js';

/** Leased jobs on the Work stream: the generated encoder, cut into batches under the byte limit. */

const base = new Date('2026-03-01T12:34:56.789Z');

function job(over: Partial<Job> = {}): Job {
  return {
    id: '0197a0c2-1111-7222-8333-944445555666',
    queue: 'emails',
    type: 'send',
    payload: { to: 'a@example.com', n: 3 },
    state: 'RUNNING',
    priority: 0,
    runAt: base,
    attempt: 1,
    maxAttempts: 25,
    leaseToken: '0197a0c2-2222-7222-8333-944445555666',
    lockedUntil: new Date(base.getTime() + 30_000),
    workerId: 'host-1:4242',
    idempotencyKey: null,
    result: null,
    lastError: null,
    cancelRequestedAt: null,
    createdAt: new Date(base.getTime() - 1_500),
    startedAt: base,
    finishedAt: null,
    backoff: null,
    timeoutSeconds: null,
    concurrencyKey: null,
    parentIds: null,
    ...over,
  };
}

/** Each message decoded: `job` as its id, `jobs` as the list of ids; and its size. */
function shapes(out: EncodedWorkResponse[]) {
  return out.map((m) => {
    const r = WorkResponse.decode(workResponseSerialize(m)).msg;
    if (r?.$case === 'job') return r.value.job!.id;
    if (r?.$case === 'jobs') return r.value.jobs.map((l) => l.job!.id);
    throw new Error(`unexpected message ${r?.$case}`);
  });
}

describe('leased jobs as Work stream messages', () => {
  it('a job is the generated encoding of leasedJobToPb, every field kept', () => {
    const j = job({ priority: -5, idempotencyKey: 'k', lastError: 'boom ✗', payload: { s: 'ünï', list: [1, null, { a: [] }] } });
    const [msg, ...rest] = leasedJobsMessages([j], { batches: false });
    expect(rest).toHaveLength(0);
    expect(Buffer.from(msg!.bytes)).toEqual(Buffer.from(WorkResponse.encode({ msg: { $case: 'job', value: leasedJobToPb(j) } }).finish()));
    expect(WorkResponse.decode(msg!.bytes).msg).toEqual({ $case: 'job', value: leasedJobToPb(j) });
  });

  it('without batches, one `job` message per job, in order', () => {
    expect(shapes(leasedJobsMessages([job({ id: 'a' }), job({ id: 'b' }), job({ id: 'c' })], { batches: false }))).toEqual(['a', 'b', 'c']);
  });

  it('with batches, the jobs of a claim go in one `jobs` message; a lone job still goes as `job`', () => {
    const jobs = ['a', 'b', 'c'].map((id) => job({ id }));
    const out = leasedJobsMessages(jobs, { batches: true });
    expect(shapes(out)).toEqual([['a', 'b', 'c']]);
    expect(WorkResponse.decode(out[0]!.bytes).msg).toEqual({ $case: 'jobs', value: { jobs: jobs.map(leasedJobToPb) } });
    expect(shapes(leasedJobsMessages([job({ id: 'x' })], { batches: true }))).toEqual(['x']);
    expect(leasedJobsMessages([], { batches: true })).toEqual([]);
  });

  it('a batch over the limit is split: every message within it (a lone big job apart), every job once, in order', () => {
    const small = (id: string) => job({ id, payload: { pad: 'p'.repeat(400) } });
    const jobs = [small('1'), small('2'), small('3'), job({ id: 'huge', payload: { pad: 'h'.repeat(5_000) } }), small('4'), small('5'), small('6')];
    const out = leasedJobsMessages(jobs, { batches: true, maxBatchBytes: 1_200 });
    for (const m of out) {
      if (WorkResponse.decode(m.bytes).msg?.$case === 'jobs') expect(m.bytes.length).toBeLessThanOrEqual(1_200);
    }
    expect(shapes(out).flat()).toEqual(jobs.map((j) => j.id));
    expect(shapes(out)).toContain('huge');
  });

  it('a deal of many large jobs is cut into messages of at most JOBS_BATCH_MAX_BYTES, every job once and in order', () => {
    const jobs = Array.from({ length: 30 }, (_, i) => job({ id: `big-${i}`, payload: { pad: 'x'.repeat(100_000 + i * 997) } }));
    const out = leasedJobsMessages(jobs, { batches: true });
    expect(out.length).toBeGreaterThan(2);
    for (const m of out) expect(m.bytes.length).toBeLessThanOrEqual(JOBS_BATCH_MAX_BYTES);
    expect(shapes(out).flat()).toEqual(jobs.map((j) => j.id));
  });

  it('the Work serializer passes encoded messages through and encodes the others', () => {
    const bytes = new Uint8Array([0x12, 0x00]);
    expect([...workResponseSerialize(new EncodedWorkResponse(bytes))]).toEqual([0x12, 0x00]);
    const ack: WorkResponse = { msg: { $case: 'ack', value: { jobId: 'j', accepted: true, reason: '', result: 1, leaseToken: 't', databaseUnavailable: false } } };
    expect(WorkResponse.decode(workResponseSerialize(ack))).toEqual(ack);
  });

  it('a payload key named __proto__ is dropped by the generated Struct code (documented in docs/api.md)', () => {
    const j = job({ payload: JSON.parse('{"__proto__": {"x": 1}, "a": 2}') });
    const decoded = WorkResponse.decode(leasedJobsMessages([j], { batches: false })[0]!.bytes).msg;
    expect(decoded?.$case === 'job' && decoded.value.job!.payload).toEqual({ a: 2 });
  });
});

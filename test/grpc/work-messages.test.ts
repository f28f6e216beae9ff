import { describe, expect, it } from 'vitest';
import { WorkResponse } from '../../src/gen/evora/v1/worker.js';
import { leasedJobToPb } from '../../src/grpc/convert.js';
import { EncodedWorkResponse, leasedJobsEncode, workResponseSerialize } from '../../src/grpc/wire.js';
import type { Job } from '../../src/domain/job.js';

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
    leaseToken: 'f00dfeedf00dfeedf00dfeedf00dfeed',
    lockedUntil: new Date(base.getTime() + 30_000),
    workerId: 'host-1:4242',
    idempotencyKey: null,
    result: null,
    lastError: null,
    cancelRequestedAt: null,
    createdAt: new Date(base.getTime() - 1_500),
    startedAt: base,
    finishedAt: null,
    ...over,
  };
}

/** What the generated encoder writes for one job pushed alone. */
function generated(j: Job): Buffer {
  return Buffer.from(WorkResponse.encode({ msg: { $case: 'job', value: leasedJobToPb(j) } }).finish());
}

const variants: [string, Job][] = [
  ['a plain leased job', job()],
  ['an empty payload, no token, no lease', job({ payload: {}, leaseToken: null, lockedUntil: null, startedAt: null })],
  [
    'every JSON type, nested, unicode and long strings, odd keys',
    job({
      payload: {
        s: 'ünïcødé ✓ 𝄞',
        empty: '',
        '': 'empty key',
        long: 'x'.repeat(300),
        longUnicode: 'é'.repeat(100),
        int: 42,
        neg: -7.25,
        big: 2 ** 53 - 1,
        zero: 0,
        t: true,
        f: false,
        nil: null,
        list: [1, 'two', null, false, { deep: [[]] }, []],
        obj: { a: { b: { c: 'd' } }, e: {} },
      },
    }),
  ],
  ['a payload over 16 KiB (multi-byte length prefixes)', job({ payload: { blob: 'y'.repeat(20_000), list: Array.from({ length: 500 }, (_, i) => i) } })],
  [
    'every optional field set, negative priority, big attempt numbers',
    job({
      priority: -5,
      attempt: 300,
      maxAttempts: 1000,
      idempotencyKey: 'welcome-42',
      result: { ok: true },
      lastError: 'boom: ✗',
      cancelRequestedAt: base,
      finishedAt: base,
    }),
  ],
  ['whole-second and pre-1970 timestamps', job({ runAt: new Date(0), createdAt: new Date(-86_400_123), startedAt: new Date(1_700_000_000_000) })],
  ['a timestamp after 2106 (int64 seconds over 32 bits)', job({ runAt: new Date('2200-01-01T00:00:00.001Z') })],
  ['a job that is not RUNNING (no lease_expires_at in Job)', job({ state: 'PENDING' })],
];

describe('leased jobs encoded straight from the store row', () => {
  it.each(variants)('%s: the same bytes as the generated encoder', (_name, j) => {
    const [msg, ...rest] = leasedJobsEncode([j], { batches: false });
    expect(rest).toHaveLength(0);
    expect(Buffer.from(msg!.bytes).equals(generated(j))).toBe(true);
  });

  it('a batch is one `jobs` message that decodes to every job, in order, as leasedJobToPb makes them', () => {
    const jobs = variants.map(([, j], i) => ({ ...j, id: `job-${i}` }));
    const out = leasedJobsEncode(jobs, { batches: true });
    expect(out).toHaveLength(1);
    const decoded = WorkResponse.decode(out[0]!.bytes);
    const expected = WorkResponse.decode(
      WorkResponse.encode({ msg: { $case: 'jobs', value: { jobs: jobs.map(leasedJobToPb) } } }).finish(),
    );
    expect(decoded).toEqual(expected);
    expect(Buffer.from(out[0]!.bytes).equals(Buffer.from(WorkResponse.encode(expected).finish()))).toBe(true);
  });

  it('without batches, one `job` message per job', () => {
    const jobs = [job({ id: 'a' }), job({ id: 'b' }), job({ id: 'c' })];
    const out = leasedJobsEncode(jobs, { batches: false });
    expect(out.map((m) => Buffer.from(m.bytes))).toEqual(jobs.map(generated));
  });

  it('batches stay under the byte limit; a lone job (or one bigger than the limit) goes as `job`', () => {
    const small = (id: string) => job({ id, payload: { pad: 'p'.repeat(400) } });
    const jobs = [small('1'), small('2'), small('3'), job({ id: 'huge', payload: { pad: 'h'.repeat(5_000) } }), small('4'), small('5'), small('6')];
    const out = leasedJobsEncode(jobs, { batches: true, maxBatchBytes: 1_200 });
    const shapes = out.map((m) => {
      const r = WorkResponse.decode(m.bytes).msg;
      expect(m.bytes.length).toBeLessThanOrEqual(r?.$case === 'job' ? 10_000 : 1_200 + 3);
      return r?.$case === 'jobs' ? r.value.jobs.map((l) => l.job!.id) : r?.$case === 'job' ? r.value.job!.id : '?';
    });
    expect(shapes).toEqual([['1', '2'], '3', 'huge', ['4', '5'], '6']);
    expect(leasedJobsEncode([small('x')], { batches: true }).map((m) => WorkResponse.decode(m.bytes).msg?.$case)).toEqual(['job']);
    expect(leasedJobsEncode([], { batches: true })).toEqual([]);
  });

  it('a deal of many large jobs is cut into messages of at most the limit, every job once and in order', () => {
    const jobs = Array.from({ length: 30 }, (_, i) => job({ id: `big-${i}`, payload: { pad: 'x'.repeat(100_000) } }));
    const out = leasedJobsEncode(jobs, { batches: true });
    expect(out.length).toBeGreaterThan(2);
    const ids = out.flatMap((m) => {
      expect(m.bytes.length).toBeLessThanOrEqual(1024 * 1024 + 16);
      const r = WorkResponse.decode(m.bytes).msg;
      return r?.$case === 'jobs' ? r.value.jobs.map((l) => l.job!.id) : r?.$case === 'job' ? [r.value.job!.id] : [];
    });
    expect(ids).toEqual(jobs.map((j) => j.id));
  });

  it('the Work serializer passes encoded messages through and encodes the others', () => {
    const bytes = new Uint8Array([0x12, 0x00]);
    expect([...workResponseSerialize(new EncodedWorkResponse(bytes))]).toEqual([0x12, 0x00]);
    const ack: WorkResponse = { msg: { $case: 'ack', value: { jobId: 'j', accepted: true, reason: '', result: 1 } } };
    expect(WorkResponse.decode(workResponseSerialize(ack))).toEqual(ack);
  });
});

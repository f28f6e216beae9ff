import { describe, expect, it } from 'vitest';
import { WorkResponse } from '../../src/gen/evora/v1/worker.js';
import { leasedJobToPb } from '../../src/server/convert.js';
import { EncodedWorkResponse, leasedJobsEncode, workResponseSerialize } from '../../src/server/wire.js';
import type { Job } from '../../src/store/store.js';
import { job, variants } from '../helpers/wire-jobs.js';

/** What the generated encoder writes for one job pushed alone. */
function generated(j: Job): Buffer {
  return Buffer.from(WorkResponse.encode({ msg: { $case: 'job', value: leasedJobToPb(j) } }).finish());
}

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
    const ack: WorkResponse = { msg: { $case: 'ack', value: { jobId: 'j', accepted: true, reason: '' } } };
    expect(WorkResponse.decode(workResponseSerialize(ack))).toEqual(ack);
  });
});

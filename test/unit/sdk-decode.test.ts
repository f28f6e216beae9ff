import { describe, expect, it } from 'vitest';
import { WorkResponse } from '../../src/gen/evora/v1/worker.js';
import { workMessageDecode } from '../../src/sdk/decode.js';
import { jobFromPb } from '../../src/sdk/types.js';
import { leasedJobToPb } from '../../src/server/convert.js';
import { leasedJobsEncode } from '../../src/server/wire.js';
import { job, variants } from '../helpers/wire-jobs.js';

/** What the SDK got before decode.ts: the generated decoder, then jobFromPb per leased job. */
function generatedJobs(bytes: Uint8Array) {
  const msg = WorkResponse.decode(bytes).msg;
  if (msg?.$case !== 'jobs') throw new Error(`expected a jobs message, got ${msg?.$case}`);
  return msg.value.jobs.map((l) => ({ job: l.job ? jobFromPb(l.job) : null, leaseToken: l.leaseToken, leaseExpiresAt: l.leaseExpiresAt ?? null }));
}

const encode = (res: WorkResponse) => Buffer.from(WorkResponse.encode(res).finish());

describe('the SDK decodes leased-job batches straight into Job objects', () => {
  it('every variant, as the server encodes a batch: equal to the generated decoder + jobFromPb', () => {
    const jobs = variants.map(([, j], i) => ({ ...j, id: `job-${i}` }));
    const [msg, ...rest] = leasedJobsEncode(jobs, { batches: true });
    expect(rest).toHaveLength(0);
    const bytes = Buffer.from(msg!.bytes);
    const decoded = workMessageDecode(bytes);
    expect(decoded.kind).toBe('jobs');
    expect(decoded.kind === 'jobs' && decoded.jobs).toStrictEqual(generatedJobs(bytes));
  });

  it('as the generated encoder writes a batch, with a leased job that carries no job and one with no lease end', () => {
    const bytes = encode({
      msg: {
        $case: 'jobs',
        value: { jobs: [leasedJobToPb(job()), { job: undefined, leaseToken: 't', leaseExpiresAt: undefined }, { ...leasedJobToPb(job({ id: 'x' })), leaseExpiresAt: undefined }] },
      },
    });
    const decoded = workMessageDecode(bytes);
    expect(decoded.kind === 'jobs' && decoded.jobs).toStrictEqual(generatedJobs(bytes));
  });

  it('skips fields it does not know in a job and in a leased job, as the generated decoder does', () => {
    const pb = leasedJobToPb(job({ payload: { a: [1, { b: 'c' }] } }));
    // Field 99 (varint 300), field 98 (fixed64), field 97 (bytes) and field 96 (fixed32) appended to the Job.
    const unknown = Buffer.from([0x98, 0x06, 0xac, 0x02, 0x91, 0x06, 1, 2, 3, 4, 5, 6, 7, 8, 0x8a, 0x06, 0x02, 0x41, 0x42, 0x85, 0x06, 9, 9, 9, 9]);
    // Rebuild: LeasedJob { job = <Job bytes + unknown>, lease_token }, inside a jobs batch.
    const jobOnly = Buffer.concat([Buffer.from(jobEncode(pb.job!)), unknown]);
    const leased = Buffer.concat([fieldBytes(1, jobOnly), fieldBytes(2, Buffer.from(pb.leaseToken)), Buffer.from([0xf8, 0x07, 0x01])]);
    const bytes = fieldBytes(8, fieldBytes(1, leased));
    const decoded = workMessageDecode(bytes);
    expect(decoded.kind).toBe('jobs');
    expect(decoded.kind === 'jobs' && decoded.jobs).toStrictEqual(generatedJobs(bytes));
  });

  it('other messages, and a batch with a second field, go through the generated decoder', () => {
    const ack: WorkResponse = { msg: { $case: 'ack', value: { jobId: 'j', accepted: true, reason: '' } } };
    expect(workMessageDecode(encode(ack))).toStrictEqual({ kind: 'response', response: WorkResponse.decode(encode(ack)) });
    const batch = encode({ msg: { $case: 'jobs', value: { jobs: [leasedJobToPb(job())] } } });
    const twoFields = Buffer.concat([batch, encode(ack)]);
    const decoded = workMessageDecode(twoFields);
    expect(decoded).toStrictEqual({ kind: 'response', response: WorkResponse.decode(twoFields) });
  });

  it('truncated bytes and payloads nested past the limit fail as with the generated decoder', () => {
    const batch = encode({ msg: { $case: 'jobs', value: { jobs: [leasedJobToPb(job())] } } });
    const truncated = batch.subarray(0, batch.length - 5);
    expect(() => WorkResponse.decode(truncated)).toThrow();
    expect(() => workMessageDecode(truncated)).toThrow();

    let deep: unknown = 1;
    for (let i = 0; i < 120; i++) deep = { d: deep };
    const tooDeep = encode({ msg: { $case: 'jobs', value: { jobs: [leasedJobToPb(job({ payload: deep as never }))] } } });
    expect(() => WorkResponse.decode(tooDeep)).toThrow(/recursion/);
    expect(() => workMessageDecode(tooDeep)).toThrow(/recursion/);
  });

  it('a "__proto__" key in a payload becomes neither a key nor a prototype', () => {
    const pb = leasedJobToPb(job({ payload: { ok: 1 } }));
    // A Struct entry with key "__proto__" and a struct value, written by hand.
    const inner = fieldBytes(1, Buffer.concat([fieldBytes(1, Buffer.from('polluted')), fieldBytes(2, Buffer.from([0x20, 0x01]))]));
    const entry = Buffer.concat([fieldBytes(1, Buffer.from('__proto__')), fieldBytes(2, fieldBytes(5, inner))]);
    const job4 = Buffer.concat([Buffer.from(jobEncode(pb.job!)), fieldBytes(4, Buffer.concat([fieldBytes(1, entry)]))]);
    const bytes = fieldBytes(8, fieldBytes(1, Buffer.concat([fieldBytes(1, job4), fieldBytes(2, Buffer.from('tok'))])));
    const decoded = workMessageDecode(bytes);
    const got = decoded.kind === 'jobs' ? decoded.jobs[0]!.job!.payload : null;
    expect(got).toStrictEqual(generatedJobs(bytes)[0]!.job!.payload);
    expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
    expect((got as Record<string, unknown>).polluted).toBeUndefined();
  });
});

/** A length-delimited field. */
function fieldBytes(field: number, body: Buffer): Buffer {
  return Buffer.concat([varint((field << 3) | 2), varint(body.length), body]);
}

function varint(n: number): Buffer {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}

/** The Job message's own bytes (its LeasedJob wrapper's field 1). */
function jobEncode(pbJob: NonNullable<ReturnType<typeof leasedJobToPb>['job']>): Uint8Array {
  const leased = WorkResponse.encode({ msg: { $case: 'job', value: { job: pbJob, leaseToken: '', leaseExpiresAt: undefined } } }).finish();
  // WorkResponse { job (2) { job (1) { ... } } }: strip the two wrappers.
  let pos = 0;
  for (let wrapper = 0; wrapper < 2; wrapper++) {
    pos++; // tag
    while (leased[pos]! & 0x80) pos++;
    pos++; // length varint
  }
  return leased.subarray(pos);
}

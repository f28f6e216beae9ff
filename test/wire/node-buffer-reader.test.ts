import { describe, expect, it } from 'vitest';
import { WorkRequest, WorkResponse } from '../../src/gen/evora/v1/worker.js';
import { SubmitJobsRequest } from '../../src/gen/evora/v1/job.js';
import { NodeBufferReader } from '../../src/wire/node-buffer-reader.js';

/** Timestamps whose seconds take 1 to 10 varint bytes: 0, small, now, far future, and before 1970 (negative). */
const TIMES = [new Date(0), new Date(1000), new Date('2026-11-28T01:02:03.456Z'), new Date('9999-12-31T23:59:59.999Z'), new Date('1901-01-01T00:00:00Z')];

/** Strings on each of the base reader's paths: empty, short ASCII, 36-char ids, multibyte, and long. */
const TEXTS = ['', 'noop', '018f0000-0000-7000-8000-000000000001', 'zürich-€-日本-🙂', 'x'.repeat(40) + 'é', 'y'.repeat(5000)];

function job(i: number) {
  return {
    id: TEXTS[i % TEXTS.length]!,
    queue: TEXTS[(i + 1) % TEXTS.length]!,
    type: TEXTS[(i + 2) % TEXTS.length]!,
    payload: { s: TEXTS[(i + 3) % TEXTS.length], n: i * 1.5, nested: { list: [1, 'two', null, true] } },
    state: 1,
    priority: -i,
    attempt: i,
    maxAttempts: 25,
    runAt: TIMES[i % TIMES.length],
    createdAt: TIMES[(i + 1) % TIMES.length],
    startedAt: TIMES[(i + 2) % TIMES.length],
    finishedAt: undefined,
    idempotencyKey: TEXTS[(i + 4) % TEXTS.length]!,
    workerId: 'w',
    result: undefined,
    lastError: TEXTS[(i + 5) % TEXTS.length]!,
    cancelRequested: i % 2 === 0,
    leaseExpiresAt: TIMES[(i + 3) % TIMES.length],
    concurrencyKey: undefined,
    dependsOn: [TEXTS[2]!, TEXTS[3]!],
    // int64 done and total: small, at and past the 7-byte fast path, negative.
    progress: { percent: 12.5, done: [0, 2 ** 49 - 1, 2 ** 49, Number.MAX_SAFE_INTEGER, -7][i % 5], total: 2 ** 50, message: TEXTS[3]!, attempt: 1, reportedAt: TIMES[i % TIMES.length] },
  };
}

describe('NodeBufferReader', () => {
  it('decodes the hot messages exactly as the generated decoder does on its own reader', () => {
    const jobs = WorkResponse.encode({
      msg: { $case: 'jobs', value: { jobs: Array.from({ length: 30 }, (_, i) => ({ job: job(i), leaseToken: TEXTS[2]!, leaseExpiresAt: TIMES[i % 5], parentResults: { [TEXTS[2]!]: { ok: true } }, checkpoint: { at: i } })) } },
    }).finish();
    const acks = WorkResponse.encode({
      msg: { $case: 'acks', value: { acks: TEXTS.map((t, i) => ({ jobId: t, leaseToken: TEXTS[2]!, accepted: i % 2 === 0, reason: t, result: i % 4, databaseUnavailable: i % 3 === 0 })) } },
    }).finish();
    const completes = WorkRequest.encode({
      msg: { $case: 'completes', value: { completes: TEXTS.map((t) => ({ jobId: t, leaseToken: t, result: { t } })) } },
    }).finish();
    const submits = SubmitJobsRequest.encode({
      jobs: TEXTS.map((t, i) => ({ queue: t, type: t, payload: { t }, priority: i, idempotencyKey: t, maxAttempts: 3, dependsOn: [t], ref: t, dependsOnRefs: [t], payloadJson: Buffer.from(`{"t":${JSON.stringify(t)}}`), runAt: TIMES[i % 5] })),
      idsOnly: true,
    }).finish();
    for (const [decode, bytes] of [
      [WorkResponse.decode, jobs],
      [WorkResponse.decode, acks],
      [WorkRequest.decode, completes],
      [SubmitJobsRequest.decode, submits],
    ] as const) {
      const buffer = Buffer.from(bytes);
      const expected = (decode as (b: Uint8Array) => unknown)(buffer);
      expect((decode as (r: NodeBufferReader) => unknown)(new NodeBufferReader(buffer))).toEqual(expected);
    }
  });

  it('reads a message inside a larger buffer (a slice of a pooled one) by its own offsets', () => {
    const bytes = WorkRequest.encode({ msg: { $case: 'complete', value: { jobId: TEXTS[2]!, leaseToken: TEXTS[3]!, result: undefined } } }).finish();
    const pool = Buffer.alloc(bytes.length + 100, 0xff);
    Buffer.from(bytes).copy(pool, 50);
    const slice = pool.subarray(50, 50 + bytes.length);
    expect(WorkRequest.decode(new NodeBufferReader(slice))).toEqual(WorkRequest.decode(Buffer.from(bytes)));
  });

  it('turns invalid UTF-8 into U+FFFD as the base reader does, and refuses a string past the end', () => {
    // WorkerComplete.job_id (field 1, length-delimited) holding invalid UTF-8.
    const invalid = Buffer.from([0x1a, 0x08, 0x0a, 0x06, 0x61, 0xc3, 0x28, 0xff, 0xe2, 0x82]);
    expect(WorkRequest.decode(new NodeBufferReader(invalid))).toEqual(WorkRequest.decode(Buffer.from(invalid)));
    const truncated = invalid.subarray(0, 7);
    expect(() => WorkRequest.decode(Buffer.from(truncated))).toThrow(RangeError);
    expect(() => WorkRequest.decode(new NodeBufferReader(truncated))).toThrow(RangeError);
  });
});

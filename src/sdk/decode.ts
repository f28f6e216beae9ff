import { WorkResponse } from '../gen/evora/v1/worker.js';
import { jobStateFromPb, type Job, type JsonObject } from './types.js';

/**
 * The Work stream's response decoder. A batch of leased jobs (WorkResponse.jobs), the one
 * message a busy worker receives per claim, is decoded straight into the SDK's Job objects:
 * the generated decoder first builds protobuf objects (Struct values, Timestamps, the
 * protobuf Job) that jobFromPb then copies, and that was the largest item of a no-op
 * worker's CPU profile. Every other message, and anything this decoder does not expect,
 * goes through the generated decoder.
 *
 * What must stay true: for any bytes, the jobs decoded here equal what the generated
 * decoder followed by jobFromPb gives (test/unit/sdk-decode.test.ts compares them).
 */

/** A leased job as the worker needs it; `job` is null when the message carried none. */
export interface LeasedJobDecoded {
  job: Job | null;
  leaseToken: string;
  leaseExpiresAt: Date | null;
}

/** What the Work stream delivers: a batch of leased jobs, or any other response. */
export type WorkMessage = { kind: 'jobs'; jobs: LeasedJobDecoded[] } | { kind: 'response'; response: WorkResponse };

/** WorkResponse field 8 (jobs), length-delimited. */
const TAG_JOBS = (8 << 3) | 2;
/** Struct nesting the generated decoder accepts. */
const MAX_DEPTH = 100;

/** Decodes one Work stream response (the gRPC deserializer of the Work call). */
export function workMessageDecode(bytes: Buffer): WorkMessage {
  if (bytes.length > 0 && bytes[0] === TAG_JOBS) {
    try {
      const r = new Reader(bytes);
      r.uint32();
      const end = r.lengthEnd();
      // Only a message that is exactly one jobs field (what the server sends) takes the
      // fast path; a repeated or second oneof field has merge rules left to the generated code.
      if (end === bytes.length) return { kind: 'jobs', jobs: leasedJobBatchRead(r, end) };
    } catch {
      // Malformed or unexpected: the generated decoder decides (and reports) below.
    }
  }
  return { kind: 'response', response: WorkResponse.decode(bytes) };
}

/** A cursor over protobuf wire bytes. */
class Reader {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  /** A varint's low 32 bits, unsigned (tags, lengths). */
  uint32(): number {
    let result = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      const b = this.byte();
      result |= (b & 0x7f) << shift;
      if (b < 0x80) return result >>> 0;
    }
    // Varints longer than 5 bytes: the high bits are dropped, as for any 32-bit field.
    for (let i = 0; i < 5; i++) if (this.byte() < 0x80) return result >>> 0;
    throw new Error('malformed varint');
  }

  /** A varint as a signed 32-bit value (int32 and enum fields). */
  int32(): number {
    return this.uint32() | 0;
  }

  /** A varint as a signed 64-bit value, as a double (Timestamp.seconds). */
  int64(): number {
    let lo = 0;
    let hi = 0;
    let b = 0;
    for (let shift = 0; shift < 28; shift += 7) {
      b = this.byte();
      lo |= (b & 0x7f) << shift;
      if (b < 0x80) return lo >>> 0;
    }
    b = this.byte();
    lo |= (b & 0x0f) << 28;
    hi = (b & 0x7f) >> 4;
    if (b >= 0x80) {
      for (let shift = 3; shift < 32; shift += 7) {
        b = this.byte();
        hi |= (b & 0x7f) << shift;
        if (b < 0x80) break;
      }
      if (b >= 0x80) throw new Error('malformed varint');
    }
    return hi >= 0x80000000 || hi < 0 ? -((~hi >>> 0) * 0x100000000 + ((~lo >>> 0) + 1)) : hi * 0x100000000 + (lo >>> 0);
  }

  /** The end offset of the length-delimited field whose length comes next. */
  lengthEnd(): number {
    const len = this.uint32();
    const end = this.pos + len;
    if (end > this.buf.length) throw new Error('field runs past the end');
    return end;
  }

  string(): string {
    const end = this.lengthEnd();
    const { buf } = this;
    // Short ASCII strings (ids, names, keys) are built here: a call into Buffer's native
    // decoder costs more than the string. Anything else goes to the decoder.
    if (end - this.pos <= 64) {
      let s = '';
      let i = this.pos;
      for (; i < end; i++) {
        const c = buf[i] as number;
        if (c >= 0x80) break;
        s += String.fromCharCode(c);
      }
      if (i === end) {
        this.pos = end;
        return s;
      }
    }
    const s = buf.toString('utf8', this.pos, end);
    this.pos = end;
    return s;
  }

  double(): number {
    if (this.pos + 8 > this.buf.length) throw new Error('double runs past the end');
    const v = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return v;
  }

  /** Skips a field of the given wire type. */
  skip(wireType: number): void {
    if (wireType === 0) this.int64();
    else if (wireType === 1) this.pos += 8;
    else if (wireType === 2) this.pos = this.lengthEnd();
    else if (wireType === 5) this.pos += 4;
    else throw new Error(`unexpected wire type ${wireType}`);
    if (this.pos > this.buf.length) throw new Error('field runs past the end');
  }

  private byte(): number {
    if (this.pos >= this.buf.length) throw new Error('varint runs past the end');
    return this.buf[this.pos++] as number;
  }
}

function leasedJobBatchRead(r: Reader, end: number): LeasedJobDecoded[] {
  const jobs: LeasedJobDecoded[] = [];
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag === ((1 << 3) | 2)) jobs.push(leasedJobRead(r, r.lengthEnd()));
    else r.skip(tag & 7);
  }
  return jobs;
}

function leasedJobRead(r: Reader, end: number): LeasedJobDecoded {
  const leased: LeasedJobDecoded = { job: null, leaseToken: '', leaseExpiresAt: null };
  while (r.pos < end) {
    const tag = r.uint32();
    switch (tag) {
      case (1 << 3) | 2:
        leased.job = jobRead(r, r.lengthEnd());
        break;
      case (2 << 3) | 2:
        leased.leaseToken = r.string();
        break;
      case (3 << 3) | 2:
        leased.leaseExpiresAt = timestampRead(r, r.lengthEnd());
        break;
      default:
        r.skip(tag & 7);
    }
  }
  return leased;
}

/** A Job message, as jobFromPb would return it. */
function jobRead(r: Reader, end: number): Job {
  let id = '';
  let queue = '';
  let type = '';
  let payload: JsonObject | undefined;
  let state = 0;
  let priority = 0;
  let attempt = 0;
  let maxAttempts = 0;
  let runAt: Date | null = null;
  let createdAt: Date | null = null;
  let startedAt: Date | null = null;
  let finishedAt: Date | null = null;
  let idempotencyKey = '';
  let workerId = '';
  let result: JsonObject | undefined;
  let lastError = '';
  let cancelRequested = false;
  let leaseExpiresAt: Date | null = null;
  while (r.pos < end) {
    const tag = r.uint32();
    switch (tag) {
      case (1 << 3) | 2: id = r.string(); break;
      case (2 << 3) | 2: queue = r.string(); break;
      case (3 << 3) | 2: type = r.string(); break;
      case (4 << 3) | 2: payload = structRead(r, r.lengthEnd(), 1); break;
      case 5 << 3: state = r.int32(); break;
      case 6 << 3: priority = r.int32(); break;
      case 7 << 3: attempt = r.int32(); break;
      case 8 << 3: maxAttempts = r.int32(); break;
      case (9 << 3) | 2: runAt = timestampRead(r, r.lengthEnd()); break;
      case (10 << 3) | 2: createdAt = timestampRead(r, r.lengthEnd()); break;
      case (11 << 3) | 2: startedAt = timestampRead(r, r.lengthEnd()); break;
      case (12 << 3) | 2: finishedAt = timestampRead(r, r.lengthEnd()); break;
      case (13 << 3) | 2: idempotencyKey = r.string(); break;
      case (14 << 3) | 2: workerId = r.string(); break;
      case (15 << 3) | 2: result = structRead(r, r.lengthEnd(), 1); break;
      case (16 << 3) | 2: lastError = r.string(); break;
      case 17 << 3: cancelRequested = r.int64() !== 0; break;
      case (18 << 3) | 2: leaseExpiresAt = timestampRead(r, r.lengthEnd()); break;
      default: r.skip(tag & 7);
    }
  }
  return {
    id,
    queue,
    type,
    payload: payload ?? {},
    state: jobStateFromPb(state),
    priority,
    attempt,
    maxAttempts,
    runAt,
    createdAt,
    startedAt,
    finishedAt,
    idempotencyKey: idempotencyKey || null,
    workerId: workerId || null,
    result: result ?? null,
    lastError: lastError || null,
    cancelRequested,
    leaseExpiresAt,
  };
}

/** google.protobuf.Timestamp as the generated code converts it (seconds · 1000 + nanos / 10⁶). */
function timestampRead(r: Reader, end: number): Date {
  let seconds = 0;
  let nanos = 0;
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag === 1 << 3) seconds = r.int64();
    else if (tag === 2 << 3) nanos = r.int32();
    else r.skip(tag & 7);
  }
  return new Date(seconds * 1_000 + nanos / 1_000_000);
}

/** google.protobuf.Struct as a plain object (entries without a value are left out, as by the generated code). */
function structRead(r: Reader, end: number, depth: number): JsonObject {
  if (depth > MAX_DEPTH) throw new Error('Struct nested too deep');
  const object: JsonObject = {};
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag !== ((1 << 3) | 2)) {
      r.skip(tag & 7);
      continue;
    }
    const entryEnd = r.lengthEnd();
    let key = '';
    let value: unknown;
    while (r.pos < entryEnd) {
      const t = r.uint32();
      if (t === ((1 << 3) | 2)) key = r.string();
      else if (t === ((2 << 3) | 2)) value = valueRead(r, r.lengthEnd(), depth + 1);
      else r.skip(t & 7);
    }
    // The generated code assigns into a fresh object and copies its own keys: "__proto__"
    // never becomes a key (nor a prototype) there, so not here either.
    if (value !== undefined && key !== '__proto__') object[key] = value as JsonObject[string];
  }
  return object;
}

/** google.protobuf.Value as a JSON value; undefined when no kind is set. */
function valueRead(r: Reader, end: number, depth: number): unknown {
  if (depth > MAX_DEPTH) throw new Error('Struct nested too deep');
  let value: unknown;
  while (r.pos < end) {
    const tag = r.uint32();
    switch (tag) {
      case 1 << 3: r.int32(); value = null; break;
      case (2 << 3) | 1: value = r.double(); break;
      case (3 << 3) | 2: value = r.string(); break;
      case 4 << 3: value = r.int64() !== 0; break;
      case (5 << 3) | 2: value = structRead(r, r.lengthEnd(), depth + 1); break;
      case (6 << 3) | 2: value = listRead(r, r.lengthEnd(), depth + 1); break;
      default: r.skip(tag & 7);
    }
  }
  return value;
}

/** google.protobuf.ListValue as an array (a Value without a kind becomes undefined, as by the generated code). */
function listRead(r: Reader, end: number, depth: number): unknown[] {
  if (depth > MAX_DEPTH) throw new Error('Struct nested too deep');
  const values: unknown[] = [];
  while (r.pos < end) {
    const tag = r.uint32();
    if (tag === ((1 << 3) | 2)) values.push(valueRead(r, r.lengthEnd(), depth + 1));
    else r.skip(tag & 7);
  }
  return values;
}

import { WorkerServiceService, WorkResponse } from '../gen/evora/v1/worker.js';
import type { Job } from '../domain/job.js';
import { STATE_TO_PB } from './convert.js';

/**
 * The hot path of the Work stream: leased jobs encoded straight from the store's Job into
 * protobuf bytes, without building the generated message objects first (jobToPb, then
 * Struct.wrap / Value.wrap / toTimestamp inside the generated encoders, and an int64
 * through BigInt for every Timestamp), into one scratch buffer that is reused, so a job
 * costs no allocation but its final message. The bytes are exactly what
 * `WorkResponse.encode({ msg: { $case: 'job', value: leasedJobToPb(job) } })` writes
 * (test/unit/wire.test.ts checks it), so the wire format does not change. One
 * difference: a payload key named `__proto__` (possible in jsonb) is kept here, where the
 * generated Struct.wrap loses it by assigning it onto a plain object.
 */

/** A WorkResponse that is already encoded; the Work stream's serializer passes it through. */
export class EncodedWorkResponse {
  constructor(readonly bytes: Uint8Array) {}
}

/** The Work stream's response serializer: generated encoding, or bytes encoded here. */
export function workResponseSerialize(value: WorkResponse | EncodedWorkResponse): Buffer {
  const bytes = value instanceof EncodedWorkResponse ? value.bytes : WorkResponse.encode(value).finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** WorkerService with the Work stream's responses serialized by workResponseSerialize. */
export const workerServiceDefinition: typeof WorkerServiceService = {
  ...WorkerServiceService,
  work: { ...WorkerServiceService.work, responseSerialize: workResponseSerialize },
};

/** Largest `jobs` batch message, in bytes; a bigger set of jobs goes in several. */
export const JOBS_BATCH_MAX_BYTES = 1024 * 1024;

/**
 * WorkResponse messages carrying leased jobs, in order: one `job` message per job, or
 * (batches) `jobs` messages of up to maxBatchBytes each (a job that alone is bigger goes
 * alone). A lone job is always sent as `job`.
 */
export function leasedJobsEncode(jobs: readonly Job[], opts: { batches: boolean; maxBatchBytes?: number }): EncodedWorkResponse[] {
  const max = opts.maxBatchBytes ?? JOBS_BATCH_MAX_BYTES;
  const out: EncodedWorkResponse[] = [];
  let w = new Writer();
  // Every job as a LeasedJobBatch item (tag 1, length, LeasedJob), back to back; the
  // messages are cut whenever about max bytes are encoded, so the scratch buffer holds
  // about one batch, not the whole deal (1,000 jobs of 1 MiB would be 1 GiB).
  let starts: number[] = [];
  let bodies: number[] = [];
  const emit = () => {
    starts.push(w.pos);
    const all = w.buf;
    for (let i = 0; i < bodies.length; ) {
      let j = i + 1;
      if (opts.batches) while (j < bodies.length && (starts[j + 1] as number) - (starts[i] as number) <= max) j++;
      if (j === i + 1) {
        // WorkResponse.job (field 2): the LeasedJob without the batch item's own prefix.
        out.push(new EncodedWorkResponse(framed(0x12, all, bodies[i] as number, starts[i + 1] as number)));
      } else {
        // WorkResponse.jobs (field 8): a LeasedJobBatch, which is the items as they are.
        out.push(new EncodedWorkResponse(framed(0x42, all, starts[i] as number, starts[j] as number)));
      }
      i = j;
    }
    w = new Writer();
    starts = [];
    bodies = [];
  };
  for (const job of jobs) {
    starts.push(w.pos);
    w.byte(10);
    w.fork();
    leasedJobWrite(w, job);
    bodies.push(w.join());
    if (w.pos >= max) emit();
  }
  if (bodies.length > 0) emit();
  // A job far bigger than usual grew the scratch buffer: give the memory back.
  if (scratch.length > 4 * SCRATCH_BYTES && scratch.length > 2 * max) scratch = Buffer.allocUnsafe(SCRATCH_BYTES);
  return out;
}

/** A new buffer: tag, varint length, buf[from, to). */
function framed(tag: number, buf: Buffer, from: number, to: number): Buffer {
  const length = to - from;
  const out = Buffer.allocUnsafe(1 + varintSize(length) + length);
  out[0] = tag;
  const pos = varintPut(out, 1, length);
  buf.copy(out, pos, from, to);
  return out;
}

function varintSize(n: number): number {
  let size = 1;
  while (n > 0x7f) {
    n >>>= 7;
    size++;
  }
  return size;
}

/** Writes a uint32 varint at pos; returns the position after it. */
function varintPut(buf: Buffer, pos: number, n: number): number {
  while (n > 0x7f) {
    buf[pos++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  buf[pos++] = n;
  return pos;
}

/** Room for a length prefix left by fork(); bodies under 128 bytes need no move. */
const FORK_PREFIX = 1;
const SCRATCH_BYTES = 64 * 1024;
let scratch = Buffer.allocUnsafe(SCRATCH_BYTES);

/**
 * A protobuf writer over the module's scratch buffer (valid until the next Writer): the
 * few operations the encoders below need, with the capacity checked per field.
 */
class Writer {
  buf = scratch;
  pos = 0;
  private readonly forks: number[] = [];

  /** Makes room for n more bytes. */
  room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const bigger = Buffer.allocUnsafe(size);
    this.buf.copy(bigger, 0, 0, this.pos);
    this.buf = bigger;
    scratch = bigger;
  }

  byte(b: number): void {
    this.room(1);
    this.buf[this.pos++] = b;
  }

  /** A tag (< 2^14) or another uint32 varint. */
  varint(n: number): void {
    this.room(5);
    this.pos = varintPut(this.buf, this.pos, n);
  }

  /** An int32 varint (a negative one takes 10 bytes, sign-extended). */
  int32(n: number): void {
    if (n >= 0) return this.varint(n);
    this.room(10);
    for (let i = 0; i < 9; i++) {
      this.buf[this.pos++] = (n & 0x7f) | 0x80;
      n >>= 7;
    }
    this.buf[this.pos++] = 1;
  }

  /** An int64 varint of a safe integer. */
  int64(n: number): void {
    if (n >= 0 && n <= 0xffffffff) return this.varint(n);
    this.room(10);
    // Two's complement over 64 bits, 7 bits at a time, for |n| up to 2^53.
    let lo = n >>> 0;
    let hi = Math.floor(n / 4294967296) >>> 0;
    for (let i = 0; i < 9 && (hi !== 0 || lo > 0x7f); i++) {
      this.buf[this.pos++] = (lo & 0x7f) | 0x80;
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    this.buf[this.pos++] = lo;
  }

  double(v: number): void {
    this.room(8);
    this.pos = this.buf.writeDoubleLE(v, this.pos);
  }

  string(s: string): void {
    const n = s.length;
    if (n < 0x80) {
      // Short ASCII, the common case: one byte of length, one byte per character.
      this.room(n + 1);
      const buf = this.buf;
      let pos = this.pos + 1;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c > 0x7f) break;
        buf[pos++] = c;
      }
      if (i === n) {
        buf[this.pos] = n;
        this.pos = pos;
        return;
      }
    }
    const bytes = Buffer.byteLength(s, 'utf8');
    this.varint(bytes);
    this.room(bytes);
    this.pos += this.buf.write(s, this.pos, bytes, 'utf8');
  }

  /** Starts a length-delimited field (its tag already written). */
  fork(): void {
    this.room(FORK_PREFIX);
    this.forks.push(this.pos);
    this.pos += FORK_PREFIX;
  }

  /** Ends the last fork: writes its length; returns where its body starts. */
  join(): number {
    const at = this.forks.pop() as number;
    const length = this.pos - at - FORK_PREFIX;
    const prefix = varintSize(length);
    if (prefix > FORK_PREFIX) {
      this.room(prefix - FORK_PREFIX);
      this.buf.copy(this.buf, at + prefix, at + FORK_PREFIX, this.pos);
      this.pos += prefix - FORK_PREFIX;
    }
    varintPut(this.buf, at, length);
    return at + prefix;
  }
}

/** The fields of a LeasedJob (as leasedJobToPb makes it), in the generated encoder's order. */
function leasedJobWrite(w: Writer, job: Job): void {
  w.byte(10);
  w.fork();
  jobWrite(w, job);
  w.join();
  if (job.leaseToken) {
    w.byte(18);
    w.string(job.leaseToken);
  }
  if (job.lockedUntil) timestampWrite(w, 26, job.lockedUntil);
}

function stringField(w: Writer, tag: number, s: string): void {
  w.varint(tag);
  w.string(s);
}

function int32Field(w: Writer, tag: number, n: number): void {
  w.varint(tag);
  w.int32(n);
}

/** The fields of a Job (as jobToPb makes it), in the generated encoder's order. */
function jobWrite(w: Writer, job: Job): void {
  if (job.id !== '') stringField(w, 10, job.id);
  if (job.queue !== '') stringField(w, 18, job.queue);
  if (job.type !== '') stringField(w, 26, job.type);
  structWrite(w, 34, job.payload);
  const state = STATE_TO_PB[job.state];
  if (state !== 0) int32Field(w, 40, state);
  if (job.priority !== 0) int32Field(w, 48, job.priority);
  if (job.attempt !== 0) int32Field(w, 56, job.attempt);
  if (job.maxAttempts !== 0) int32Field(w, 64, job.maxAttempts);
  timestampWrite(w, 74, job.runAt);
  timestampWrite(w, 82, job.createdAt);
  if (job.startedAt) timestampWrite(w, 90, job.startedAt);
  if (job.finishedAt) timestampWrite(w, 98, job.finishedAt);
  if (job.idempotencyKey) stringField(w, 106, job.idempotencyKey);
  if (job.workerId) stringField(w, 114, job.workerId);
  if (job.result) structWrite(w, 122, job.result);
  if (job.lastError) stringField(w, 130, job.lastError);
  if (job.cancelRequestedAt !== null) int32Field(w, 136, 1);
  if (job.state === 'RUNNING' && job.lockedUntil) timestampWrite(w, 146, job.lockedUntil);
}

function timestampWrite(w: Writer, tag: number, date: Date): void {
  const ms = date.getTime();
  const seconds = Math.trunc(ms / 1_000);
  const nanos = (ms % 1_000) * 1_000_000;
  w.varint(tag);
  w.fork();
  if (seconds !== 0) {
    w.byte(8);
    w.int64(seconds);
  }
  if (nanos !== 0) {
    w.byte(16);
    w.int32(nanos);
  }
  w.join();
}

/** A JSON object as a google.protobuf.Struct field. */
function structWrite(w: Writer, tag: number, obj: object): void {
  w.varint(tag);
  w.fork();
  structFieldsWrite(w, obj);
  w.join();
}

function structFieldsWrite(w: Writer, obj: object): void {
  for (const key of Object.keys(obj)) {
    const value = (obj as Record<string, unknown>)[key];
    if (value === undefined) continue;
    // Struct.fields entry: key (1), value (2).
    w.byte(10);
    w.fork();
    if (key !== '') stringField(w, 10, key);
    w.byte(18);
    w.fork();
    valueWrite(w, value);
    w.join();
    w.join();
  }
}

/** The fields of a google.protobuf.Value for a JSON value (as Value.wrap then Value.encode). */
function valueWrite(w: Writer, value: unknown): void {
  switch (typeof value) {
    case 'string':
      stringField(w, 26, value);
      return;
    case 'number':
      w.byte(17);
      w.double(value);
      return;
    case 'boolean':
      w.byte(32);
      w.byte(value ? 1 : 0);
      return;
    case 'undefined':
      return;
    case 'object':
      if (value === null) {
        w.byte(8);
        w.byte(0);
      } else if (Array.isArray(value)) {
        w.byte(50);
        w.fork();
        for (const v of value) {
          w.byte(10);
          w.fork();
          valueWrite(w, v);
          w.join();
        }
        w.join();
      } else {
        w.byte(42);
        w.fork();
        structFieldsWrite(w, value);
        w.join();
      }
      return;
    default:
      throw new Error(`Unsupported any value type: ${typeof value}`);
  }
}

import type { SessionMessage } from '../dispatcher/dispatcher.js';
import { DRAIN_TEXT, LEASE_LOST_TEXT } from '../domain/codes.js';
import type { Job } from '../domain/job.js';
import { WorkerServiceService, WorkRequest, WorkResponse, type LeasedJob } from '../gen/evora/v1/worker.js';
import { bufferDecoder } from '../wire/node-buffer-reader.js';
import { CANCEL_REASON_TO_PB, DRAIN_REASON_TO_PB, LEASE_LOST_REASON_TO_PB, leasedJobToPb, leasedJobToPbJson } from './convert.js';

/**
 * The server's messages on the Work stream, as the generated code encodes them.
 *
 * Leased jobs are encoded when they are dealt (so an encoding failure surfaces in the
 * dispatcher, which releases the jobs) and, because a `jobs` batch must be measured to be
 * kept under JOBS_BATCH_MAX_BYTES, the bytes are kept: the Work method's response
 * serializer (workerServiceDefinition) passes an EncodedWorkResponse through as it is,
 * so nothing is encoded twice. The Work stream encodes every other message when it writes
 * it (encodedWorkResponse), so its writer can weigh what waits in bytes; the serializer
 * still encodes anything else it is given.
 */

/** A WorkResponse that is already encoded; the Work stream's serializer passes it through. */
export class EncodedWorkResponse {
  constructor(readonly bytes: Uint8Array) {}
}

/** What the Work stream writes: a message to encode, or one encoded already. */
export type WorkOut = WorkResponse | EncodedWorkResponse;

/** A message encoded now (as it is, if it is encoded already). */
export function encodedWorkResponse(value: WorkOut): EncodedWorkResponse {
  return value instanceof EncodedWorkResponse ? value : new EncodedWorkResponse(WorkResponse.encode(value).finish());
}

/** The Work stream's response serializer: encoded bytes as they are, anything else by the generated encoder. */
export function workResponseSerialize(value: WorkOut): Buffer {
  const bytes = value instanceof EncodedWorkResponse ? value.bytes : WorkResponse.encode(value).finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * WorkerService with the Work stream's responses serialized by workResponseSerialize, and its
 * requests (every report of every worker) decoded with NodeBufferReader (src/wire).
 */
export const workerServiceDefinition: typeof WorkerServiceService = {
  ...WorkerServiceService,
  work: {
    ...WorkerServiceService.work,
    requestDeserialize: bufferDecoder(WorkRequest.decode),
    responseSerialize: workResponseSerialize,
  },
};

/**
 * Largest `jobs` batch message, in bytes; a bigger set of jobs goes in several. Well under
 * the 4 MiB message limit, so a batch never trips it, and small enough that one message
 * does not hold up the acks and lease messages queued behind it for long.
 */
export const JOBS_BATCH_MAX_BYTES = 1024 * 1024;

/**
 * The messages that carry jobs one claim dealt to a worker, in order. Without batches (or
 * for a lone job): one `job` message per job. With batches: `jobs` messages of at most
 * maxBatchBytes each; a set of jobs that encodes bigger is split and each part encoded
 * again (rare: it takes about a thousand jobs of a kilobyte), and a part of one job goes
 * as `job`, whatever its size.
 */
export function leasedJobsMessages(
  jobs: readonly Job[],
  opts: { batches: boolean; payloadsAsJson?: boolean; maxBatchBytes?: number },
): EncodedWorkResponse[] {
  const leased = jobs.map(opts.payloadsAsJson === true ? leasedJobToPbJson : leasedJobToPb);
  if (!opts.batches) return leased.map(oneJob);
  const out: EncodedWorkResponse[] = [];
  batchesOf(leased, opts.maxBatchBytes ?? JOBS_BATCH_MAX_BYTES, out);
  return out;
}

function oneJob(job: LeasedJob): EncodedWorkResponse {
  return new EncodedWorkResponse(WorkResponse.encode({ msg: { $case: 'job', value: job } }).finish());
}

/** Appends `jobs` to `out` as messages of at most `max` bytes (a lone job as `job`). */
function batchesOf(jobs: LeasedJob[], max: number, out: EncodedWorkResponse[]): void {
  if (jobs.length === 0) return;
  if (jobs.length === 1) {
    out.push(oneJob(jobs[0] as LeasedJob));
    return;
  }
  const bytes = WorkResponse.encode({ msg: { $case: 'jobs', value: { jobs } } }).finish();
  if (bytes.length <= max) {
    out.push(new EncodedWorkResponse(bytes));
    return;
  }
  // Cut into as many parts as the size asks for (at least two), each encoded again; a
  // part that is still too big (uneven job sizes) is cut again.
  const parts = Math.min(jobs.length, Math.max(2, Math.ceil(bytes.length / max)));
  const size = Math.ceil(jobs.length / parts);
  for (let i = 0; i < jobs.length; i += size) batchesOf(jobs.slice(i, i + size), max, out);
}

/** A dispatcher message other than jobs, as the proto message (codes and their words). */
export function sessionMessageToPb(msg: Exclude<SessionMessage, { kind: 'jobs' }>): WorkResponse {
  switch (msg.kind) {
    case 'cancel':
      return { msg: { $case: 'cancel', value: { jobId: msg.jobId, code: CANCEL_REASON_TO_PB[msg.reason] } } };
    case 'leaseLost':
      return {
        msg: { $case: 'leaseLost', value: { jobId: msg.jobId, leaseToken: msg.token, reason: LEASE_LOST_TEXT[msg.reason], code: LEASE_LOST_REASON_TO_PB[msg.reason] } },
      };
    case 'drain':
      return { msg: { $case: 'drain', value: { reason: DRAIN_TEXT[msg.reason], code: DRAIN_REASON_TO_PB[msg.reason] } } };
  }
}

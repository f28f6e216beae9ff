import * as grpc from '@grpc/grpc-js';
import { JobServiceService, SubmitJobStreamRequest, type SubmitJobStreamResponse } from '../../src/gen/evora/v1/job.js';
import { WorkerHello, WorkerServiceService, type WorkRequest, type WorkResponse } from '../../src/gen/evora/v1/worker.js';

/**
 * Raw SubmitJobStream and Work streams for the auth tests: each is opened with the given
 * metadata, says one thing, and exposes how it began (`first`) and how it ended (`error`).
 */

/**
 * A SubmitJobStream: sends `request` and resolves with its outcome's code (OK, or the code of
 * its error) or, when the stream fails first, the stream's code.
 */
export function submitStreamOpen(client: grpc.Client, md: grpc.Metadata, request: Record<string, unknown>) {
  const def = JobServiceService.submitJobStream;
  const stream = client.makeBidiStreamRequest(def.path, def.requestSerialize, def.responseDeserialize, md) as grpc.ClientDuplexStream<
    SubmitJobStreamRequest,
    SubmitJobStreamResponse
  >;
  let ended: grpc.ServiceError | null = null;
  const endedP = new Promise<grpc.ServiceError>((resolve) => stream.on('error', (e: grpc.ServiceError) => resolve((ended = e))));
  const first = new Promise<grpc.status>((resolve) => {
    stream.on('data', (r: SubmitJobStreamResponse) => resolve(r.outcome?.$case === 'error' ? r.outcome.value.code : grpc.status.OK));
    void endedP.then((e) => resolve(e.code));
  });
  stream.write(SubmitJobStreamRequest.fromPartial(request as Partial<SubmitJobStreamRequest>));
  return { stream, first, ended: endedP, get error() { return ended; }, close: () => stream.cancel() };
}

/** A Work stream: says hello and resolves once the welcome arrives (OK) or the stream fails (its code). */
export function workOpen(client: grpc.Client, md: grpc.Metadata, queues: string[]) {
  const def = WorkerServiceService.work;
  const stream = client.makeBidiStreamRequest(
    def.path,
    def.requestSerialize,
    def.responseDeserialize,
    md,
  ) as grpc.ClientDuplexStream<WorkRequest, WorkResponse>;
  let ended: grpc.ServiceError | null = null;
  const endedP = new Promise<grpc.ServiceError>((resolve) => stream.on('error', (e: grpc.ServiceError) => resolve((ended = e))));
  const first = new Promise<grpc.status>((resolve) => {
    stream.on('data', (r: WorkResponse) => r.msg?.$case === 'welcome' && resolve(grpc.status.OK));
    void endedP.then((e) => resolve(e.code));
  });
  stream.write({ msg: { $case: 'hello', value: WorkerHello.fromPartial({ workerId: 'matrix', queues, slots: 1 }) } });
  return { stream, first, ended: endedP, get error() { return ended; }, close: () => stream.cancel() };
}


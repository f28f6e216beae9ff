import { makeGenericClientConstructor } from '@grpc/grpc-js';
import { WorkerServiceClient, WorkerServiceService, WorkResponse } from '../../gen/evora/v1/worker.js';
import { bufferDecoder } from '../../wire/node-buffer-reader.js';

/**
 * The worker's client of WorkerService: the generated one, but for the Work stream's
 * responses, decoded with NodeBufferReader (src/wire): a worker decodes every job it runs and
 * every ack, and the generated decoder's strings and int64s were a fifth of its garbage.
 */
export const WorkStreamClient = makeGenericClientConstructor(
  {
    ...WorkerServiceService,
    work: { ...WorkerServiceService.work, responseDeserialize: bufferDecoder(WorkResponse.decode) },
  },
  'evora.v1.WorkerService',
) as unknown as typeof WorkerServiceClient;

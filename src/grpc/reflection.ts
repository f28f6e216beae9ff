import { readFileSync } from 'node:fs';
import type { Server } from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';

/**
 * Server reflection, so grpcurl and other tools can list and describe Evora's services
 * with their .proto names (snake_case fields, real file names).
 *
 * proto-loader merges files per package and renames them (evora_v1.proto), which breaks
 * references to well-known types such as google.protobuf.Struct for reflection clients.
 * So the reflection index is fed the exact FileDescriptorProtos that buf compiled
 * (src/gen/evora.binpb, made by `npm run proto:gen` with the generated code), which also
 * holds the standard health service (vendored in proto/grpc/health/v1).
 */
export function reflectionAddToServer(server: Server): void {
  const set = fromBinary(FileDescriptorSetSchema, readFileSync(new URL('../gen/evora.binpb', import.meta.url)));
  const files = set.file.map((f) => Buffer.from(toBinary(FileDescriptorProtoSchema, f)));
  // ReflectionService reads only `fileDescriptorProtos` from each entry.
  const definition = { 'evora.files': { fileDescriptorProtos: files } } as unknown as protoLoader.PackageDefinition;
  new ReflectionService(definition).addToServer(server);
}

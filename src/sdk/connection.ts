import * as grpc from '@grpc/grpc-js';

/** Where the server is when nothing says otherwise. */
export const DEFAULT_ADDRESS = '127.0.0.1:50051';

/** How to reach an Evora server (shared by EvoraClient and EvoraWorker). */
export interface ConnectionOptions {
  /** host:port of the server. Default: $EVORA_ADDRESS, else 127.0.0.1:50051. */
  address?: string;
  /**
   * Channel credentials. Default: insecure (plaintext), which is what the server speaks
   * today; pass `grpc.credentials.createSsl(...)` once it serves TLS.
   */
  credentials?: grpc.ChannelCredentials;
  /** Extra grpc-js channel options (they override the SDK's). */
  channelOptions?: grpc.ChannelOptions;
}

/** The address to dial: the one given, else $EVORA_ADDRESS, else DEFAULT_ADDRESS. */
export function resolveAddress(address: string | undefined): string {
  return address || process.env.EVORA_ADDRESS || DEFAULT_ADDRESS;
}

/** One channel for the given options; every service client of one SDK object shares it. */
export function channelCreate(opts: ConnectionOptions, defaults: grpc.ChannelOptions = {}): grpc.Channel {
  return new grpc.Channel(resolveAddress(opts.address), opts.credentials ?? grpc.credentials.createInsecure(), {
    // Large enough for a batch of jobs with 1 MiB payloads; the server has its own limit.
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
    'grpc.max_send_message_length': 64 * 1024 * 1024,
    ...defaults,
    ...opts.channelOptions,
  });
}

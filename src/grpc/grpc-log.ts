import * as grpc from '@grpc/grpc-js';

/**
 * grpc-js's own log lines without header values. At its default verbosity grpc-js writes a
 * metadata entry it cannot take (a header value that is not printable ASCII, e.g. a token
 * pasted with a non-breaking space) to stderr with the value itself: for `authorization`,
 * the token's secret. With GRPC_TRACE=server_call it also writes every call's metadata.
 * grpcLogRedactInstall sets grpc-js's logger (process-wide, as grpc-js has one) to one that
 * writes what the default logger writes, in its format, with those values withheld.
 *
 * What must stay true (docs/security.md "Errors"): no line grpc-js writes through this
 * logger holds the value of a metadata entry it refused, or an `authorization` value.
 */

/** "Failed to add metadata entry <key>: <value>. <error repeating the value>. For more ...". */
const REFUSED_ENTRY = /^(Failed to add metadata entry [^:\s]*:)[\s\S]*$/;
/** `"authorization":["Bearer …"]` in a trace of a call's metadata (Metadata.toJSON()). */
const AUTHORIZATION_JSON = /("authorization":\[)("(?:[^"\\]|\\.)*",?)+/gi;

/** A grpc-js log message as written: a refused entry's value and authorization values withheld. */
export function grpcLogRedact(message: unknown): unknown {
  if (typeof message !== 'string') return message;
  return message
    .replace(REFUSED_ENTRY, '$1 (value withheld: not a valid header value)')
    .replace(AUTHORIZATION_JSON, '$1"(withheld)"');
}

let installed = false;

/** Installs the redacting logger (once per process; a second call does nothing). */
export function grpcLogRedactInstall(): void {
  if (installed) return;
  installed = true;
  // The default logger's format (grpc-js logging.ts): a severity letter, then the message.
  const line =
    (letter: string) =>
    (message?: unknown, ...rest: unknown[]) =>
      console.error(`${letter} ${String(grpcLogRedact(message))}`, ...rest);
  grpc.setLogger({ error: line('E'), info: line('I'), debug: line('D') });
}

import { WorkRequest, type ServerWelcome } from '../../gen/evora/v1/worker.js';

/** gRPC's default largest received message: what a server that does not say its limit takes. */
export const DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/**
 * The longest error the server stores with a failure, in characters (it cuts a longer one):
 * the worker cuts it too, so that a fail never comes near the message limit.
 */
export const MAX_ERROR_CHARS = 10_000;

/**
 * What the server takes on its Work stream, from its welcome (ServerWelcome.max_result_bytes,
 * max_message_bytes). `resultBytes` 0: not said (an older server; it still refuses a result
 * over its limit, with an INVALID ack).
 */
export interface ServerLimits {
  /** The largest result or checkpoint, in bytes of JSON text; 0 = not said. */
  resultBytes: number;
  /** The largest message the server receives, in bytes of its encoding. */
  messageBytes: number;
}

/** The limits a welcome tells (gRPC's default message size when it tells none). */
export function limitsOf(welcome: ServerWelcome | null): ServerLimits {
  return {
    resultBytes: welcome?.maxResultBytes ?? 0,
    messageBytes: welcome && welcome.maxMessageBytes > 0 ? welcome.maxMessageBytes : DEFAULT_MAX_MESSAGE_BYTES,
  };
}

/**
 * Why a result or checkpoint of this JSON text is more than the server stores, or null when
 * it is not (or the server did not say). The byte count is taken only when the text could
 * be over the limit (a character is at most 3 bytes of UTF-8 in a JavaScript string's unit).
 */
export function jsonTooLarge(what: string, text: string, limits: ServerLimits): string | null {
  if (limits.resultBytes <= 0 || text.length * 3 <= limits.resultBytes) return null;
  const bytes = Buffer.byteLength(text, 'utf8');
  return bytes > limits.resultBytes ? `${what} is ${bytes} bytes of JSON; the server takes at most ${limits.resultBytes}` : null;
}

/** Room left in a message for its envelope (field tags, lengths, the ids and the token). */
const ENVELOPE_BYTES = 1024;

/**
 * Why this message is more than the server receives, or null when it fits. `estimate` is an
 * upper bound of its size: the message is encoded (to count its bytes exactly) only when the
 * estimate comes near the limit, which only results of hundreds of kilobytes do.
 */
export function messageTooLarge(req: WorkRequest, estimate: number, limits: ServerLimits): string | null {
  if (estimate + ENVELOPE_BYTES <= limits.messageBytes) return null;
  const bytes = WorkRequest.encode(req).finish().length;
  return bytes > limits.messageBytes ? `the report is ${bytes} bytes; the server takes messages of at most ${limits.messageBytes}` : null;
}

/**
 * Why this progress report is more than the server takes (its checkpoint over the result
 * limit, or the message over the message limit), or null. Only a report with a checkpoint
 * can be; ctx.progress throws RangeError with the reason rather than end the stream.
 */
export function progressTooLarge(req: WorkRequest, limits: ServerLimits): string | null {
  const checkpoint = req.msg?.$case === 'progress' ? req.msg.value.checkpoint : undefined;
  if (checkpoint === undefined) return null;
  const text = JSON.stringify(checkpoint);
  return jsonTooLarge('checkpoint', text, limits) ?? messageTooLarge(req, 200 + 6 * text.length, limits);
}

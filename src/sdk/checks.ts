/**
 * Checks of the numbers and dates a caller passes, made before anything is sent. A value
 * the wire cannot carry (1.5 in an int32, NaN in a Duration, an invalid Date) would
 * otherwise fail in grpc-js's serializer, on a stream: the whole stream, every submit on it.
 * What must stay true: each check throws a TypeError naming the field, and accepts every
 * value the wire can carry (the server judges the rest, e.g. priority's -1000..1000).
 */

/** The smallest value an int32 field carries (the CLI names its flag for a value past it). */
export const INT32_MIN = -(2 ** 31);
/** The largest value an int32 field carries. */
export const INT32_MAX = 2 ** 31 - 1;
/** The largest seconds a protobuf Duration carries (about 10,000 years). */
export const DURATION_MAX_SECONDS = 315_576_000_000;

/** Returns `value` if it is an integer an int32 field carries; throws TypeError otherwise. */
export function int32Check(value: number, what: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < INT32_MIN || value > INT32_MAX) {
    throw new TypeError(`${what} must be an integer in ${INT32_MIN}..${INT32_MAX}, got ${String(value)}`);
  }
  return value;
}

/** Returns `value` if it is a finite number; throws TypeError otherwise. */
export function finiteCheck(value: number, what: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new TypeError(`${what} must be a finite number, got ${String(value)}`);
  return value;
}

/** Returns `seconds` if a protobuf Duration carries it (finite, at most ~10,000 years either way); throws TypeError otherwise. */
export function durationSecondsCheck(seconds: number, what: string): number {
  finiteCheck(seconds, what);
  if (Math.abs(seconds) > DURATION_MAX_SECONDS) throw new TypeError(`${what} must be at most ${DURATION_MAX_SECONDS} seconds, got ${seconds}`);
  return seconds;
}

/** Returns `value` if it is a valid Date; throws TypeError otherwise (an Invalid Date, a string, a number). */
export function dateCheck(value: Date, what: string): Date {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) throw new TypeError(`${what} must be a valid Date, got ${String(value)}`);
  return value;
}

/**
 * Returns `value` if it is a string; throws TypeError otherwise. For the names a call must
 * carry (a job's queue and type, a queue's name, a worker's queues): a JavaScript caller's
 * undefined (an unset environment variable, a misspelt field) was encoded as the text
 * "undefined", so a submit went into a queue named "undefined" and a worker served one.
 * The server judges the string itself (empty, characters).
 */
export function stringCheck(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new TypeError(`${what} must be a string, got ${value === null ? 'null' : typeof value}`);
  return value;
}

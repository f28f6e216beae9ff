// Over 400 lines on purpose: every request check that the gRPC and HTTP layers share is here,
// so that both refuse the same input with the same line.
import { invalidArgument } from './errors.js';
import { isUuid } from './ids.js';
import type { JobBulkFilter, JobState, JsonObject, ProgressReport } from './job.js';
import type { RateLimit } from './queue.js';

/**
 * Input checks shared by every RPC. Each throws INVALID_ARGUMENT with one line that names
 * the field and what is wrong, before anything is changed.
 */

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.:\/-]*$/;
/** Longest queue name, job type or worker id. */
export const MAX_NAME_LENGTH = 128;
/** Longest idempotency key: it is indexed with its queue, so it stays short. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;
/** The range of a job's priority (smaller runs first). */
export const PRIORITY_MIN = -1000;
/** See PRIORITY_MIN. */
export const PRIORITY_MAX = 1000;
/** Most attempts a job or queue may allow. */
export const MAX_ATTEMPTS_LIMIT = 1000;
/** Most slots one worker's session may ask for (hello.slots). */
export const MAX_SLOTS = 10_000;
/** Most jobs in one SubmitJobs call (they are written in one transaction). */
export const MAX_BATCH = 10_000;
/** Largest page of ListJobs. */
export const MAX_PAGE_SIZE = 1000;
/** The page size of ListJobs when the caller asks for none. */
export const DEFAULT_PAGE_SIZE = 50;
/**
 * Most JSON text (payloads, results, checkpoints, errors) a page of ListJobs begins jobs
 * within; the job that would begin past it starts the next page (the first job of a page
 * always comes). A page of 1,000 jobs at the payload limit would otherwise be read into the
 * server whole and sent as one message far over any client's limit; as Structs, jobs take
 * up to several times their JSON text on the wire.
 */
export const LIST_PAGE_BYTES = 1024 * 1024;

/**
 * Text that PostgreSQL can store: no U+0000 (NUL), which neither text columns nor jsonb
 * strings hold. Checked before a value joins a batch statement, where it would fail the
 * other writes of the batch with it.
 */
export function checkNoNul(field: string, value: string): string {
  if (value.includes('\u0000')) throw invalidArgument(`${field} contains a NUL character (U+0000), which cannot be stored`);
  return value;
}

/** An escaped NUL (`\u0000`, after an even number of backslashes) in JSON text. */
const JSON_NUL_RE = /(?<!\\)(?:\\\\)*\\u0000/;

/** JSON text without an escaped NUL, which jsonb refuses (see checkNoNul). */
function checkJsonNoNul(field: string, json: string): void {
  if (JSON_NUL_RE.test(json)) throw invalidArgument(`${field} contains a NUL character (\\u0000), which cannot be stored`);
}

/**
 * How deep objects and arrays may nest in a payload, result or checkpoint (the value itself
 * is level 1). Every API hands such a value out as a google.protobuf.Struct, where a level
 * of object costs three message levels (Struct, its map entry, Value), and protobuf
 * decoders stop at 100 (ts-proto's, @bufbuild/protobuf's, Python's): a ListJobsResponse
 * carries objects 32 deep at most. A value stored deeper than every reader can decode would
 * break each read of its job (GetJob, ListJobs, the dashboard, a push), so it is refused
 * when sent, with room to spare for the messages around it.
 */
export const MAX_JSON_DEPTH = 24;

/** JSON text whose objects and arrays nest at most MAX_JSON_DEPTH deep (strings read past). */
function checkJsonDepth(field: string, json: string): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > MAX_JSON_DEPTH) throw invalidArgument(`${field} nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep`);
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
}

/** An escaped UTF-16 surrogate (`\\uD800` to `\\uDFFF`, after an even number of backslashes) in JSON text. */
const JSON_SURROGATE_RE = /(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F][0-9a-fA-F]{2}/g;
/** The escaped low surrogate that must follow an escaped high one. */
const JSON_LOW_SURROGATE_RE = /^\\u[dD][c-fC-F][0-9a-fA-F]{2}/;

/**
 * JSON text without an escaped lone surrogate (`"\\ud800"`, what JSON.stringify writes for
 * half of a pair): valid JSON, but jsonb refuses it. Unchecked, a complete or checkpoint
 * carrying one failed in the database and was answered RETRY_LATER until its lease ran out,
 * its handler run again on every attempt.
 */
function checkJsonNoLoneSurrogate(field: string, json: string): void {
  if (!json.includes('\\u')) return;
  JSON_SURROGATE_RE.lastIndex = 0;
  for (let m = JSON_SURROGATE_RE.exec(json); m; m = JSON_SURROGATE_RE.exec(json)) {
    const end = m.index + m[0].length;
    const high = /[89abAB]/.test(m[0].charAt(m[0].length - 3));
    if (!high || !JSON_LOW_SURROGATE_RE.test(json.slice(end, end + 6))) {
      throw invalidArgument(`${field} contains a lone UTF-16 surrogate (${m[0].slice(-6)}), which is not Unicode text and cannot be stored`);
    }
    JSON_SURROGATE_RE.lastIndex = end + 6;
  }
}

/** JSON text as every value a job stores must be: no escaped NUL or lone surrogate, not nested too deep. */
function checkJsonStorable(field: string, json: string): void {
  checkJsonNoNul(field, json);
  checkJsonNoLoneSurrogate(field, json);
  checkJsonDepth(field, json);
}

/**
 * A refused value as its message shows it: in double quotes, with quotes, backslashes and
 * every character that is not visible text (a newline, U+202E that turns the rest of the line
 * around, a NUL) escaped as in JSON, so the line stays one readable line of what was sent.
 */
function quoted(value: string): string {
  return invisibleEscape(JSON.stringify(value));
}

/** Every character of `text` that is not visible text (\p{C}: a newline, U+202E, a NUL) escaped as in JSON (\u000a). */
function invisibleEscape(text: string): string {
  const escape = (unit: string) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`;
  return text.replace(/\p{C}/gu, (c) => c.split('').map(escape).join(''));
}

/**
 * A line that may quote what was sent (a decoder's message naming a key as sent), made one
 * short readable line: what is not visible text escaped, cut to `max` characters.
 */
export function lineShown(text: string, max = 200): string {
  return invisibleEscape(text.length > max ? `${text.slice(0, max)}…` : text);
}

/**
 * As quoted, cut to its first 64 characters: a refused value of any length stays a short line.
 * For every refusal that quotes what was sent (the HTTP port's too).
 */
export function quotedShort(value: string): string {
  return quoted(value.length > 64 ? `${value.slice(0, 64)}…` : value);
}

/** A queue name, job type or worker id: letters, digits and _ . : / -, starting with a letter or digit. */
export function checkName(field: string, value: string): string {
  if (!value) throw invalidArgument(`${field} is required`);
  if (value.length > MAX_NAME_LENGTH) throw invalidArgument(`${field} is longer than ${MAX_NAME_LENGTH} characters`);
  if (!NAME_RE.test(value)) {
    throw invalidArgument(`${field} ${quoted(value)} may contain only letters, digits and _ . : / - (starting with a letter or digit)`);
  }
  return value;
}

/** Most job types one worker may name (hello.job_types, ClaimJobsRequest.job_types). */
export const MAX_JOB_TYPES = 256;

/**
 * A worker's job types (job-type routing): each a valid name (see checkName), at most
 * MAX_JOB_TYPES. Returns them deduplicated and sorted (equal sets compare equal as
 * strings: the dispatcher groups sessions by them), or null for an empty list = any type.
 */
export function checkJobTypes(field: string, types: readonly string[]): string[] | null {
  if (types.length === 0) return null;
  if (types.length > MAX_JOB_TYPES) throw invalidArgument(`${field} names more than ${MAX_JOB_TYPES} job types`);
  types.forEach((t) => {
    if (!t) throw invalidArgument(`${field} contains an empty job type`);
    checkName(field, t);
  });
  return [...new Set(types)].sort();
}

/**
 * The most queues one worker may name (WorkerHello.queues, ClaimJobsRequest.queues). Each
 * costs the server a claimer and a lease lookup while the hello is served in one go: a
 * hello of 100,000 names (2.5 MB, under the 4 MiB message limit) held the event loop for
 * about 8 s, so every other call of the server waited, and took 600 MB of heap.
 */
export const MAX_WORKER_QUEUES = 10_000;

/**
 * How many leases a worker names as held (WorkerHello.held): at most MAX_SLOTS, since no
 * worker holds more than its slots; a longer list only costs the server (each is looked up).
 */
export function checkHeldCount(field: string, count: number): void {
  if (count > MAX_SLOTS) throw invalidArgument(`${field} names ${count} leases; the limit is ${MAX_SLOTS} (no worker holds more than its slots)`);
}

/**
 * The queues a worker takes jobs from (WorkerHello.queues, ClaimJobsRequest.queues): at
 * least one and at most MAX_WORKER_QUEUES, each a valid queue name; an empty one is named
 * as such (checkName would say the list "is required", which it was given).
 */
export function checkWorkerQueues(field: string, queues: readonly string[]): void {
  if (queues.length === 0) throw invalidArgument(`${field} must name at least one queue`);
  if (queues.length > MAX_WORKER_QUEUES) throw invalidArgument(`${field} names ${queues.length} queues; the limit is ${MAX_WORKER_QUEUES}`);
  queues.forEach((q) => {
    if (!q) throw invalidArgument(`${field} contains an empty queue name`);
    checkName(field, q);
  });
}

/** A job's priority: an integer from PRIORITY_MIN to PRIORITY_MAX. */
export function checkPriority(value: number): number {
  if (!Number.isInteger(value) || value < PRIORITY_MIN || value > PRIORITY_MAX) {
    throw invalidArgument(`priority must be an integer from ${PRIORITY_MIN} to ${PRIORITY_MAX}, got ${value}`);
  }
  return value;
}

/** A job's max_attempts: 0 (the queue's default) up to MAX_ATTEMPTS_LIMIT. */
export function checkMaxAttempts(value: number): number {
  if (!Number.isInteger(value) || value < 0 || value > MAX_ATTEMPTS_LIMIT) {
    throw invalidArgument(`max_attempts must be from 0 (queue default) to ${MAX_ATTEMPTS_LIMIT}, got ${value}`);
  }
  return value;
}

/**
 * Whether text has more than `max` characters, counted as code points, as PostgreSQL's
 * char_length counts them (evora.submit_job's checks): a JavaScript length counts UTF-16
 * units, two for a character outside the BMP (an emoji), so it refused keys and messages
 * of fewer characters than the limit that the SQL door takes. Cheap for text within it.
 */
function longerThan(value: string, max: number): boolean {
  return value.length > max && [...value].length > max;
}

/** An idempotency key: any text up to MAX_IDEMPOTENCY_KEY_LENGTH characters ('' for none). */
export function checkIdempotencyKey(value: string): string {
  if (longerThan(value, MAX_IDEMPOTENCY_KEY_LENGTH)) {
    throw invalidArgument(`idempotency_key is longer than ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`);
  }
  return checkNoNul('idempotency_key', value);
}

/** The prefix of the scheduler's own idempotency keys (a schedule's fires and triggers; docs/api.md). */
export const SCHEDULE_KEY_PREFIX = 'schedule:';

/**
 * A submit's idempotency key (checkIdempotencyKey), never one of the scheduler's: a key taken
 * first by a submit is kept by the scheduler as that fire's job (a replay), so a producer of
 * the schedule's queue could otherwise suppress or replace any fire of a schedule it may not
 * change, by submitting `schedule:<name>:<next fire time>` with a job of its own. Listing by
 * such a key (ListJobs) stays allowed.
 */
export function checkSubmitIdempotencyKey(value: string): string {
  if (value.startsWith(SCHEDULE_KEY_PREFIX)) {
    throw invalidArgument(`idempotency_key may not start with "${SCHEDULE_KEY_PREFIX}": such keys are the scheduler's (a schedule's fires and triggers)`);
  }
  return checkIdempotencyKey(value);
}

/** The longest concurrency key, in UTF-8 bytes (the column's CHECK, 0009_concurrency_keys.sql). */
export const MAX_CONCURRENCY_KEY_BYTES = 255;

/** A concurrency key: any text up to MAX_CONCURRENCY_KEY_BYTES bytes of UTF-8 ('' for none). */
export function checkConcurrencyKey(value: string): string {
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > MAX_CONCURRENCY_KEY_BYTES) {
    throw invalidArgument(`concurrency_key is longer than ${MAX_CONCURRENCY_KEY_BYTES} bytes (got ${bytes})`);
  }
  return checkNoNul('concurrency_key', value);
}

/**
 * A payload or result: a JSON object no larger than the configured limit, without a NUL or a
 * lone surrogate in any string or key (see checkNoNul), nested at most MAX_JSON_DEPTH deep. Unset is `{}`: callers for which unset means "none"
 * (a result, a checkpoint) check only a value that is set.
 */
export function checkJsonSize(field: string, value: JsonObject | undefined, maxBytes: number): JsonObject {
  const obj = value ?? {};
  const json = JSON.stringify(obj);
  const bytes = Buffer.byteLength(json);
  if (bytes > maxBytes) throw invalidArgument(`${field} is ${bytes} bytes of JSON; the limit is ${maxBytes}`);
  checkJsonStorable(field, json);
  // JSON.stringify writes null for a number JSON cannot carry: look only where it wrote one.
  if (json.includes('null')) checkJsonFinite(field, obj);
  return obj;
}

/**
 * A value whose numbers are all finite. A Struct's number may be infinite or NaN (over HTTP,
 * `1e400` parses as Infinity), and JSON has no such number: stored, it silently became null.
 */
function checkJsonFinite(path: string, value: unknown): void {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) {
      const where = path.length > 200 ? `${path.slice(0, 200)}…` : path;
      throw invalidArgument(`${where} is ${value}, which JSON cannot carry (a number must be finite)`);
    }
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => checkJsonFinite(`${path}[${i}]`, v));
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) checkJsonFinite(`${path}.${k}`, v);
  }
}

const utf8Strict = new TextDecoder('utf-8', { fatal: true });

/**
 * A JSON object sent as text that must be known good before it joins a batch statement (a
 * completion's result_json: one bad value would fail the batch's other writes with it):
 * checkPayloadJson's rules, and parsed here, so text that is not JSON is refused now.
 * Returns the text as sent (it is stored so, as jsonb).
 */
export function checkJsonObjectText(field: string, bytes: Uint8Array, maxBytes: number): string {
  const text = checkPayloadJson(field, bytes, maxBytes);
  try {
    JSON.parse(text);
  } catch (err) {
    throw invalidArgument(`${field} is not JSON: ${(err as Error).message}`, { cause: err });
  }
  return text;
}

/**
 * A completion's result as sent (WorkerComplete, CompleteJobRequest): `result` (a Struct) or
 * `result_json` (JSON object text), not both; neither set means no result (null). The text
 * is checked as checkJsonObjectText does, so a bad one never joins a batch of completions.
 */
export function checkCompleteResult(
  result: JsonObject | undefined,
  resultJson: Uint8Array | undefined,
  maxBytes: number,
): { result: JsonObject | null; resultJson?: string } {
  if (resultJson !== undefined) {
    if (result !== undefined) throw invalidArgument('set result or result_json, not both');
    return { result: null, resultJson: checkJsonObjectText('result_json', resultJson, maxBytes) };
  }
  return { result: result === undefined ? null : checkJsonSize('result', result, maxBytes) };
}

/** The longest error a failure stores (Job.last_error), in characters (code points). */
export const MAX_ERROR_LENGTH = 10_000;

/**
 * A failure's error as stored: cut to MAX_ERROR_LENGTH code points (never inside a
 * surrogate pair), a NUL replaced by U+FFFD. Not refused: the error is for people, and a
 * failure report must not be lost for its text.
 */
export function errorText(error: string): string {
  const cut = error.length > MAX_ERROR_LENGTH ? [...error].slice(0, MAX_ERROR_LENGTH).join('') : error;
  return cut.includes('\u0000') ? cut.replaceAll('\u0000', '\uFFFD') : cut;
}

/**
 * A payload sent as JSON object text (SubmitJobRequest.payload_json): at most `maxBytes`
 * bytes as sent, UTF-8, starting with `{` (after JSON whitespace), without an escaped NUL,
 * nested at most MAX_JSON_DEPTH deep. It is not parsed here:
 * PostgreSQL parses it once, as jsonb, and refuses text that is not JSON (the store maps
 * that to INVALID_ARGUMENT); valid JSON that starts with `{` is an object.
 */
export function checkPayloadJson(field: string, bytes: Uint8Array, maxBytes: number): string {
  if (bytes.length > maxBytes) throw invalidArgument(`${field} is ${bytes.length} bytes of JSON; the limit is ${maxBytes}`);
  let text: string;
  try {
    text = utf8Strict.decode(bytes);
  } catch {
    throw invalidArgument(`${field} is not UTF-8 text`);
  }
  if (!/^[ \t\n\r]*\{/.test(text)) throw invalidArgument(`${field} must be a JSON object ({...})`);
  checkJsonStorable(field, text);
  return text;
}

/** The earliest time a request may carry: google.protobuf.Timestamp's own range (0001-01-01 UTC). */
export const MIN_TIME_MS = new Date('0001-01-01T00:00:00Z').getTime();
/** The latest time a request may carry (9999-12-31T23:59:59.999 UTC), as MIN_TIME_MS. */
export const MAX_TIME_MS = new Date('9999-12-31T23:59:59.999Z').getTime();

/**
 * An optional time (run_at, retry_at, finished_before): absent, or a valid date within
 * google.protobuf.Timestamp's range (years 1 to 9999), which PostgreSQL can store and the
 * HTTP API's JSON can carry, so both APIs refuse the same times.
 */
export function checkDate(field: string, value: Date | undefined): Date | undefined {
  if (!value) return value;
  const ms = value.getTime();
  if (Number.isNaN(ms)) throw invalidArgument(`${field} is not a valid time`);
  if (ms < MIN_TIME_MS || ms > MAX_TIME_MS) throw invalidArgument(`${field} must be from 0001-01-01 to 9999-12-31 (UTC)`);
  return value;
}

/** An integer setting from `min` to `max` (slots, lease seconds, page size, ...). */
export function checkIntRange(field: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw invalidArgument(`${field} must be from ${min} to ${max}, got ${value}`);
  }
  return value;
}

/**
 * A job id or lease token: a UUID in its canonical text form. Checked before anything
 * reaches the store, so a malformed one is INVALID_ARGUMENT (or an ack with result
 * INVALID on the Work stream) everywhere, and never mistaken for a lost lease.
 */
export function checkUuid(field: string, value: string): string {
  if (!value) throw invalidArgument(`${field} is required`);
  if (!isUuid(value)) {
    throw invalidArgument(`${field} ${quotedShort(value)} is not a UUID`);
  }
  return value;
}

/** Page tokens are opaque to clients: the base64url of the last job id of the page. */
export function pageTokenEncode(afterId: string | null): string {
  return afterId ? Buffer.from(`j:${afterId}`).toString('base64url') : '';
}

/**
 * The job id a page token (from pageTokenEncode) carries; null for '' (the first page).
 * Anything else is INVALID_ARGUMENT, so a forged token never reaches the store.
 */
export function pageTokenDecode(token: string): string | null {
  if (!token) return null;
  const text = Buffer.from(token, 'base64url').toString('utf8');
  const m = /^j:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/.exec(text);
  if (!m?.[1]) throw invalidArgument('page_token is not valid (pass next_page_token back unchanged)');
  return m[1];
}

/** Highest rate limit (starts per second) and burst a queue may set. */
export const MAX_RATE_PER_SECOND = 1_000_000;
/**
 * Lowest rate limit a queue may set: one start per day. The time to the next token is
 * computed as an interval, which a far smaller rate would overflow (every claim of the queue
 * would then fail).
 */
export const MIN_RATE_PER_SECOND = 1 / 86_400;

/**
 * A queue's rate limit as asked: per second 0 (clears the limit; burst ignored) or from
 * MIN_RATE_PER_SECOND to MAX_RATE_PER_SECOND with a burst of 1 to 1,000,000.
 */
export function checkRateLimit(perSecond: number, burst: number): RateLimit {
  if (!Number.isFinite(perSecond) || perSecond < 0 || perSecond > MAX_RATE_PER_SECOND) {
    throw invalidArgument(`rate_limit.per_second must be from 0 (no limit) to ${MAX_RATE_PER_SECOND}, got ${perSecond}`);
  }
  if (perSecond > 0 && perSecond < MIN_RATE_PER_SECOND) {
    throw invalidArgument(`rate_limit.per_second must be at least 1/86400 (one start per day), got ${perSecond}`);
  }
  if (perSecond === 0) return { perSecond: 0, burst: 0 };
  return { perSecond, burst: checkIntRange('rate_limit.burst', burst, 1, 1_000_000) };
}

/** Longest retention a queue may set (100 years, in seconds); 0 means "forever" instead. */
export const MAX_RETENTION_SECONDS = 100 * 365.25 * 86_400;

/** A queue's retention in seconds: 0 (keep forever) up to MAX_RETENTION_SECONDS. */
export function checkRetentionSeconds(field: string, seconds: number): number {
  if (!Number.isFinite(seconds) || seconds < 0 || seconds > MAX_RETENTION_SECONDS) {
    throw invalidArgument(`${field} must be from 0 (keep forever) to 100 years, got ${seconds} s`);
  }
  return seconds;
}

/** Longest attempt timeout a job may set (one year, in seconds). */
export const MAX_TIMEOUT_SECONDS = 365.25 * 86_400;

/** An attempt timeout in seconds (SubmitJobRequest.timeout, a queue's attempt_timeout): more than 0, at most a year. */
export function checkTimeoutSeconds(seconds: number, field = 'timeout'): number {
  if (!Number.isFinite(seconds) || seconds <= 0) throw invalidArgument(`${field} must be positive, got ${seconds} s`);
  if (seconds > MAX_TIMEOUT_SECONDS) throw invalidArgument(`${field} must be at most one year, got ${seconds} s`);
  return seconds;
}

/**
 * Longest backoff base or cap (365 days, in seconds). A retry's delay is computed as an
 * interval in SQL; an unbounded one overflows it, and the failure or sweep that computes it
 * would fail (the sweeper's batch with it).
 */
export const MAX_BACKOFF_SECONDS = 365 * 86_400;

/**
 * A backoff's numbers, as UpsertQueueRequest.backoff and SubmitJobRequest.backoff check them
 * (the same one-line messages): jitter 0..1, durations from 0 to MAX_BACKOFF_SECONDS, and a
 * base no longer than a cap given with it (every delay would be the cap). Unset durations are
 * undefined; a queue's base or cap set alone is checked against the other by the store
 * (queues_backoff_base_within_cap).
 */
export function checkBackoffNumbers(b: { jitter: number; baseSeconds?: number | undefined; capSeconds?: number | undefined }): void {
  if (b.jitter < 0 || b.jitter > 1 || Number.isNaN(b.jitter)) throw invalidArgument('backoff.jitter must be from 0 to 1');
  for (const [name, seconds] of [['base', b.baseSeconds], ['cap', b.capSeconds]] as const) {
    if (seconds === undefined) continue;
    if (!Number.isFinite(seconds) || seconds < 0) throw invalidArgument('backoff durations must not be negative');
    if (seconds > MAX_BACKOFF_SECONDS) throw invalidArgument(`backoff.${name} must be at most 365 days, got ${seconds} s`);
  }
  if (b.baseSeconds !== undefined && b.capSeconds !== undefined && b.baseSeconds > b.capSeconds) {
    throw invalidArgument(`backoff.base (${b.baseSeconds} s) is longer than backoff.cap (${b.capSeconds} s): every delay would be the cap`);
  }
}

/** Most ids one bulk action's filter may name (RetryJobs, PurgeJobs). */
export const MAX_FILTER_IDS = MAX_BATCH;

/** A bulk action's filter as it arrives, states already mapped from the wire (unknown ones are null). */
export interface BulkFilterInput {
  queue: string;
  states: (JobState | null)[];
  type: string;
  /** The error group to match (evora.error_group); undefined: any. */
  errorGroup?: string | undefined;
  finishedBefore: Date | undefined;
  ids: string[];
}

/** Longest error group (ListDeadLetterGroups' key): the first line of last_error, cut to this. */
export const MAX_ERROR_GROUP_LENGTH = 200;

/** An error group to match: at most MAX_ERROR_GROUP_LENGTH characters, one line ('' = jobs without an error). */
export function checkErrorGroup(field: string, value: string): string {
  if (longerThan(value, MAX_ERROR_GROUP_LENGTH)) throw invalidArgument(`${field} is longer than ${MAX_ERROR_GROUP_LENGTH} characters (no error group is)`);
  if (value.includes('\n')) throw invalidArgument(`${field} is more than one line (an error group is the first line of the error)`);
  return checkNoNul(field, value);
}

/** ListDeadLetterGroups' limit: groups per answer (0 = DEFAULT_DEAD_LETTER_GROUPS). */
export const DEFAULT_DEAD_LETTER_GROUPS = 50;
/** The most groups ListDeadLetterGroups answers with; a larger limit is refused. */
export const MAX_DEAD_LETTER_GROUPS = 200;

/** GetQueueSeries' window in minutes (0 = DEFAULT_SERIES_MINUTES). */
export const DEFAULT_SERIES_MINUTES = 60;
/** The longest GetQueueSeries window in minutes, a day; a longer one is refused. */
export const MAX_SERIES_MINUTES = 1440;

/**
 * The filter of a bulk operator action (RetryJobs may touch `allowed` = DLQ and CANCELLED,
 * PurgeJobs the finished states, CancelJobs the unfinished ones). An empty filter is refused
 * ("a filter is required") so no one retries, purges or cancels everything by accident; a
 * state the action cannot touch is refused naming it; so are a bad id, queue or type, and a
 * cancel's finished_before (the jobs it cancels have not finished: it would match none).
 * Unset states become `allowed`.
 */
export function checkBulkFilter(action: 'retried' | 'purged' | 'cancelled', input: BulkFilterInput, allowed: readonly JobState[]): JobBulkFilter {
  if (action === 'cancelled' && input.finishedBefore) {
    throw invalidArgument('filter.finished_before cannot select jobs to cancel: they have not finished (use queue, states, type, error_group or ids)');
  }
  const empty =
    !input.queue && input.states.length === 0 && !input.type && input.errorGroup === undefined && !input.finishedBefore && input.ids.length === 0;
  if (empty) {
    const parts = action === 'cancelled' ? 'queue, states, type, error_group or ids' : 'queue, states, type, error_group, finished_before or ids';
    throw invalidArgument(`a filter is required (${parts})`);
  }
  const states = input.states.map((s, i) => {
    if (!s) throw invalidArgument(`filter.states[${i}] is not a known state`);
    if (!allowed.includes(s)) throw invalidArgument(`filter.states: ${s} jobs cannot be ${action} (only ${allowed.join(', ')})`);
    return s;
  });
  if (input.ids.length > MAX_FILTER_IDS) throw invalidArgument(`filter.ids names more than ${MAX_FILTER_IDS} jobs`);
  input.ids.forEach((id, i) => checkUuid(`filter.ids[${i}]`, id));
  return {
    queue: input.queue ? checkName('filter.queue', input.queue) : null,
    states: states.length > 0 ? [...new Set(states)] : [...allowed],
    type: input.type ? checkName('filter.type', input.type) : null,
    errorGroup: input.errorGroup === undefined ? null : checkErrorGroup('filter.error_group', input.errorGroup),
    finishedBefore: checkDate('filter.finished_before', input.finishedBefore) ?? null,
    ids: input.ids.length > 0 ? [...new Set(input.ids)] : null,
  };
}

/**
 * Most children GetJob lists (GetJobResponse.dependents): a list this long may stand for
 * more, which is how the CLI says it.
 */
export const MAX_DEPENDENTS = 1000;

/** Most parents one job may name (depends_on and depends_on_refs together). */
export const MAX_PARENTS = 1000;

/** A job's depends_on: job ids (each a UUID, else INVALID_ARGUMENT naming it), duplicates dropped. */
export function checkDependsOn(ids: readonly string[]): string[] {
  ids.forEach((id, i) => checkUuid(`depends_on[${i}]`, id));
  // In lower case, as PostgreSQL writes a uuid: the store finds parents by the ids it reads
  // back, and one id in both cases counts once.
  const distinct = [...new Set(ids.map((id) => id.toLowerCase()))];
  if (distinct.length > MAX_PARENTS) throw invalidArgument(`depends_on names more than ${MAX_PARENTS} jobs`);
  return distinct;
}

/** One job of a SubmitJobs call as the ref check sees it. */
export interface DependencyRefs {
  ref?: string | null;
  dependsOnRefs?: readonly string[] | null;
  /** Its depends_on as checkDependsOn returned it (distinct): counted with the refs against MAX_PARENTS. */
  dependsOn?: readonly string[] | null;
}

/**
 * The refs of one SubmitJobs call (refs may come in any order): each ref a valid name used
 * by one job only, each depends_on_refs entry a ref of the call, at most MAX_PARENTS parents
 * per job (distinct refs and depends_on ids together), and no cycle (a job that
 * would wait for itself, directly or through others). Throws INVALID_ARGUMENT naming the
 * jobs and refs at fault; the call then changes nothing.
 */
export function checkDependencyRefs(jobs: readonly DependencyRefs[]): void {
  const byRef = new Map<string, number>();
  jobs.forEach((j, i) => {
    if (!j.ref) return;
    checkName(`jobs[${i}].ref`, j.ref);
    const first = byRef.get(j.ref);
    if (first !== undefined) throw invalidArgument(`ref "${j.ref}" is used twice (jobs[${first}] and jobs[${i}])`);
    byRef.set(j.ref, i);
  });
  jobs.forEach((j, i) => {
    for (const r of j.dependsOnRefs ?? []) {
      if (!byRef.has(r)) throw invalidArgument(`jobs[${i}].depends_on_refs names unknown ref ${quotedShort(r)}`);
    }
    // Each kind was once held to MAX_PARENTS alone: 1,000 ids and 1,000 refs made 2,000 parents.
    if (new Set(j.dependsOnRefs ?? []).size + (j.dependsOn?.length ?? 0) > MAX_PARENTS) {
      throw invalidArgument(`jobs[${i}] names more than ${MAX_PARENTS} parents (depends_on and depends_on_refs together)`);
    }
  });
  // Depth-first search with a stack of its own (a chain of 10,000 jobs is deeper than the
  // call stack); a ref met again while on the path closes a cycle.
  const done = new Set<number>();
  const pathAt = new Map<number, number>();
  const parentsOf = (i: number) => (jobs[i]!.dependsOnRefs ?? []).map((r) => byRef.get(r)!);
  for (let root = 0; root < jobs.length; root++) {
    if (done.has(root)) continue;
    const path: { job: number; parents: number[]; next: number }[] = [{ job: root, parents: parentsOf(root), next: 0 }];
    pathAt.set(root, 0);
    while (path.length > 0) {
      const top = path[path.length - 1]!;
      if (top.next >= top.parents.length) {
        path.pop();
        pathAt.delete(top.job);
        done.add(top.job);
        continue;
      }
      const p = top.parents[top.next++]!;
      if (done.has(p)) continue;
      const at = pathAt.get(p);
      if (at !== undefined) {
        const refs = [...path.slice(at).map((e) => e.job), p].map((k) => `"${jobs[k]!.ref}"`);
        // A long cycle is shown by its ends, so the message stays one short line.
        const cycle = (refs.length > 8 ? [...refs.slice(0, 4), `… (${refs.length - 6} more)`, ...refs.slice(-2)] : refs).join(' -> ');
        throw invalidArgument(`depends_on_refs form a cycle: ${cycle}`);
      }
      pathAt.set(p, path.push({ job: p, parents: parentsOf(p), next: 0 }) - 1);
    }
  }
}

/** Longest progress message (WorkerProgress.message), in characters. */
export const MAX_PROGRESS_MESSAGE_LENGTH = 256;

/** A progress report's values as the wire carries them (before checking). */
export interface ProgressInput {
  jobId: string;
  leaseToken: string;
  /** undefined = not set. */
  percent: number | undefined;
  done: number | undefined;
  total: number | undefined;
  message: string;
  checkpoint: JsonObject | undefined;
}

/**
 * A progress report (WorkerProgress, ReportProgressRequest): a UUID job id and lease token;
 * percent 0..100, or done and total (integers, 0 <= done <= total), not both and not
 * neither unless a message or checkpoint is all the report says; a message of at most
 * MAX_PROGRESS_MESSAGE_LENGTH characters; a checkpoint no larger than the payload limit.
 */
export function checkProgressReport(input: ProgressInput, maxPayloadBytes: number, now: Date): ProgressReport {
  checkUuid('job_id', input.jobId);
  checkUuid('lease_token', input.leaseToken);
  const { percent, done, total } = input;
  if (percent !== undefined && (done !== undefined || total !== undefined)) {
    throw invalidArgument('progress takes percent or done/total, not both');
  }
  if (percent !== undefined && (!Number.isFinite(percent) || percent < 0 || percent > 100)) {
    throw invalidArgument(`percent must be from 0 to 100, got ${percent}`);
  }
  if ((done === undefined) !== (total === undefined)) throw invalidArgument('done and total must be set together');
  if (done !== undefined && total !== undefined) {
    if (!Number.isSafeInteger(done) || !Number.isSafeInteger(total) || done < 0 || total < 0) {
      throw invalidArgument(`done and total must be integers of at least 0, got ${done}/${total}`);
    }
    if (done > total) throw invalidArgument(`done must not exceed total, got ${done}/${total}`);
  }
  // A report that says nothing is malformed, not a reset: stored, it would wipe the job's
  // progress (percent, counts, message) with nothing in their place.
  if (percent === undefined && done === undefined && total === undefined && input.message === '' && input.checkpoint === undefined) {
    throw invalidArgument('progress report is empty: give percent, done and total, a message or a checkpoint');
  }
  if (longerThan(input.message, MAX_PROGRESS_MESSAGE_LENGTH)) {
    throw invalidArgument(`message is longer than ${MAX_PROGRESS_MESSAGE_LENGTH} characters`);
  }
  checkNoNul('message', input.message);
  const checkpoint = input.checkpoint === undefined ? null : checkJsonSize('checkpoint', input.checkpoint, maxPayloadBytes);
  return {
    id: input.jobId,
    token: input.leaseToken,
    percent: percent ?? null,
    done: done ?? null,
    total: total ?? null,
    message: input.message,
    checkpoint,
    reportedAt: now,
  };
}

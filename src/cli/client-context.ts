import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { EvoraApiError, EvoraClient, tokenFileRead as sdkTokenFileRead } from '../sdk/index.js';
import { parseDuration, UsageError } from './flags.js';
import { shellWord } from './format.js';

/**
 * What every client command of `evora` shares (client-commands.ts, schedule-commands.ts,
 * operator-commands.ts): the global options, a client built from them and closed after the
 * command, and printing either human text or, with --json, the SDK's objects as JSON.
 */

/** Options every client command reads (the program's global options). */
interface GlobalOptions {
  address?: string;
  json?: boolean;
  timeout: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  token?: string;
  tokenFile?: string;
}

/**
 * The client's TLS files from the global flags, else the environment (EVORA_TLS_CA,
 * EVORA_TLS_CLIENT_CERT, EVORA_TLS_CLIENT_KEY: not EVORA_TLS_CERT/KEY, which are the
 * server's own), read into the SDK's tls* options. None set: plaintext.
 */
export function tlsOptions(g: { tlsCa?: string; tlsCert?: string; tlsKey?: string }, env = process.env) {
  const ca = g.tlsCa || env.EVORA_TLS_CA;
  const cert = g.tlsCert || env.EVORA_TLS_CLIENT_CERT;
  const key = g.tlsKey || env.EVORA_TLS_CLIENT_KEY;
  if (Boolean(cert) !== Boolean(key)) throw new UsageError('--tls-cert (EVORA_TLS_CLIENT_CERT) and --tls-key (EVORA_TLS_CLIENT_KEY) must be given together');
  const read = (flag: string, path: string | undefined) => {
    if (!path) return undefined;
    try {
      return readFileSync(path);
    } catch (err) {
      throw new UsageError(`${flag}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  };
  return { tlsCa: read('--tls-ca', ca), tlsCert: read('--tls-cert', cert), tlsKey: read('--tls-key', key) };
}

/** The SDK's tokenFileRead, its refusal a usage error (exit 2) of the same one line. */
function tokenFileRead(path: string, source: string): string {
  try {
    return sdkTokenFileRead(path, source);
  } catch (err) {
    throw new UsageError((err as Error).message, { cause: err });
  }
}

/**
 * The API token, from the first of: --token, --token-file, EVORA_TOKEN_FILE, EVORA_TOKEN
 * (flag > file > env; surrounding whitespace dropped, so that `$(cat token-file)` works);
 * none: no token is sent. --token puts the secret in the process list, which every user of
 * the machine can read; the others keep it out. The token is never printed, also not in an
 * error message.
 */
export function tokenOption(g: { token?: string; tokenFile?: string }, env = process.env): { token?: string } {
  let source: string;
  let token: string | undefined;
  if (g.token !== undefined) {
    source = '--token';
    token = g.token.trim();
    if (!token) throw new UsageError('--token is empty');
  } else if (g.tokenFile !== undefined || env.EVORA_TOKEN_FILE) {
    source = g.tokenFile !== undefined ? '--token-file' : 'EVORA_TOKEN_FILE';
    token = tokenFileRead((g.tokenFile ?? env.EVORA_TOKEN_FILE) as string, source);
  } else {
    source = 'EVORA_TOKEN';
    token = env.EVORA_TOKEN?.trim();
    if (!token) return {};
  }
  if (!/^[\x21-\x7e]+$/.test(token)) throw new UsageError(`${source === '--token' || source === 'EVORA_TOKEN' ? source : `the token in ${source}`} must be printable ASCII without spaces`);
  return { token };
}

/**
 * The --timeout flag in milliseconds. Zero is refused as bad usage: a call with no time at
 * all fails at once as DEADLINE_EXCEEDED, which would read as an unreachable server (exit 5).
 */
function timeoutMs(text: string): number {
  const seconds = parseDuration(text, '--timeout');
  if (!(seconds > 0)) throw new UsageError(`--timeout must be more than 0, got "${text}"`);
  return seconds * 1000;
}

/** The global options that pick the server and how to reach it (a subset of GlobalOptions). */
export type ConnectionOptions = Pick<GlobalOptions, 'address' | 'tlsCa' | 'tlsCert' | 'tlsKey' | 'token' | 'tokenFile'>;

/**
 * `evora` and the connection flags given on this command line (--address, --tls-ca,
 * --tls-cert, --tls-key, --token-file), shell-quoted: the start of a command the CLI prints
 * for copying (the check after a timed-out write, `dlq`'s retry and list of a group), so that
 * the copy reaches the same server the same way. Flags only: what came from the environment
 * (EVORA_ADDRESS, EVORA_TLS_*, EVORA_TOKEN_FILE, EVORA_TOKEN) is still set in the shell the
 * copy runs in. A --token value is never printed: it is left out (its --token-file too, which
 * --token overrides), `tokenNote` says how to give the token instead, and a copy run
 * unedited is answered UNAUTHENTICATED with the CLI's own hint, not sent with a placeholder.
 */
export function evoraCommand(g: ConnectionOptions): { command: string; tokenNote: string } {
  const words = ['evora'];
  const flag = (name: string, value: string | undefined) => {
    if (value) words.push(name, shellWord(value));
  };
  flag('--address', g.address);
  flag('--tls-ca', g.tlsCa);
  flag('--tls-cert', g.tlsCert);
  flag('--tls-key', g.tlsKey);
  if (g.token === undefined) flag('--token-file', g.tokenFile);
  const tokenNote = g.token === undefined ? '' : 'your token in EVORA_TOKEN or --token-file <path>: the --token given is not printed';
  return { command: words.join(' '), tokenNote };
}

/**
 * The writes of the CLI whose effect a DEADLINE_EXCEEDED, or an UNAVAILABLE after the call
 * was sent (unavailableText), leaves unknown, by RPC: what may
 * have been applied (or created), and the command that shows whether it was (its words after
 * `evora` and the connection flags). A bulk action (RetryJobs, PurgeJobs, CancelJobs) is the usual case
 * of a deadline (10 s by default, about 60,000 jobs): it commits batch by batch and the server
 * stops it at the deadline, so its line says that part of it may be done and that running it
 * again with a longer --timeout goes on, not "may or may not have been applied". `subject` is the command's first argument (a job id, a
 * queue, schedule or token name), quoted for a shell. The line must not claim either
 * outcome: the server may have applied the change after the client stopped waiting.
 * SubmitJob is not here: the SDK knows when a submit never left (notSent).
 */
const UNKNOWN_WRITES: Readonly<Record<string, { change: (subject: string) => string; done?: string; check: (subject: string) => string; bulk?: true }>> = {
  CancelJob: { change: () => 'the cancel', check: (id) => `get ${id}` },
  RetryJob: { change: () => 'the retry', check: (id) => `get ${id}` },
  // Batch by batch: at the deadline the server stops before its next batch, and what it did stays done.
  RetryJobs: { change: () => 'the retry', done: 'retried', check: () => 'retry --all --dry-run and the same filters (it counts the jobs still to retry)', bulk: true },
  PurgeJobs: { change: () => 'the purge', done: 'deleted', check: () => 'purge --dry-run and the same filters (it counts the jobs still to delete)', bulk: true },
  CancelJobs: { change: () => 'the cancel', done: 'cancelled', check: () => 'cancel --all --dry-run and the same filters (it counts the jobs still to cancel)', bulk: true },
  UpsertQueue: { change: () => 'the change', check: (name) => `queue get ${name}` },
  PauseQueue: { change: () => 'the pause', check: (name) => `queue get ${name}` },
  ResumeQueue: { change: () => 'the resume', check: (name) => `queue get ${name}` },
  DeleteQueue: { change: () => 'the delete', check: (name) => `queue get ${name} (NOT_FOUND once deleted)` },
  UpsertSchedule: { change: () => 'the change', check: (name) => `schedule get ${name}` },
  PauseSchedule: { change: () => 'the pause', check: (name) => `schedule get ${name}` },
  ResumeSchedule: { change: () => 'the resume', check: (name) => `schedule get ${name}` },
  TriggerSchedule: { change: () => 'the trigger', check: (name) => `schedule get ${name} (its last run and last job)` },
  DeleteSchedule: { change: () => 'the delete', check: (name) => `schedule get ${name} (NOT_FOUND once deleted)` },
  CreateToken: { change: () => 'the token', done: 'created', check: () => 'token list (a token made this way has lost its secret: revoke it)' },
  // The token by the id or name it was given: the list shows both, and REVOKED a time once revoked.
  RevokeToken: { change: (ref) => `the revoke of token ${ref}`, check: (ref) => `token list --all (its REVOKED column for ${ref})` },
};

/**
 * DEADLINE_EXCEEDED in one line as the CLI's other status lines: what timed out, where, after
 * how long, and what to try, instead of grpc-js's timings ("Deadline exceeded after
 * 1.000s,name resolution: 0.042s,...,Waiting for LB pick"); for a submit, whether the job
 * may have gone out (the SDK's notSent); for another write, that it may or may not have
 * been applied and the command that tells (UNKNOWN_WRITES), with the connection flags this
 * command was given (evoraCommand), so that it asks the same server.
 */
export function deadlineText(err: EvoraApiError, address: string, timeout: string, subject?: string, connection: ConnectionOptions = {}): string {
  const t = timeout.trim();
  const within = /^\d+(\.\d+)?$/.test(t) ? `${t}s` : t;
  const outcome = writeOutcome(err, subject, connection, 'with a longer --timeout (e.g. --timeout 10m)');
  return `${err.method} got no answer from the Evora server at ${address} within ${within} (raise --timeout if the server is busy, or check that it is up and reachable)${outcome ? `; ${outcome}` : ''}`;
}

/**
 * For a write whose answer was lost: for a submit, whether the job may have been submitted
 * (the SDK's notSent); for a write of UNKNOWN_WRITES, that it may or may not have been
 * applied and the command that tells (with the connection flags this command was given,
 * evoraCommand); for a bulk action, that part of it may be done and that running it again
 * (`again`: when) goes on. '' for any other call.
 */
function writeOutcome(err: EvoraApiError, subject: string | undefined, connection: ConnectionOptions, again: string): string {
  if (err.method === 'SubmitJob') return `the job ${err.notSent ? 'was not' : 'may have been'} submitted`;
  const write = UNKNOWN_WRITES[err.method];
  if (!write) return '';
  const s = subject === undefined ? '<name>' : shellWord(subject);
  const { command, tokenNote } = evoraCommand(connection);
  const check = `${command} ${write.check(s)}${tokenNote ? `, with ${tokenNote}` : ''}`;
  return write.bulk
    ? `${write.change(s)} stopped there with none, some or all of the matching jobs ${write.done} (the batches it committed stay ${write.done}): ` +
        `run it again ${again} to go on, or check with ${check}`
    : `${write.change(s)} may or may not have been ${write.done ?? 'applied'}: check with ${check}`;
}

/** grpc-js's UNAVAILABLE details for a call that never got a connection: it never left this process. */
const NEVER_SENT = /^(No connection established|Name resolution failed)/;

/**
 * UNAVAILABLE in one line naming the server's address: "cannot reach" only when the call
 * never got a connection (grpc-js's own word; nothing was sent), "answered" when the server
 * sent the status itself (its database is away, it is starting or stopping), and "lost" when
 * the connection broke during the call (the server died). In the last two a write may have
 * been applied (a purge killed with its server after 20,000 of 30,000 jobs kept those
 * deletions): the line then says so as after a deadline (writeOutcome), instead of "cannot
 * reach", which read as "nothing happened".
 */
export function unavailableText(err: EvoraApiError, address: string, subject?: string, connection: ConnectionOptions = {}): string {
  const detail = err.message.replace(/\s*Resolution note:\s*$/, '');
  const answered = err.answered;
  if (!answered && NEVER_SENT.test(detail)) return `cannot reach the Evora server at ${address} (${detail})`;
  const head = answered ? `the Evora server at ${address} answered: ${detail}` : `lost the connection to the Evora server at ${address} during the call (${detail})`;
  const outcome = writeOutcome(err, subject, connection, 'once the server is back');
  return outcome ? `${head}; ${outcome}` : head;
}

/** A client command's client, whether it prints JSON, whether it sends a token, and its connection flags. */
export interface Ctx {
  client: EvoraClient;
  json: boolean;
  /** A token was given (--token, --token-file, EVORA_TOKEN_FILE or EVORA_TOKEN). */
  tokenGiven: boolean;
  /** The connection flags of the command line, for the commands it prints for copying (evoraCommand). */
  connection: ConnectionOptions;
}

/** Prints `value` as JSON with --json, else the human text. */
export function print(ctx: Ctx, value: unknown, human: () => string): void {
  process.stdout.write(`${ctx.json ? JSON.stringify(value, null, 2) : human()}\n`);
}

/**
 * Runs a command with a client built from the global options, and closes it. A server that
 * cannot be reached, or answers UNAVAILABLE, is said in one line naming its address; an UNAUTHENTICATED answer to a
 * command run without a token says how to give one.
 */
export function withClient<A extends unknown[]>(fn: (ctx: Ctx, ...args: A) => Promise<void>) {
  return async (...args: [...A, Command]) => {
    const cmd = args[args.length - 1] as Command;
    const g = cmd.optsWithGlobals<GlobalOptions>();
    const auth = tokenOption(g);
    // The SDK adds Evora's port to an address without one (addressWithPort).
    const client = new EvoraClient({ address: g.address || undefined, deadlineMs: timeoutMs(g.timeout), ...tlsOptions(g), ...auth });
    try {
      await fn({ client, json: Boolean(g.json), tokenGiven: auth.token !== undefined, connection: g }, ...(args.slice(0, -1) as A));
    } catch (err) {
      // The command's first argument, if a word: the job id or name a write's check names.
      const subject = typeof args[0] === 'string' ? args[0] : undefined;
      if (err instanceof EvoraApiError && err.codeName === 'UNAVAILABLE') {
        throw new EvoraApiError({ code: err.code, method: err.method, details: unavailableText(err, client.address, subject, g), cause: err, notSent: err.notSent });
      }
      if (err instanceof EvoraApiError && err.codeName === 'DEADLINE_EXCEEDED') {
        throw new EvoraApiError({ code: err.code, method: err.method, details: deadlineText(err, client.address, g.timeout, subject, g), cause: err, notSent: err.notSent });
      }
      if (err instanceof EvoraApiError && err.isUnauthenticated && !auth.token) {
        throw new EvoraApiError({ code: err.code, method: err.method, details: `${err.details} (no token given: set EVORA_TOKEN, or pass --token-file or --token)`, cause: err });
      }
      throw err;
    } finally {
      client.close();
    }
  };
}

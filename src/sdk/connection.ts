import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';

/**
 * Evora's gRPC port: `evora serve`'s --port default (src/server/config.ts; a test keeps the
 * two equal, since the SDK imports no server code).
 */
export const DEFAULT_PORT = 50051;

/** Where the server is when nothing says otherwise. */
export const DEFAULT_ADDRESS = `127.0.0.1:${DEFAULT_PORT}`;

/** How to reach an Evora server (shared by EvoraClient and EvoraWorker). */
export interface ConnectionOptions {
  /** host:port of the server (a host alone: port 50051). Default: $EVORA_ADDRESS, else 127.0.0.1:50051. */
  address?: string;
  /**
   * Channel credentials, for what the tls* options do not cover. Default: plaintext, or TLS
   * when any tls* option is set. Not together with the tls* options.
   */
  credentials?: grpc.ChannelCredentials;
  /**
   * TLS with the system's root CAs (a server whose certificate a public CA signed). Implied
   * by tlsCa, tlsCert and tlsKey. Default: plaintext.
   */
  tls?: boolean;
  /** PEM of the CA that signed the server's certificate (e.g. `readFileSync('ca.pem')`); turns TLS on. */
  tlsCa?: string | Buffer;
  /** PEM of this client's certificate chain, for a server that requires one (mTLS); needs tlsKey. */
  tlsCert?: string | Buffer;
  /** PEM of the private key of tlsCert. */
  tlsKey?: string | Buffer;
  /**
   * API token, sent on every call (each unary call and the Work stream) as
   * `authorization: Bearer <token>`. Needed once the server has any token (auth.proto's
   * top comment). Default: the first line of the file $EVORA_TOKEN_FILE names, else
   * $EVORA_TOKEN, else none (as the CLI and the example workers read them); `''` sends none
   * whatever the environment says. It travels in the call's metadata, so it works over
   * plaintext too; send it over TLS anywhere but loopback.
   */
  token?: string;
  /** Extra grpc-js channel options (they override the SDK's). */
  channelOptions?: grpc.ChannelOptions;
}

/** A refusal of an address the SDK cannot dial as meant (a TypeError, as for other bad options: the CLI exits 2). */
function addressRefused(address: string, why: string): TypeError {
  return new TypeError(`address "${address}" ${why}`);
}

/** `port` (after a host's colon) if it is one a server can listen on. */
function portCheck(port: string, address: string): void {
  if (!/^\d+$/.test(port) || Number(port) < 1 || Number(port) > 65_535) throw addressRefused(address, 'has a port that is not a whole number from 1 to 65535');
}

/**
 * `host` with Evora's port when it has none: `name`, `[v6]` and a bare IPv6 address get it;
 * `name:port` and `[v6]:port` are kept. A port out of range and a missing host are refused
 * (grpc-js took `:50051` to an empty host name, and `db1:99999` to a "connection" failure).
 */
function hostWithPort(host: string, address: string): string {
  if (host.startsWith('[')) {
    const m = /^\[[^\]]+\](?::(.*))?$/.exec(host);
    if (!m) throw addressRefused(address, 'is not an IPv6 address in brackets, [::1] or [::1]:50051');
    if (m[1] === undefined) return `${host}:${DEFAULT_PORT}`;
    portCheck(m[1], address);
    return host;
  }
  const colons = host.split(':').length - 1;
  if (colons === 0) {
    if (!host) throw addressRefused(address, 'names no host');
    return `${host}:${DEFAULT_PORT}`;
  }
  // More than one colon and no brackets: an IPv6 address alone, as grpc-js reads it too.
  if (colons > 1) return `[${host}]:${DEFAULT_PORT}`;
  const [name, port] = host.split(':') as [string, string];
  if (!name) throw addressRefused(address, `names no host (127.0.0.1:${port} is this machine)`);
  portCheck(port, address);
  return host;
}

/**
 * The address to dial, with Evora's port (DEFAULT_PORT) added when none is given: grpc-js's
 * own default for a name without a port is 443, where no Evora server listens, so an address
 * of `db-host` would fail only after the whole deadline. The targets grpc-js reads with a
 * scheme keep it: `dns:` (with or without an authority) and `ipv4:`/`ipv6:` (a list, each
 * address) get the port where one is missing, `unix:`, `unix-abstract:` and `vsock:` stay as
 * given, and so does a target of any other scheme written with `//` (`xds:///evora`: a
 * resolver registered with grpc-js, such as @grpc/grpc-js-xds's, reads it). A web or gRPC
 * URL (`http://host:8080`, the dashboard's; `https:`, `grpc:`, `grpcs:`, which no resolver
 * reads) is refused with a TypeError, as are a port out of range and a missing host:
 * grpc-js read the URL as an IPv6 address and answered UNAVAILABLE, as if the server were down.
 */
export function addressWithPort(address: string): string {
  const m = /^(dns|ipv4|ipv6):((?:\/\/[^/]*\/)?)(.+)$/.exec(address);
  if (m) return `${m[1]}:${m[2]}${m[1] === 'dns' ? hostWithPort(m[3]!, address) : m[3]!.split(',').map((h) => hostWithPort(h, address)).join(',')}`;
  if (/^(unix|unix-abstract|vsock):/.test(address)) return address;
  if (/^(https?|grpcs?):\/\//i.test(address)) {
    throw addressRefused(address, 'is a URL: give host:port, such as 127.0.0.1:50051 (or a grpc-js target: dns:, ipv4:, ipv6:, unix:)');
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(address)) return address;
  return hostWithPort(address, address);
}

/** The address to dial: the one given, else $EVORA_ADDRESS, else DEFAULT_ADDRESS; with Evora's port when it names none (addressWithPort). */
export function resolveAddress(address: string | undefined): string {
  return addressWithPort(address || process.env.EVORA_ADDRESS || DEFAULT_ADDRESS);
}

/**
 * The first line of a token file, trimmed (a file written by `echo`, or with a CRLF, works).
 * `source` names where the path came from (`EVORA_TOKEN_FILE`, the CLI's `--token-file`).
 * An unreadable file, or one whose first line is empty, is a TypeError of one line naming
 * the path, never the content.
 */
export function tokenFileRead(path: string, source: string): string {
  if (path.trim() === '') throw new TypeError(`${source} is empty: give the path of a file holding the token, or leave it out`);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new TypeError(`${source}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, { cause: err });
  }
  const token = (text.split('\n', 1)[0] ?? '').trim();
  if (!token) throw new TypeError(`${source}: the first line of ${path} is empty: it must hold the token`);
  return token;
}

/** What a token is made of, and all a header value can carry: printable ASCII without spaces. */
const TOKEN_TEXT = /^[\x21-\x7e]+$/;

/**
 * The token a client sends: the option when given (`''`: none), else the first line of the
 * file $EVORA_TOKEN_FILE names, else $EVORA_TOKEN (trimmed), else none. The order is the
 * CLI's after its flags (a file before the variable holding the secret itself), so that one
 * environment configures the CLI, the SDK and the example workers alike. A token from the
 * environment that cannot be a header value is a TypeError naming where it came from (the
 * program gave no token, so bearerHeader's "token must be..." would not tell it where to
 * look), never the token.
 */
export function resolveToken(token: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (token !== undefined) return token === '' ? undefined : token;
  const checked = (value: string, source: string) => {
    if (!TOKEN_TEXT.test(value)) throw new TypeError(`${source} must be printable ASCII without spaces (the SDK sends it as the token when the token option is not given)`);
    return value;
  };
  const file = env.EVORA_TOKEN_FILE;
  if (file) return checked(tokenFileRead(file, 'EVORA_TOKEN_FILE'), `the token in EVORA_TOKEN_FILE (${file})`);
  const value = env.EVORA_TOKEN?.trim();
  return value ? checked(value, 'EVORA_TOKEN') : undefined;
}

/**
 * The channel credentials the options ask for: `credentials` as given, TLS when any tls*
 * option is set, else plaintext. Throws a TypeError for options that contradict each other.
 */
export function credentialsFor(opts: ConnectionOptions): grpc.ChannelCredentials {
  const tls = Boolean(opts.tls || opts.tlsCa || opts.tlsCert || opts.tlsKey);
  if (opts.credentials && tls) throw new TypeError('credentials and the tls options are exclusive: pass one or the other');
  if (Boolean(opts.tlsCert) !== Boolean(opts.tlsKey)) throw new TypeError('tlsCert and tlsKey must be given together');
  if (opts.credentials) return opts.credentials;
  if (!tls) return grpc.credentials.createInsecure();
  const pem = (v: string | Buffer | undefined) => (v === undefined ? null : Buffer.isBuffer(v) ? v : Buffer.from(v));
  return grpc.credentials.createSsl(pem(opts.tlsCa), pem(opts.tlsKey), pem(opts.tlsCert));
}

/** The `authorization` header value for a token; throws a TypeError for one that cannot be a header. */
export function bearerHeader(token: string): string {
  // Printable ASCII without spaces: what a header value can carry and a token is made of.
  // The message never contains the token.
  if (!TOKEN_TEXT.test(token)) throw new TypeError('token must be non-empty printable ASCII without spaces');
  return `Bearer ${token}`;
}

/**
 * A channel that puts `authorization: Bearer <token>` into the metadata of every call it
 * makes: the one place the SDK sends the token, for every unary method and the Work
 * stream alike. Metadata rather than call credentials, because grpc-js refuses call
 * credentials on a plaintext channel. A header the caller set itself is left alone.
 */
class TokenChannel extends grpc.Channel {
  constructor(
    target: string,
    credentials: grpc.ChannelCredentials,
    options: grpc.ChannelOptions,
    private readonly authorization: string,
  ) {
    super(target, credentials, options);
  }

  override createCall(...args: Parameters<grpc.Channel['createCall']>): ReturnType<grpc.Channel['createCall']> {
    const call = super.createCall(...args);
    const start = call.start.bind(call);
    call.start = (metadata, listener) => {
      const md = metadata.clone();
      if (md.get('authorization').length === 0) md.set('authorization', this.authorization);
      start(md, listener);
    };
    return call;
  }
}

/**
 * How fast a channel reconnects after losing the server: its first retry after 200 ms,
 * doubling up to 2 s (EvoraWorker's own reconnect defaults). grpc-js's own default doubles
 * (x1.6) from 1 s up to 120 s, so after an outage of a minute or two a client stayed
 * UNAVAILABLE for up to two minutes after the server was back. What must stay true: every
 * SDK channel (EvoraClient's and EvoraWorker's) is back within about RECONNECT_MAX_DELAY_MS
 * of the server.
 */
export const RECONNECT_INITIAL_DELAY_MS = 200;
/** The cap of a channel's reconnect backoff (see RECONNECT_INITIAL_DELAY_MS). */
export const RECONNECT_MAX_DELAY_MS = 2_000;

/**
 * One channel for the given options; every service client of one SDK object shares it.
 * `reconnect` overrides the reconnect backoff (EvoraWorker passes its `reconnect` options).
 */
export function channelCreate(opts: ConnectionOptions, reconnect: { initialDelayMs?: number; maxDelayMs?: number } = {}): grpc.Channel {
  const options: grpc.ChannelOptions = {
    // Short, as the worker's: a channel is back within about 2 s of the server.
    'grpc.initial_reconnect_backoff_ms': reconnect.initialDelayMs ?? RECONNECT_INITIAL_DELAY_MS,
    'grpc.max_reconnect_backoff_ms': reconnect.maxDelayMs ?? RECONNECT_MAX_DELAY_MS,
    // Its own connection: grpc-js otherwise shares one between channels of equal options,
    // and while a worker's reconnect attempts hold it in backoff during an outage, an idle
    // client's first call after the server is back would fail at once with UNAVAILABLE
    // instead of connecting.
    'grpc.use_local_subchannel_pool': 1,
    // Whatever the server sends: its messages carry jobs that passed its payload and result
    // limits, which as Structs take up to several times their JSON size, and ListJobs bounds
    // its pages (docs/api.md, "Size limits"). Sends: large enough for a batch of jobs with
    // 1 MiB payloads; the server has its own limit.
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': 64 * 1024 * 1024,
    // Pings find a connection that died without a reset (a host gone, a middlebox that lost
    // the flow): without them grpc-js keeps using the dead transport, and a worker reopening
    // its stream on it never hears from the server again. Evora's server permits pings
    // without calls (server.ts); a proxy that finds them too frequent answers too_many_pings,
    // and grpc-js then doubles the interval.
    'grpc.keepalive_time_ms': 15_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.keepalive_permit_without_calls': 1,
    ...opts.channelOptions,
  };
  const target = resolveAddress(opts.address);
  const credentials = credentialsFor(opts);
  const token = resolveToken(opts.token);
  if (token === undefined) return new grpc.Channel(target, credentials, options);
  return new TokenChannel(target, credentials, options, bearerHeader(token));
}

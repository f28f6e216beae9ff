import { checkBootstrapSecret } from '../domain/auth.js';
import type { DbPooler } from '../store/connections.js';
import { parse as connectionStringParse } from 'pg-connection-string';

/**
 * Server configuration: every setting has a default, an environment variable, and (in
 * `evora serve`) a flag, but for secrets (EVORA_BOOTSTRAP_ADMIN_TOKEN): those are
 * environment only, as a command line is visible to every user of the machine. The README's configuration table is generated from CONFIG_DOC.
 */
export interface ServerConfig {
  /** PostgreSQL to use; when absent Evora runs its own embedded PostgreSQL. */
  databaseUrl: string | null;
  /** Folder for the embedded PostgreSQL's data (`<dataDir>/pgdata`). */
  dataDir: string;
  /** Port of the embedded PostgreSQL on 127.0.0.1. */
  embeddedPgPort: number;
  host: string;
  port: number;
  logLevel: string;
  /** Pretty logs; default: when stdout is a terminal. */
  logPretty: boolean | undefined;
  dbPoolSize: number;
  /** How long a pooled statement may go unanswered before it is given up as an outage (0: forever). */
  dbQueryTimeoutMs: number;
  /**
   * PostgreSQL itself, for what a transaction pooler on databaseUrl cannot carry: LISTEN,
   * the leader's session-level advisory lock, the migrations. Null: databaseUrl.
   */
  directDatabaseUrl: string | null;
  /** Whether a pooler sits on databaseUrl (named prepared statements off): auto detects it. */
  dbPooler: DbPooler;
  /**
   * Claims commit without waiting for the WAL flush (off by default): faster, but after a
   * PostgreSQL crash a job claimed in the last moments may run twice and its attempt is
   * not counted (docs/store.md).
   */
  claimAsyncCommit: boolean;
  /** The dispatcher's fallback poll for queues with waiting workers (NOTIFY is the fast path). */
  pollIntervalMs: number;
  sweepIntervalMs: number;
  electionIntervalMs: number;
  /** Largest accepted job payload or result, as JSON bytes. */
  maxPayloadBytes: number;
  /** Largest gRPC message in either direction. */
  maxMessageBytes: number;
  /** How long shutdown waits for workers to finish in-flight work before closing streams. */
  shutdownTimeoutMs: number;
  /** How long a Work stream may stay open without its hello before the server ends it. */
  helloTimeoutMs: number;
  /** MongoDB for telemetry; when absent the projection is kept in Postgres tables. */
  mongodbUrl: string | null;
  /** How often the leader projects outbox events into telemetry. */
  projectIntervalMs: number;
  /**
   * The HTTP port (on `host`): the JSON API under /v1, the dashboard, /healthz, /readyz,
   * /metrics, /openapi.json; 0: off. TLS as on the gRPC port.
   */
  httpPort: number;
  /** A separate HTTP port for /metrics and /healthz only (an alias of the HTTP port's); 0: off. */
  metricsPort: number;
  /**
   * /metrics on the HTTP port needs no token even while auth is on (its labels name every
   * queue, so off by default: any valid token then). The metrics port never asks for one.
   */
  metricsOpen: boolean;
  /** How often the leader deletes finished jobs past their queue's retention. */
  pruneIntervalMs: number;
  /** Finished jobs (or audit events) deleted per pruner statement (one short transaction each). */
  pruneBatchSize: number;
  /**
   * Days the audit log keeps an event before the leader's pruner deletes it; 0: forever.
   * Otherwise at least AUDIT_RETENTION_MIN_DAYS: the database never lets the application
   * role delete a younger event (0022_audit_retention.sql).
   */
  auditRetentionDays: number;
  /** TLS on the gRPC port: the server's certificate (PEM file); null: plaintext. Needs tlsKey. */
  tlsCert: string | null;
  /** The private key (PEM file) of tlsCert; set exactly when tlsCert is. */
  tlsKey: string | null;
  /** A CA (PEM file) client certificates must be signed by (mTLS); needs tlsCert. */
  tlsClientCa: string | null;
  /** How often the TLS files are read again (a valid change applies to new connections). */
  tlsReloadIntervalMs: number;
  /**
   * EVORA_BOOTSTRAP_ADMIN_TOKEN: an admin token's secret the server creates (or keeps) at
   * startup, so auth is on from the first start; null: none. Never logged.
   */
  bootstrapAdminToken: string | null;
  /** Run without auth on a non-loopback address (no tokens exist). Refused otherwise. */
  insecureNoAuth: boolean;
  /** Server reflection on the gRPC port (grpcurl's list and describe). */
  reflection: boolean;
  /** How often each server reads the token table again (NOTIFY makes it read at once). */
  authRefreshMs: number;
}

/**
 * EVORA_LOG_LEVEL's values: pino's levels. Checked here, so that a wrong one is refused with
 * the setting's line (exit 2) rather than by pino's own error once the server starts.
 */
const LOG_LEVELS: readonly string[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** EVORA_DB_POOLER's values (here, not imported from the store, so loading the config loads no pg). */
const DB_POOLER_VALUES: readonly DbPooler[] = ['auto', 'none', 'transaction'];

interface ConfigEntry {
  key: keyof ServerConfig;
  env: string;
  /** The `evora serve` flag; '' for a secret, set by the environment only. */
  flag: string;
  default: string;
  doc: string;
  /**
   * The allowed range of a whole-number setting. Intervals have one: 0 or a few
   * milliseconds would make their timer a busy loop, and over 2^31-1 ms Node fires it at once.
   */
  range?: readonly [number, number];
}

/** Longest delay a Node timer takes (about 24.8 days); a longer one fires at once. */
const TIMER_MAX_MS = 2 ** 31 - 1;
/** The range of a timer interval setting. */
const INTERVAL_RANGE = [10, TIMER_MAX_MS] as const;
/** A TCP port that must be a real one (no "any free port"). */
const PORT_RANGE = [1, 65_535] as const;

/**
 * The shortest audit retention: evora.audit_events_prune (0022_audit_retention.sql) never
 * deletes an event younger than this, so a shorter setting would be a promise not kept.
 */
const AUDIT_RETENTION_MIN_DAYS = 30;
/** The longest audit retention accepted (100 years; 0 keeps events forever). */
const AUDIT_RETENTION_MAX_DAYS = 36_500;

/** Every setting, its environment variable, flag and default: the single source of truth. */
export const CONFIG_DOC: ConfigEntry[] = [
  { key: 'databaseUrl', env: 'DATABASE_URL', flag: '--database-url', default: '', doc: 'PostgreSQL connection string; unset: start the embedded PostgreSQL' },
  { key: 'dataDir', env: 'EVORA_DATA_DIR', flag: '--data-dir', default: '.evora', doc: 'where the embedded PostgreSQL keeps its data (pgdata/ inside)' },
  { key: 'embeddedPgPort', env: 'EVORA_PG_PORT', flag: '--embedded-pg-port', default: '54329', doc: 'port of the embedded PostgreSQL (127.0.0.1)', range: PORT_RANGE },
  { key: 'host', env: 'EVORA_HOST', flag: '--host', default: '127.0.0.1', doc: 'gRPC listen address' },
  { key: 'port', env: 'EVORA_PORT', flag: '--port', default: '50051', doc: 'gRPC listen port (0: any free port)', range: [0, 65_535] },
  { key: 'logLevel', env: 'EVORA_LOG_LEVEL', flag: '--log-level', default: 'info', doc: 'trace, debug, info, warn, error, fatal, silent' },
  { key: 'logPretty', env: 'EVORA_LOG_PRETTY', flag: '--log-pretty', default: '', doc: '1: human-readable logs; 0: JSON lines, each with `service` and the package `version`; unset: pretty on a terminal' },
  { key: 'dbPoolSize', env: 'EVORA_DB_POOL_SIZE', flag: '--db-pool-size', default: '10', doc: 'PostgreSQL connections per server process (plus one LISTEN and one leader connection)', range: [1, 1000] },
  { key: 'dbQueryTimeoutMs', env: 'EVORA_DB_QUERY_TIMEOUT_MS', flag: '--db-query-timeout-ms', default: '30000', doc: 'a statement unanswered this long is given up: PostgreSQL is asked to cancel it, its connection is closed and the call answered UNAVAILABLE (a statement waiting for a lock another session holds, or a database that stopped answering without closing its connections: frozen, a network partition); it may still have committed; below 10 s it bounds the wait for a connection too (10 s otherwise); 0: wait forever', range: [0, TIMER_MAX_MS] },
  { key: 'directDatabaseUrl', env: 'EVORA_DIRECT_DATABASE_URL', flag: '--direct-database-url', default: '', doc: 'PostgreSQL itself, when DATABASE_URL is a pooler (pgbouncer): LISTEN, the leader lock and migrations connect here; unset: DATABASE_URL (a start that finds a pooler there is refused)' },
  { key: 'dbPooler', env: 'EVORA_DB_POOLER', flag: '--db-pooler', default: 'auto', doc: 'auto: detect a pooler on DATABASE_URL (or assume one when EVORA_DIRECT_DATABASE_URL differs); transaction: one is there (no named prepared statements, no session settings; EVORA_CLAIM_ASYNC_COMMIT refused); none: PostgreSQL itself (or pgbouncer >= 1.21 with max_prepared_statements)' },
  { key: 'claimAsyncCommit', env: 'EVORA_CLAIM_ASYNC_COMMIT', flag: '--claim-async-commit', default: '0', doc: '1: claims commit without waiting for the WAL flush (faster; after a PostgreSQL crash a job claimed just before may run twice, its attempt uncounted); 0: off' },
  { key: 'pollIntervalMs', env: 'EVORA_POLL_INTERVAL_MS', flag: '--poll-interval-ms', default: '1000', doc: 'fallback poll for queues with idle workers; also when scheduled jobs come due, and when a held lease expires (the worker is told lease_lost)', range: INTERVAL_RANGE },
  { key: 'sweepIntervalMs', env: 'EVORA_SWEEP_INTERVAL_MS', flag: '--sweep-interval-ms', default: '1000', doc: 'how often the leader requeues expired leases', range: INTERVAL_RANGE },
  { key: 'electionIntervalMs', env: 'EVORA_ELECTION_INTERVAL_MS', flag: '--election-interval-ms', default: '5000', doc: 'how often a follower tries to become leader', range: INTERVAL_RANGE },
  { key: 'maxPayloadBytes', env: 'EVORA_MAX_PAYLOAD_BYTES', flag: '--max-payload-bytes', default: '1048576', doc: 'largest job payload or result (JSON bytes)', range: [16, 2 ** 30] },
  { key: 'maxMessageBytes', env: 'EVORA_MAX_MESSAGE_BYTES', flag: '--max-message-bytes', default: '4194304', doc: 'largest gRPC message the server receives (what it sends has no limit)', range: [1024, TIMER_MAX_MS] },
  { key: 'mongodbUrl', env: 'MONGODB_URL', flag: '--mongodb-url', default: '', doc: 'MongoDB for telemetry; unset: keep telemetry in PostgreSQL tables' },
  { key: 'projectIntervalMs', env: 'EVORA_PROJECT_INTERVAL_MS', flag: '--project-interval-ms', default: '1000', doc: 'how often the leader projects job events into telemetry (the stats lag bound)', range: INTERVAL_RANGE },
  { key: 'httpPort', env: 'EVORA_HTTP_PORT', flag: '--http-port', default: '8080', doc: 'HTTP port on the gRPC host: the JSON API (/v1), the dashboard (/), /healthz, /readyz, /metrics, /openapi.json; same TLS and tokens as gRPC; 0: off', range: [0, 65_535] },
  { key: 'metricsPort', env: 'EVORA_METRICS_PORT', flag: '--metrics-port', default: '0', doc: 'a separate HTTP port for /metrics (Prometheus) and /healthz only, e.g. 9464 (the HTTP port serves both too); 0: off', range: [0, 65_535] },
  { key: 'metricsOpen', env: 'EVORA_METRICS_OPEN', flag: '--metrics-open', default: '0', doc: '1: /metrics on the HTTP port needs no token while auth is on; 0: it needs a valid token of any role (the metrics port never does)' },
  { key: 'pruneIntervalMs', env: 'EVORA_PRUNE_INTERVAL_MS', flag: '--prune-interval-ms', default: '60000', doc: "how often the leader deletes finished jobs past their queue's retention (set per queue, docs/api.md)", range: INTERVAL_RANGE },
  { key: 'pruneBatchSize', env: 'EVORA_PRUNE_BATCH_SIZE', flag: '--prune-batch-size', default: '1000', doc: 'finished jobs (or audit events) deleted per pruner statement (each a short transaction of its own)', range: [1, 100_000] },
  { key: 'auditRetentionDays', env: 'EVORA_AUDIT_RETENTION_DAYS', flag: '--audit-retention-days', default: '365', doc: 'the leader deletes audit events older than this many days (30 to 36500); 0: keep them forever', range: [0, AUDIT_RETENTION_MAX_DAYS] },
  { key: 'shutdownTimeoutMs', env: 'EVORA_SHUTDOWN_TIMEOUT_MS', flag: '--shutdown-timeout-ms', default: '10000', doc: 'on SIGTERM, how long to wait for in-flight work', range: [0, TIMER_MAX_MS] },
  { key: 'helloTimeoutMs', env: 'EVORA_HELLO_TIMEOUT_MS', flag: '--hello-timeout-ms', default: '30000', doc: 'a Work stream that sends no hello this long after it opens is ended (INVALID_ARGUMENT), so that streams a client opened and forgot hold no server memory', range: [100, TIMER_MAX_MS] },
  // TLS (docs/tls.md). The flags are not --tls-cert/--tls-key: those are the client commands' global options.
  { key: 'tlsCert', env: 'EVORA_TLS_CERT', flag: '--tls-server-cert', default: '', doc: "TLS on the gRPC port: the server's certificate chain (PEM file; needs EVORA_TLS_KEY); reloaded when it changes; unset: plaintext" },
  { key: 'tlsKey', env: 'EVORA_TLS_KEY', flag: '--tls-server-key', default: '', doc: "the private key (PEM file) of EVORA_TLS_CERT" },
  { key: 'tlsClientCa', env: 'EVORA_TLS_CLIENT_CA', flag: '--tls-client-ca', default: '', doc: 'mTLS: clients must present a certificate signed by this CA (PEM file; needs EVORA_TLS_CERT)' },
  { key: 'tlsReloadIntervalMs', env: 'EVORA_TLS_RELOAD_INTERVAL_MS', flag: '--tls-reload-interval-ms', default: '5000', doc: 'how often the TLS files are read again; a valid change applies to new connections without a restart', range: [100, TIMER_MAX_MS] },
  // Auth (docs/security.md "API tokens"). The bootstrap secret has no flag: argv is visible to every user.
  { key: 'bootstrapAdminToken', env: 'EVORA_BOOTSTRAP_ADMIN_TOKEN', flag: '', default: '', doc: 'an admin token secret (32 to 512 characters) created or kept at startup: auth is on from the first start; environment only' },
  { key: 'insecureNoAuth', env: 'EVORA_INSECURE_NO_AUTH', flag: '--insecure-no-auth', default: '0', doc: '1: serve without auth on a non-loopback address while no token exists (refused otherwise); 0: off' },
  { key: 'reflection', env: 'EVORA_REFLECTION', flag: '--reflection', default: '1', doc: '1: gRPC server reflection on (no token needed); 0: off' },
  { key: 'authRefreshMs', env: 'EVORA_AUTH_REFRESH_MS', flag: '--auth-refresh-ms', default: '2000', doc: 'how often each server reads the token table again (100 to 4000; a change is also seen at once through NOTIFY)' },
];

/** Settings that are 0 or 1. */
/** The 0/1 settings (their `serve` flags may also stand alone, meaning 1). */
export const CONFIG_BOOLEAN_KEYS: ReadonlySet<keyof ServerConfig> = new Set(['claimAsyncCommit', 'insecureNoAuth', 'reflection', 'metricsOpen']);

/** The schemes pg reads as a PostgreSQL URL (`socket:` is its Unix-socket form). */
const DATABASE_URL_SCHEMES: readonly string[] = ['postgres', 'postgresql', 'socket'];

/**
 * Returns `value` if pg reads it as the PostgreSQL it names: a postgres:// or postgresql://
 * URL, pg's socket: URL, or a Unix socket folder (a path starting with /). Anything else pg
 * would misread without a word: `localhost:5432` connects to the database "432" on localhost,
 * a mysql:// URL to PostgreSQL at its host and port, `not-a-url` to a host named "base"
 * (getaddrinfo ENOTFOUND base), so it is refused with one line naming `setting`, as is a URL
 * pg cannot parse (its error is a bare "Invalid URL"). The URL is parsed by pg's own parser,
 * pg-connection-string. The value itself is never repeated: it may hold a password.
 */
export function databaseUrlCheck(value: string, setting: string): string {
  if (value.startsWith('/')) return value;
  const refused = (why: string) => new Error(`${setting} must be a PostgreSQL URL such as postgres://user:password@host:5432/database; ${why}`);
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(value)?.[1]?.toLowerCase();
  if (scheme === undefined) throw refused('the value given does not start with postgres://');
  if (!DATABASE_URL_SCHEMES.includes(scheme)) throw refused(`the value given starts with "${scheme}:", not postgres:// or postgresql://`);
  try {
    connectionStringParse(value);
  } catch {
    throw refused('the value given is not a valid URL (is the port a number? are special characters in the password percent-encoded?)');
  }
  return value;
}

/** Room a submit or a report needs besides its payload or result: names, keys, ids, times. */
const MESSAGE_ROOM_BYTES = 64 * 1024;

/**
 * The start warning for limits that contradict each other, else null: a payload limit
 * (EVORA_MAX_PAYLOAD_BYTES) that leaves less than 64 KiB of the message limit
 * (EVORA_MAX_MESSAGE_BYTES) for the rest of a message. Payloads and results near it then
 * meet gRPC's message limit first (RESOURCE_EXHAUSTED, which on the Work stream ends the
 * stream) instead of the payload limit's INVALID_ARGUMENT naming the field. A warning,
 * not a refusal: such a server still works for the sizes it can take.
 */
export function limitsWarning(config: Pick<ServerConfig, 'maxPayloadBytes' | 'maxMessageBytes'>): string | null {
  if (config.maxPayloadBytes + MESSAGE_ROOM_BYTES <= config.maxMessageBytes) return null;
  return `EVORA_MAX_PAYLOAD_BYTES (${config.maxPayloadBytes}) leaves less than 64 KiB of EVORA_MAX_MESSAGE_BYTES (${config.maxMessageBytes}) for the rest of a message: payloads and results near the payload limit are refused by the message limit (RESOURCE_EXHAUSTED) instead; raise EVORA_MAX_MESSAGE_BYTES to at least ${config.maxPayloadBytes + MESSAGE_ROOM_BYTES}`;
}

/**
 * Builds the configuration from (in order of precedence) explicit overrides such as CLI
 * flags, then the environment, then defaults. Refuses malformed numbers with one line.
 */
export function configLoad(overrides: Partial<Record<keyof ServerConfig, string | undefined>> = {}, env = process.env): ServerConfig {
  const raw = (e: ConfigEntry): string => overrides[e.key] ?? env[e.env] ?? e.default;
  const out: Record<string, unknown> = {};
  for (const e of CONFIG_DOC) {
    const value = raw(e);
    if (e.key === 'databaseUrl' || e.key === 'directDatabaseUrl') {
      // An empty flag is a variable that was not set (`--database-url "$PROD_URL"`), not a
      // choice of the embedded PostgreSQL: taken as unset, `evora migrate` migrated a new
      // one in ./.evora and said `applied migrations 1, ...`, exit 0.
      if (overrides[e.key] === '') throw new Error(`${e.flag} was given an empty value: give a PostgreSQL URL, or leave the flag out (then ${e.env} is used, and without it ${e.key === 'databaseUrl' ? 'the embedded PostgreSQL' : 'DATABASE_URL'})`);
      out[e.key] = value ? databaseUrlCheck(value, `${e.env} (${e.flag})`) : null;
    }
    else if (e.key === 'mongodbUrl' || e.key === 'tlsCert' || e.key === 'tlsKey' || e.key === 'tlsClientCa') out[e.key] = value || null;
    else if (e.key === 'bootstrapAdminToken') out[e.key] = value ? checkBootstrapSecret(value) : null;
    else if (e.key === 'dbPooler') {
      if (!(DB_POOLER_VALUES as readonly string[]).includes(value)) throw new Error(`${e.env} (${e.flag}) must be ${DB_POOLER_VALUES.join(', ')}, got "${value}"`);
      out[e.key] = value;
    }
    else if (e.key === 'logLevel') {
      if (!LOG_LEVELS.includes(value)) throw new Error(`${e.env} (${e.flag}) must be one of ${LOG_LEVELS.join(', ')}, got "${value}"`);
      out[e.key] = value;
    }
    else if (e.key === 'logPretty') {
      if (!['', '0', '1', 'true', 'false'].includes(value)) throw new Error(`${e.env} (${e.flag}) must be 0 or 1 (or unset), got "${value}"`);
      out[e.key] = value === '' ? undefined : value === '1' || value === 'true';
    }
    else if (CONFIG_BOOLEAN_KEYS.has(e.key)) {
      if (!['0', '1', 'true', 'false'].includes(value)) throw new Error(`${e.env} (${e.flag}) must be 0 or 1, got "${value}"`);
      out[e.key] = value === '1' || value === 'true';
    }
    else if (/^\d+$/.test(e.default)) {
      if (!/^\d+$/.test(value)) throw new Error(`${e.env} (${e.flag}) must be a whole number, got "${value}"`);
      const n = Number(value);
      if (e.range && (n < e.range[0] || n > e.range[1])) throw new Error(`${e.env} (${e.flag}) must be from ${e.range[0]} to ${e.range[1]}, got ${value}`);
      out[e.key] = n;
    } else out[e.key] = value;
  }
  if ((out.authRefreshMs as number) < 100 || (out.authRefreshMs as number) > 4000) {
    throw new Error(`EVORA_AUTH_REFRESH_MS (--auth-refresh-ms) must be from 100 to 4000 (a revoked token must stop working within 5 s), got ${String(out.authRefreshMs)}`);
  }
  const auditDays = out.auditRetentionDays as number;
  if (auditDays !== 0 && auditDays < AUDIT_RETENTION_MIN_DAYS) {
    throw new Error(`EVORA_AUDIT_RETENTION_DAYS (--audit-retention-days) must be 0 (keep forever) or from ${AUDIT_RETENTION_MIN_DAYS} to ${AUDIT_RETENTION_MAX_DAYS} (the database keeps the last ${AUDIT_RETENTION_MIN_DAYS} days of the audit log in any case), got ${auditDays}`);
  }
  // TLS settings come together (the files themselves are read and checked when the server starts).
  if (Boolean(out.tlsCert) !== Boolean(out.tlsKey)) throw new Error('EVORA_TLS_CERT (--tls-server-cert) and EVORA_TLS_KEY (--tls-server-key) must be set together');
  if (out.tlsClientCa && !out.tlsCert) throw new Error('EVORA_TLS_CLIENT_CA (--tls-client-ca) needs EVORA_TLS_CERT and EVORA_TLS_KEY (mTLS runs over TLS)');
  return out as unknown as ServerConfig;
}

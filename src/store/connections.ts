import net from 'node:net';
import pg from 'pg';
import { rowOf, statement, type None } from './statements.js';

/**
 * How the store's pooled connections are made, and whether a connection pooler (pgbouncer in
 * transaction mode, or any pooler that shares server connections between its clients) may
 * sit between them and PostgreSQL. What must stay true for the pool to work through such a
 * pooler (docs/store.md, "Behind pgbouncer"):
 *
 * - No named prepared statements: a name lives on one server connection, and the pooler
 *   hands that connection to other clients ("prepared statement "evora_job_claim" already
 *   exists") or hands this client another one ("... does not exist"). With a pooler the
 *   store's clients send every statement unnamed (the extended protocol's unnamed
 *   statement, parsed and planned at each call, which lives only until the next one).
 * - No session state but what the pooler tracks itself. The sessions run in UTC with ISO
 *   dates (types.ts reads timestamps fast in that form, and pg's own parser reads no other
 *   DateStyle): `TimeZone` and `DateStyle` are sent as startup parameters of their own,
 *   which PostgreSQL takes as settings and pgbouncer (every version) tracks and sets on
 *   whichever server connection it assigns. Not as `options=-c TimeZone=UTC`, which
 *   pgbouncer before 1.20 refuses ("unsupported startup parameter: options"). A setting a
 *   pooler does not track (synchronous_commit, for asynchronous claim commits) is refused
 *   with a pooler (Store.open).
 * - LISTEN, the leader's session-level advisory lock and the migrations use their own
 *   connections to the direct URL (server.ts passes it), never this pool.
 */

/** Whether a pooler may sit on the store's database URL: find out, or be told. */
export type DbPooler = 'auto' | 'none' | 'transaction';

/**
 * The session settings every store connection starts with (startup parameters, see above).
 * DateStyle too: a database or role that sets another (`SQL, DMY`, `German`) made every
 * timestamp read back unparsed (null), and every call of the server failed INTERNAL
 * ("Error serializing response"), the projector with a TypeError.
 */
export const STORE_STARTUP_PARAMETERS: Readonly<Record<string, string>> = { TimeZone: 'UTC', DateStyle: 'ISO' };

/**
 * The session settings of store connections straight to PostgreSQL, on top of those: READ
 * COMMITTED, whatever default_transaction_isolation the database or role sets. The
 * statements are written for it (a claim counts a limited queue's RUNNING jobs, and updates
 * its bucket, after taking the queue's lock, which under REPEATABLE READ or SERIALIZABLE
 * read a snapshot taken before the lock): with a database default of serializable, three
 * servers under load answered submits INTERNAL and logged every failed claim and worker
 * write with a stack ("could not serialize access ..."). Not sent through a transaction
 * pooler, which refuses startup parameters it does not track (pgbouncer: "unsupported
 * startup parameter"), nor where PostgreSQL itself was not detected (EVORA_DB_POOLER=none
 * may be a pgbouncer that keeps prepared statements): there the database's default must be
 * READ COMMITTED (docs/store.md). Sent when PoolerDecision.postgresItself.
 */
export const DIRECT_STARTUP_PARAMETERS: Readonly<Record<string, string>> = { default_transaction_isolation: 'read committed' };

const sessionBackendPidSql = statement<None, { pid: number }>('session-backend-pid', {}, { pid: 'int4' });

/** pg.Client's internal hook that builds the startup message (pg 8); checked when this module loads. */
interface StartupConfHook {
  getStartupConf(this: pg.Client): Record<string, string>;
}
/** pg.Client's internals that tell whether a statement still runs on its backend (pg 8); checked when this module loads. */
interface ActiveQueryHook {
  _getActiveQuery(this: pg.Client): unknown;
}
const clientProto = pg.Client.prototype as unknown as Partial<StartupConfHook> & Partial<ActiveQueryHook> & { query: pg.Client['query'] };
const baseStartupConf = clientProto.getStartupConf;
if (typeof baseStartupConf !== 'function') {
  throw new Error('evora: pg.Client has no getStartupConf(): the store sends its session settings through it (pg 8); check the pg version');
}
const baseActiveQuery = clientProto._getActiveQuery;
if (typeof baseActiveQuery !== 'function') {
  throw new Error('evora: pg.Client has no _getActiveQuery(): the store cancels the statements it gives up through it (pg 8); check the pg version');
}
const baseQuery = clientProto.query;

/** A pg.Client class as a pool takes it (`Client` in pg.PoolConfig). */
export type StoreClientClass = new (config?: pg.ClientConfig) => pg.Client;

/**
 * The client class of the store's pools: sends `startupParameters` (setting name → value)
 * in its startup message, and, with `namedStatements` false, runs every statement unnamed
 * (a query config's `name` is dropped, so a declared prepared statement is parsed and
 * planned at each call instead of once per connection).
 * Must stay true: an 'error' a client emits never kills the process. pg emits one when its
 * backend ends (terminated, or the postmaster died) while no query runs on it. pg.Pool
 * listens while the client is idle and StorePool while it holds it, but not in between:
 * when one chunk from the socket holds a query's last message and then the FATAL of a dying
 * backend, the query's release hands the client to a waiting `pool.connect()` (the pool's
 * listener removed) whose caller only resumes in a later microtask, while pg parses the
 * FATAL at once. In the fault suite a postmaster kill took a server down so. Hence each
 * client listens from its creation and ignores the event: its owner finds the dead
 * connection all the same (a query on it fails and is classified as an outage; the pool
 * drops an idle one).
 * Must stay true too: a connection closed while its backend still runs a statement (the
 * pool gives a statement up after EVORA_DB_QUERY_TIMEOUT_MS and destroys its connection)
 * asks PostgreSQL to cancel that statement (backendCancel). Closing the socket alone does
 * not stop a backend that waits for a lock: it went on waiting, holding its connection
 * slot, while the pool opened a new connection for the next statement, which waited in
 * turn. Behind a `LOCK TABLE evora.jobs` held 40 s, one server with a 10-connection pool and
 * a 3 s query timeout filled a 60-connection PostgreSQL (`sorry, too many clients
 * already`, the DBA's psql included) within 15 s. The connection is closed only once the
 * cancel request is done (or CANCEL_TIMEOUT_MS): through pgbouncer a close sent first left
 * the request nothing to forward to.
 */
export function storeClientClass(opts: { namedStatements: boolean; startupParameters?: Readonly<Record<string, string>> }): StoreClientClass {
  const startup = { ...STORE_STARTUP_PARAMETERS, ...opts.startupParameters };
  class StoreClient extends pg.Client {
    constructor(config?: pg.ClientConfig) {
      super(config);
      this.on('error', ignoreClientError);
    }

    getStartupConf(): Record<string, string> {
      return { ...baseStartupConf!.call(this), ...startup };
    }

    override end(): Promise<void>;
    override end(callback: (err: Error) => void): void;
    override end(callback?: (err: Error) => void): Promise<void> | void {
      const self = this as unknown as { _queryable?: boolean; _ending?: boolean; processID: number | null; secretKey: number | null };
      if (self._queryable && !self._ending && self.processID !== null && self.secretKey !== null && baseActiveQuery!.call(this)) {
        // Closed once the cancel request is delivered: pgbouncer forwards a cancel only for a
        // client still connected, and a close sent at once got there first.
        const ended = backendCancel({ host: this.host, port: this.port, processID: self.processID, secretKey: self.secretKey }).then(() => super.end());
        if (!callback) return ended;
        ended.then(() => callback(undefined as unknown as Error), callback);
        return;
      }
      return callback ? super.end(callback) : super.end();
    }
  }
  if (!opts.namedStatements) {
    StoreClient.prototype.query = function query(this: pg.Client, config: unknown, ...rest: unknown[]) {
      return (baseQuery as (this: pg.Client, ...args: unknown[]) => unknown).call(this, unnamed(config), ...rest);
    } as pg.Client['query'];
  }
  return StoreClient;
}

/** How long a cancel request may take to be sent before its socket is dropped. */
const CANCEL_TIMEOUT_MS = 5_000;

/**
 * Asks PostgreSQL to cancel what the backend `processID` runs (the protocol's CancelRequest,
 * with the secret key the backend gave its connection), best effort: a failure is ignored (a
 * database that is away has nothing to cancel, or cannot be told), and the promise resolves
 * once the request's connection has closed (delivered, refused, or CANCEL_TIMEOUT_MS), never
 * rejects. A cancel request takes no connection slot and passes no authentication, so it
 * works when max_connections is reached. Sent without TLS, as PostgreSQL accepts it; through
 * pgbouncer it reaches the pooler, which forwards it to the server connection concerned only
 * while the client that statement came from is still connected: so the store closes that
 * connection after this resolves (with the close sent at once, every statement given up
 * through pgbouncer stayed waiting in PostgreSQL, one more per timeout).
 * Written here rather than through pg.Client#cancel (pg 8), which sends the same 16 bytes
 * but on a connection with no 'error' listener, no timeout and a referenced socket: a
 * database that refused or dropped the cancel's connection would throw an unhandled
 * 'error' event and take the server down, and one that never answered would hold the
 * process open.
 */
function backendCancel(target: { host: string; port: number; processID: number; secretKey: number }): Promise<void> {
  const packet = Buffer.alloc(16);
  packet.writeInt32BE(16, 0);
  packet.writeInt32BE(80_877_102, 4); // CancelRequest's code: 1234 << 16 | 5678
  packet.writeInt32BE(target.processID, 8);
  packet.writeInt32BE(target.secretKey, 12);
  const socket = target.host.startsWith('/')
    ? net.connect({ path: `${target.host}/.s.PGSQL.${target.port}` })
    : net.connect({ host: target.host, port: target.port });
  socket.unref();
  socket.setTimeout(CANCEL_TIMEOUT_MS, () => socket.destroy());
  socket.on('error', () => socket.destroy());
  // Written, not ended: the peer closes the connection once the request is done. pgbouncer
  // forwards it on a connection of its own and drops that when this one ends first.
  socket.on('connect', () => socket.write(packet));
  return new Promise((resolve) => socket.once('close', () => resolve()));
}

/** Every store client's own 'error' listener; see storeClientClass. */
function ignoreClientError(): void {}

/** A query config without its statement name (anything else unchanged). */
function unnamed(config: unknown): unknown {
  if (typeof config !== 'object' || config === null || !('name' in config) || (config as pg.QueryConfig).name === undefined) return config;
  const { name: _name, ...rest } = config as pg.QueryConfig;
  return rest;
}

/**
 * Whether a pooler answers on `connectionString`: PostgreSQL tells a new connection its
 * backend's process id (BackendKeyData) and a pooler makes up its own key for each client
 * (pgbouncer: random), so the id told differs from pg_backend_pid(). Any pooler that shares
 * server connections must make up keys, since a client's server changes; one that does
 * not share them (session mode) is detected too, and then runs unnamed statements it
 * would not need to: slower, never wrong.
 */
export async function poolerDetect(connectionString: string, opts: { connectionTimeoutMillis?: number } = {}): Promise<boolean> {
  const Client = storeClientClass({ namedStatements: false });
  const client = new Client({ connectionString, application_name: 'evora-probe', connectionTimeoutMillis: opts.connectionTimeoutMillis });
  client.on('error', () => undefined); // reported by connect() or the query
  await client.connect();
  try {
    const row = await rowOf(client, sessionBackendPidSql, {});
    const told = (client as unknown as { processID: number | null }).processID;
    return row?.pid !== told;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** What the store was told or found about a pooler, and why (for the log). */
export interface PoolerDecision {
  pooled: boolean;
  reason: string;
  /**
   * The URL was found to reach PostgreSQL itself (detected, not configured: `none` may be a
   * pgbouncer that keeps prepared statements), so the store may send startup parameters
   * that a pooler refuses (DIRECT_STARTUP_PARAMETERS).
   */
  postgresItself: boolean;
}

/**
 * Decides whether the store's pool treats its database URL as a pooler's: `none` and
 * `transaction` say so; `auto` assumes a pooler when a direct URL other than the database
 * URL is given (why else give one), else asks the server (poolerDetect).
 */
export async function poolerDecide(opts: {
  pooler: DbPooler;
  connectionString: string;
  directConnectionString?: string | null;
}): Promise<PoolerDecision> {
  if (opts.pooler === 'none') return { pooled: false, reason: 'configured: no pooler', postgresItself: false };
  if (opts.pooler === 'transaction') return { pooled: true, reason: 'configured: a transaction pooler', postgresItself: false };
  if (opts.directConnectionString && opts.directConnectionString !== opts.connectionString) {
    return { pooled: true, reason: 'a direct database URL other than the database URL is set', postgresItself: false };
  }
  return (await poolerDetect(opts.connectionString))
    ? { pooled: true, reason: 'detected: the backend key the server sent is not its backend pid', postgresItself: false }
    : { pooled: false, reason: 'detected: PostgreSQL itself', postgresItself: true };
}

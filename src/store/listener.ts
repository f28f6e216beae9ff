import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import type { DatabaseAvailability } from './availability.js';
import { abortRace } from '../domain/abort.js';
import { healthCheck } from './health.js';
import { rowsOf, statement, type None } from './statements.js';

const listenerSessionIdleTimeoutSql = statement<None, { value: string }>('listener-session-idle-timeout', {}, { value: 'text' });

/** A notification as the listener hands it on. */
export interface Notification {
  channel: string;
  payload: string;
}

/** Options for NotificationListener. */
export interface NotificationListenerOptions {
  connectionString: string;
  channels: string[];
  onNotification: (n: Notification) => void;
  /**
   * Called after every (re)connection: notifications sent while the connection was down
   * are lost, so the receiver should look for work as if it had been told.
   */
  onConnected?: () => void;
  /** Told of a failure that is not an outage (outages go to `availability`, when given). */
  onError?: (err: Error) => void;
  /**
   * The store's outage tracker: a connection that cannot be made or is cut because the
   * database is unavailable is reported there (logged once per outage, not once per
   * reconnect attempt), and a successful (re)connection ends an outage.
   */
  availability?: DatabaseAvailability;
  /** Delay before reconnecting after the connection drops. */
  reconnectDelayMs?: number;
}

/**
 * One LISTEN connection per server process. It holds a dedicated client outside the pool
 * (a LISTEN session must stay on one connection) and reconnects by itself until stopped.
 */
export class NotificationListener {
  private client: pg.Client | null = null;
  private controller: AbortController | null = null;
  private loop: Promise<void> | null = null;

  constructor(private readonly options: NotificationListenerOptions) {}

  /** Starts listening; resolves once the first connection is listening. Safe to call twice. */
  async start(): Promise<void> {
    if (this.controller) return;
    this.controller = new AbortController();
    const signal = this.controller.signal;
    let firstConnected!: () => void;
    const first = new Promise<void>((resolve) => (firstConnected = resolve));
    this.loop = this.run(signal, firstConnected);
    await Promise.race([first, this.loop]);
  }

  /** Stops listening and closes the connection. Safe to call twice. */
  async stop(): Promise<void> {
    if (!this.controller) return;
    this.controller.abort();
    // A connect that stalls (a proxy that accepts and never answers) does not settle on end():
    // the socket is cut first, and the connect timeout bounds the rest.
    this.client?.connection.stream.destroy();
    await this.client?.end().catch(() => undefined);
    await this.loop;
    this.controller = null;
    this.loop = null;
  }

  private async run(signal: AbortSignal, firstConnected: () => void): Promise<void> {
    const delay = this.options.reconnectDelayMs ?? 1000;
    while (!signal.aborted) {
      const client = new pg.Client({
        connectionString: this.options.connectionString,
        application_name: 'evora-listener',
        connectionTimeoutMillis: LISTENER_CONNECT_TIMEOUT_MS,
        keepAlive: true,
      });
      this.client = client;
      let started = this.options.availability?.mark() ?? 0;
      const failed = (err: Error) => {
        if (signal.aborted) return;
        if (!this.options.availability?.failure(err, started)) this.options.onError?.(err);
      };
      // The client has this listener for as long as it exists: an 'error' without one
      // would kill the process.
      const closed = new Promise<void>((resolve) => {
        client.on('error', (err) => {
          failed(err);
          resolve();
        });
        client.on('end', () => resolve());
      });
      try {
        await client.connect();
        // Best effort: PostgreSQL before 14 has no idle_session_timeout (nothing to turn off).
        await rowsOf(client, listenerSessionIdleTimeoutSql, {}).catch(() => undefined);
        client.on('notification', (msg) => {
          this.options.onNotification({ channel: msg.channel, payload: msg.payload ?? '' });
        });
        for (const channel of this.options.channels) {
          await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
        }
        this.options.availability?.success(started);
        started = this.options.availability?.mark() ?? 0; // a later loss is a new failure
        firstConnected();
        this.options.onConnected?.();
        // A LISTEN session only reads, so a connection that died without a reset would go
        // unnoticed: a probe every LISTENER_PROBE_MS that does not answer in time cuts it,
        // and the loop connects again.
        const probe = setInterval(() => {
          abortRace(healthCheck(client), AbortSignal.timeout(LISTENER_PROBE_TIMEOUT_MS), () => new Error('no answer')).catch(() =>
            client.connection.stream.destroy(),
          );
        }, LISTENER_PROBE_MS);
        probe.unref();
        try {
          await closed;
        } finally {
          clearInterval(probe);
        }
      } catch (err) {
        failed(err as Error);
      } finally {
        await client.end().catch(() => undefined);
      }
      if (!signal.aborted) await sleep(delay, signal);
    }
  }
}

/** How long connecting the LISTEN connection may take before the attempt fails (and is retried). */
const LISTENER_CONNECT_TIMEOUT_MS = 10_000;
/** How often the LISTEN connection is probed, and how long a probe may take. */
const LISTENER_PROBE_MS = 30_000;
const LISTENER_PROBE_TIMEOUT_MS = 10_000;

/** Resolves after `ms`, or at once when `signal` aborts (Node's timer; never rejects on abort). */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).catch((err: unknown) => {
    if (!signal.aborted) throw err;
  });
}

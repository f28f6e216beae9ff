import {
  ANONYMOUS,
  bearerSecret,
  tokenPrincipal,
  tokenRefusal,
  TokenRefusedError,
  tokenSecretHash,
  type ApiToken,
  type Principal,
} from '../domain/auth.js';
import { isUnavailable, unauthenticated, unavailable } from '../domain/errors.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';

/**
 * Authentication without a database round trip per call: every server holds the whole
 * token table in memory (a few hundred rows at most), keyed by the secret's SHA-256, and
 * reads it again every `refreshMs` (2 s by default) and at once when told (the server wires
 * NOTIFY evora_tokens_changed to refresh()). A call with a hash this server does not know
 * reads the table once more before it is refused (single-flight, at most one such read
 * every UNKNOWN_REFRESH_MIN_MS), so a token just made on another server works at once.
 *
 * What must stay true (docs/security.md "API tokens"):
 * - a revoked or expired token stops working within 5 s on every server: revocation is seen
 *   at the next refresh (<= 2 s, or at once through NOTIFY); expiry is checked on every call
 *   against this process's clock; open streams and long-polls hear it through
 *   onPrincipalInvalidated, and an anonymous caller's hear that auth turned on;
 * - fail closed: with auth on, once the last successful read is older than STALE_AFTER_MS
 *   (the database is unreachable), calls are answered UNAVAILABLE instead of trusting the
 *   cache;
 * - auth is on while the table has any row (revoked ones too), or when a bootstrap secret
 *   is configured; with auth off every call is ANONYMOUS and a token sent anyway is ignored;
 * - once on, auth stays on in this process: a table emptied while the server runs (rows
 *   deleted by hand, a restore) refuses every call UNAUTHENTICATED instead of serving
 *   anyone as an admin; a restart applies the start-up rule (src/server/auth-start.ts);
 * - nothing here logs or returns a secret or a header.
 */

/** After this long without a successful read of the table, calls are refused UNAVAILABLE. */
export const STALE_AFTER_MS = 5000;
/** The fewest milliseconds between two reads triggered by unknown tokens. */
export const UNKNOWN_REFRESH_MIN_MS = 250;
/** Default interval of the periodic read. */
export const DEFAULT_REFRESH_MS = 2000;

/** What an Authenticator reads and where it logs. */
export interface AuthenticatorOptions {
  store: Pick<Store, 'tokenAuthList'>;
  logger: Logger;
  /** Interval of the periodic read of the table (default 2000). */
  refreshMs?: number;
  /** A bootstrap secret is configured: auth is on even before its token is read. */
  bootstrapConfigured?: boolean;
}

type CachedToken = ApiToken & { secretHash: Buffer };

/** The token cache and the check every API call runs first; see the module comment. */
export class Authenticator {
  private byHash = new Map<string, CachedToken>();
  private byId = new Map<string, CachedToken>();
  /** Date.now() of the last successful read; 0: none yet. */
  private lastSuccess = 0;
  /** A read found a row (or the bootstrap is configured): auth never turns off again. */
  private latchedOn = false;
  private inFlight: Promise<void> | null = null;
  /** When the last read triggered by an unknown token started. */
  private lastUnknownRefresh = 0;
  /** The next read for unknown tokens, shared by every call that waits for it. */
  private unknownRead: Promise<void> | null = null;
  private readonly listeners = new Map<string, Set<() => void>>();
  /** Anonymous callers' streams and long-polls, told when auth turns on. */
  private readonly authOnListeners = new Set<() => void>();
  private readonly expiryTimers = new Map<string, NodeJS.Timeout>();
  private interval: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly refreshMs: number;

  constructor(private readonly options: AuthenticatorOptions) {
    this.refreshMs = options.refreshMs ?? DEFAULT_REFRESH_MS;
  }

  /**
   * Reads the table (rejects when it cannot: the server must not start unsure whether auth
   * is on), then keeps reading it every refreshMs until stop() or `signal` aborts.
   */
  async start(signal?: AbortSignal): Promise<void> {
    await this.read();
    if (this.stopped) return;
    this.interval = setInterval(() => void this.refresh().catch(() => undefined), this.refreshMs);
    this.interval.unref();
    signal?.addEventListener('abort', () => this.stop(), { once: true });
  }

  /** Stops the periodic read and every expiry timer. Safe to call twice. */
  stop(): void {
    this.stopped = true;
    if (this.interval) clearInterval(this.interval);
    this.interval = null;
    for (const t of this.expiryTimers.values()) clearTimeout(t);
    this.expiryTimers.clear();
    this.listeners.clear();
    this.authOnListeners.clear();
  }

  /** Whether calls need a token: the table has (or had, since this process started) a row, or a bootstrap secret is configured. */
  get authOn(): boolean {
    return this.latchedOn || this.byHash.size > 0 || this.options.bootstrapConfigured === true;
  }

  /**
   * Reads the table now; concurrent calls share one read. Failures are logged at debug for
   * an outage (the store's availability tracker logs those once) and at warn otherwise, and
   * rethrown.
   */
  refresh(): Promise<void> {
    if (!this.inFlight) {
      this.inFlight = this.read().finally(() => {
        this.inFlight = null;
      });
    }
    return this.inFlight;
  }

  /**
   * The principal of a call, from its `authorization` header, with no database round trip.
   * Throws UNAUTHENTICATED (no, malformed, unknown, expired or revoked token) or UNAVAILABLE
   * (auth on and the cache is stale). Messages name the token, never its secret.
   */
  authenticate(authorizationHeader: string | undefined, now = new Date()): Principal {
    const found = this.lookup(authorizationHeader, now);
    if (found === ANONYMOUS) return ANONYMOUS;
    if (!found) throw unauthenticated('the token is not known to this server (it may have been deleted, or be mistyped)');
    return found;
  }

  /**
   * As authenticate, but a hash this server does not know first triggers a read of the
   * table (single-flight, at most one every 250 ms whatever the call rate), so a token just
   * made on another server works at once. Resolves without waiting when the hash is known.
   */
  async authenticateAsync(authorizationHeader: string | undefined, now = new Date()): Promise<Principal> {
    const found = this.lookup(authorizationHeader, now);
    if (found) return found;
    await this.readForUnknown();
    return this.authenticate(authorizationHeader, new Date());
  }

  /**
   * A read of the table that starts after this call (so it sees a token committed before
   * the call came), shared by every call waiting meanwhile, and at most one every
   * UNKNOWN_REFRESH_MIN_MS: a flood of unknown tokens costs the database 4 reads a second.
   */
  private readForUnknown(): Promise<void> {
    if (!this.unknownRead) {
      const wait = Math.max(0, this.lastUnknownRefresh + UNKNOWN_REFRESH_MIN_MS - Date.now());
      this.unknownRead = new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          // Later callers wait for the next read: this one may start before their token.
          this.unknownRead = null;
          this.lastUnknownRefresh = Date.now();
          this.read().then(resolve, () => resolve());
        }, wait);
        timer.unref();
      });
    }
    return this.unknownRead;
  }

  /**
   * Calls `fn` once when the token stops working: a refresh finds it revoked (or gone), or
   * its expiry passes. Returns the unsubscribe function. An open Work stream uses it to end.
   */
  onInvalidated(tokenId: string, fn: () => void): () => void {
    let set = this.listeners.get(tokenId);
    if (!set) this.listeners.set(tokenId, (set = new Set()));
    set.add(fn);
    this.expiryArm(tokenId);
    return () => {
      const s = this.listeners.get(tokenId);
      s?.delete(fn);
      if (s && s.size === 0) {
        this.listeners.delete(tokenId);
        const t = this.expiryTimers.get(tokenId);
        if (t) clearTimeout(t);
        this.expiryTimers.delete(tokenId);
      }
    };
  }

  /**
   * Calls `fn` once, with one readable line, when `principal` stops being accepted: a
   * token's when it is revoked or expires (onInvalidated), the anonymous caller's when auth
   * turns on (the first token was made, on any server: from then on every call needs one).
   * A database principal never is. Returns the unsubscribe function. Open streams and
   * long-polls use it, so that nothing keeps serving a caller a new call would refuse.
   */
  onPrincipalInvalidated(principal: Principal, fn: (reason: string) => void): () => void {
    if (principal.tokenId) {
      const name = principal.name;
      return this.onInvalidated(principal.tokenId, () => fn(`token "${name}" was revoked or has expired`));
    }
    if (principal.kind !== 'anonymous') return () => undefined;
    const listener = () => fn('a token is now required: auth was turned on');
    if (this.authOn) {
      // On since the call was let in: it is refused as a new call would be.
      queueMicrotask(listener);
      return () => undefined;
    }
    this.authOnListeners.add(listener);
    return () => void this.authOnListeners.delete(listener);
  }

  /**
   * The principal of a header, or null for a well-formed secret whose hash is unknown.
   * Throws what authenticate throws, but for the unknown hash.
   */
  private lookup(header: string | undefined, now: Date): Principal | null {
    if (!this.authOn) {
      // Fail closed on a stale cache only when auth is on: with it off, a database that
      // cannot be read fails the call anyway, and refresh() catches up when it returns.
      return ANONYMOUS;
    }
    if (Date.now() - this.lastSuccess > STALE_AFTER_MS) {
      throw unavailable('cannot check tokens: the database is unreachable');
    }
    const secret = bearerSecret(header);
    const token = this.byHash.get(tokenSecretHash(secret).toString('hex'));
    if (!token) return null;
    const refusal = tokenRefusal(token, now);
    if (refusal) throw new TokenRefusedError(refusal, token.id, token.name);
    return tokenPrincipal(token);
  }

  private async read(): Promise<void> {
    let rows: CachedToken[];
    try {
      rows = await this.options.store.tokenAuthList();
    } catch (err) {
      this.options.logger[isUnavailable(err) ? 'debug' : 'warn']({ err }, 'cannot read the API tokens');
      throw err;
    }
    const wasOn = this.authOn;
    const byHash = new Map<string, CachedToken>();
    const byId = new Map<string, CachedToken>();
    for (const t of rows) {
      byHash.set(t.secretHash.toString('hex'), t);
      byId.set(t.id, t);
    }
    this.byHash = byHash;
    this.byId = byId;
    this.lastSuccess = Date.now();
    if (this.authOn) this.latchedOn = true;
    // Subscribed tokens revoked, deleted or expired since: tell their listeners.
    for (const id of [...this.listeners.keys()]) {
      const t = byId.get(id);
      if (!t || tokenRefusal(t, new Date())) this.invalidated(id);
      else this.expiryArm(id);
    }
    if (!wasOn && this.authOn) {
      const anonymous = [...this.authOnListeners];
      this.authOnListeners.clear();
      this.tell(anonymous, null);
    }
  }

  /** Arms (or re-arms) the expiry timer of a subscribed token. */
  private expiryArm(tokenId: string): void {
    const old = this.expiryTimers.get(tokenId);
    if (old) clearTimeout(old);
    this.expiryTimers.delete(tokenId);
    const t = this.byId.get(tokenId);
    if (!t || this.stopped) return;
    if (tokenRefusal(t, new Date())) {
      queueMicrotask(() => this.invalidated(tokenId));
      return;
    }
    if (!t.expiresAt) return;
    // setTimeout takes at most about 24.8 days; a later expiry is re-armed by a refresh.
    const ms = Math.min(t.expiresAt.getTime() - Date.now(), 2 ** 31 - 1);
    const timer = setTimeout(() => {
      this.expiryTimers.delete(tokenId);
      const now = this.byId.get(tokenId);
      if (!now || tokenRefusal(now, new Date())) this.invalidated(tokenId);
      else this.expiryArm(tokenId);
    }, Math.max(0, ms));
    timer.unref();
    this.expiryTimers.set(tokenId, timer);
  }

  /** Tells (once) every listener of a token that stopped working, and forgets them. */
  private invalidated(tokenId: string): void {
    const set = this.listeners.get(tokenId);
    if (!set) return;
    this.listeners.delete(tokenId);
    const timer = this.expiryTimers.get(tokenId);
    if (timer) clearTimeout(timer);
    this.expiryTimers.delete(tokenId);
    this.tell(set, tokenId);
  }

  /** Calls each listener; one that throws is logged and does not stop the others. */
  private tell(fns: Iterable<() => void>, tokenId: string | null): void {
    for (const fn of fns) {
      try {
        fn();
      } catch (err) {
        this.options.logger.error({ err, token_id: tokenId }, 'a token invalidation listener failed');
      }
    }
  }
}

import { afterAll, describe, expect, it } from 'vitest';
import { Authenticator } from '../../src/auth/authenticator.js';
import { ANONYMOUS, tokenSecretHash } from '../../src/domain/auth.js';
import { EvoraError } from '../../src/domain/errors.js';
import { silentLogger } from '../../src/logger.js';
import { Store } from '../../src/store/store.js';
import { storeSetup } from '../helpers/store-setup.js';
import { tokenInsert } from '../helpers/tokens.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The token cache over a real database: two Authenticators on one database stand for two
 * servers. Refreshes are left to the timers and to refresh() (what NOTIFY triggers in a
 * server); waits are bounded by the documented 5 s.
 */

const { store, url, sql } = await storeSetup();
/** A second server's store on the same database. */
const store2 = new Store({ connectionString: url, maxConnections: 2 });
const started: Authenticator[] = [];
afterAll(async () => {
  for (const a of started) a.stop();
  await store2.close();
});

async function authenticator(s: Store, opts: { refreshMs?: number; bootstrapConfigured?: boolean } = {}): Promise<Authenticator> {
  const a = new Authenticator({ store: s, logger: silentLogger(), refreshMs: opts.refreshMs ?? 2000, bootstrapConfigured: opts.bootstrapConfigured });
  started.push(a);
  await a.start();
  return a;
}

/** The error code `fn` throws, or 'OK'. */
async function codeOf(fn: () => unknown): Promise<string> {
  try {
    await fn();
    return 'OK';
  } catch (err) {
    if (err instanceof EvoraError) return err.code;
    throw err;
  }
}

describe('Authenticator', () => {
  it('with no token, auth is off: every call is anonymous and a token sent anyway is ignored', async () => {
    const a = await authenticator(store);
    expect(a.authOn).toBe(false);
    expect(a.authenticate(undefined)).toBe(ANONYMOUS);
    expect(a.authenticate('Bearer whatever')).toBe(ANONYMOUS);
  });

  it('a bootstrap secret configured turns auth on before any row exists', async () => {
    const a = await authenticator(store, { bootstrapConfigured: true });
    expect(a.authOn).toBe(true);
    expect(await codeOf(() => a.authenticate(undefined))).toBe('UNAUTHENTICATED');
  });

  it('a token made on another server works at once on an unknown-hash read; revocation and expiry reach both servers within 5 s', async () => {
    await tokenInsert(url, { role: 'admin' }); // auth on from the start on both
    const a = await authenticator(store);
    const b = await authenticator(store2);
    const t = await tokenInsert(url, { role: 'producer', queues: ['billing.*'] });
    // No refresh was asked for: the unknown hash makes each read the table once.
    const p = await a.authenticateAsync(`Bearer ${t.secret}`);
    expect(p).toMatchObject({ kind: 'token', tokenId: t.id, name: t.name, role: 'producer', queues: ['billing.*'] });
    expect((await b.authenticateAsync(`bearer ${t.secret}`)).tokenId).toBe(t.id);
    // The sync path now knows it: no round trip.
    expect(a.authenticate(`Bearer ${t.secret}`).tokenId).toBe(t.id);

    // Missing, malformed and unknown: UNAUTHENTICATED, never echoing what was sent.
    expect(await codeOf(() => a.authenticateAsync(undefined))).toBe('UNAUTHENTICATED');
    expect(await codeOf(() => a.authenticateAsync('Basic abc'))).toBe('UNAUTHENTICATED');
    const unknown = 'evora_' + 'x'.repeat(43);
    const err = await a.authenticateAsync(`Bearer ${unknown}`).catch((e: unknown) => e as Error);
    expect((err as EvoraError).code).toBe('UNAUTHENTICATED');
    expect((err as Error).message).not.toContain(unknown);

    // Revoked through the database: both caches see it by their periodic read (<= 2 s).
    const invalidated: string[] = [];
    const unsubscribe = b.onInvalidated(t.id, () => invalidated.push('b'));
    await sql.query(`UPDATE evora.api_tokens SET revoked_at = now() WHERE id = $1`, [t.id]);
    await waitFor(async () => (await codeOf(() => a.authenticate(`Bearer ${t.secret}`))) === 'UNAUTHENTICATED', { timeoutMs: 5000, what: 'revocation on server a' });
    await waitFor(async () => (await codeOf(() => b.authenticate(`Bearer ${t.secret}`))) === 'UNAUTHENTICATED', { timeoutMs: 5000, what: 'revocation on server b' });
    await waitFor(() => invalidated.length === 1, { timeoutMs: 5000, what: 'the invalidation listener' });
    unsubscribe();
    const refused = await a.authenticateAsync(`Bearer ${t.secret}`).catch((e: unknown) => e as Error);
    expect((refused as Error).message).toBe(`token "${t.name}" was revoked`);
  });

  it('expiry is checked per call against the clock, and fires the listener by a timer', async () => {
    const a = await authenticator(store);
    const expiresAt = new Date(Date.now() + 1500);
    const t = await tokenInsert(url, { role: 'worker', expiresAt });
    expect((await a.authenticateAsync(`Bearer ${t.secret}`)).expiresAt?.getTime()).toBe(expiresAt.getTime());
    expect(await codeOf(() => a.authenticate(`Bearer ${t.secret}`, new Date(expiresAt.getTime() + 1)))).toBe('UNAUTHENTICATED');
    let fired = 0;
    a.onInvalidated(t.id, () => fired++);
    await waitFor(() => fired === 1, { timeoutMs: 5000, what: 'the expiry timer' });
    expect(await codeOf(() => a.authenticate(`Bearer ${t.secret}`))).toBe('UNAUTHENTICATED');
  });

  it('fails closed: with auth on and the table unreadable for over 5 s, calls are UNAVAILABLE', async () => {
    const broken = new Store({ connectionString: url, maxConnections: 1 });
    const t = await tokenInsert(url, { role: 'admin' });
    const a = await authenticator(broken, { refreshMs: 100 });
    expect(a.authenticate(`Bearer ${t.secret}`).role).toBe('admin');
    await broken.close(); // every read fails from now on
    const err = await waitFor(
      async () => {
        const e = await a.authenticateAsync(`Bearer ${t.secret}`).then(() => null, (x: unknown) => x as EvoraError);
        return e?.code === 'UNAVAILABLE' ? e : null;
      },
      { timeoutMs: 8000, what: 'the stale cache to be refused' },
    );
    expect(err!.message).toBe('cannot check tokens: the database is unreachable');
  });

  it('unknown hashes trigger at most one read every 250 ms whatever the rate', async () => {
    let reads = 0;
    const counting = { tokenAuthList: async () => (reads++, store.tokenAuthList()) };
    const a = new Authenticator({ store: counting, logger: silentLogger(), refreshMs: 4000 });
    started.push(a);
    await a.start();
    await tokenInsert(url, { role: 'viewer' }); // auth on, whatever other tests did
    await a.refresh();
    const before = reads;
    const unknown = `Bearer evora_${'y'.repeat(43)}`;
    await Promise.all(Array.from({ length: 50 }, () => a.authenticateAsync(unknown).catch(() => undefined)));
    expect(reads - before).toBeLessThanOrEqual(1);
  });

  it('the store keeps the bootstrap token across restarts and names it apart from another "bootstrap"', async () => {
    const secret = 'B'.repeat(40);
    const first = await store.tokenBootstrapEnsure({ secretHash: tokenSecretHash(secret) });
    const again = await store2.tokenBootstrapEnsure({ secretHash: tokenSecretHash(secret) });
    expect(first.created).toBe(true);
    expect(again).toMatchObject({ created: false, token: { id: first.token.id } });
    expect(first.token).toMatchObject({ name: 'bootstrap', role: 'admin', queues: [], createdBy: '' });
    const other = await store.tokenBootstrapEnsure({ secretHash: tokenSecretHash('C'.repeat(40)) });
    expect(other.token.name).toBe(`bootstrap-${tokenSecretHash('C'.repeat(40)).toString('hex').slice(0, 8)}`);
    const { rows } = await sql.query(
      `SELECT actor_kind, token_name, action, target FROM evora.audit_events WHERE action = 'token.create' AND target = $1`,
      [first.token.id],
    );
    expect(rows).toEqual([{ actor_kind: 'database', token_name: 'bootstrap (EVORA_BOOTSTRAP_ADMIN_TOKEN)', action: 'token.create', target: first.token.id }]);
    // A revoked bootstrap token stays revoked.
    await sql.query(`UPDATE evora.api_tokens SET revoked_at = now() WHERE id = $1`, [first.token.id]);
    const revoked = await store.tokenBootstrapEnsure({ secretHash: tokenSecretHash(secret) });
    expect(revoked.created).toBe(false);
    expect(revoked.token.revokedAt).not.toBeNull();
  });
});

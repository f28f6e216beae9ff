import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { tokenSecretGenerate, tokenSecretHash } from '../../src/domain/auth.js';
import type { AuditActor } from '../../src/domain/audit.js';
import type { Store } from '../../src/store/store.js';
import { storeSetup } from '../helpers/store-setup.js';

/**
 * API tokens through the store (sql/token-create.sql, token-list.sql, token-revoke.sql):
 * each write with its audit event and its NOTIFY in one statement, a taken name, revoking
 * by id or name, and a revoked token revoked again.
 */

let store: Store;
let sql: pg.Pool;
let url: string;
beforeAll(async () => {
  ({ store, sql, url } = await storeSetup());
});

const T0 = new Date('2033-01-01T00:00:00Z');
const actor: AuditActor = { kind: 'database', tokenId: null, name: 'evora (ops)' };

async function eventsOn(target: string): Promise<{ action: string; token_name: string; change: Record<string, unknown> }[]> {
  return (await sql.query('SELECT action, token_name, change FROM evora.audit_events WHERE target = $1 ORDER BY id', [target])).rows;
}

describe('tokens', () => {
  it('create writes the token, its audit event and a NOTIFY; the list never holds the hash', async () => {
    const listener = new pg.Client({ connectionString: url });
    await listener.connect();
    const notified: string[] = [];
    listener.on('notification', (n) => notified.push(n.payload ?? ''));
    await listener.query('LISTEN evora_tokens_changed');
    try {
      const secret = tokenSecretGenerate();
      const expiresAt = new Date(T0.getTime() + 86_400_000);
      const t = await store.tokenCreate({
        name: 'ci-deploy', role: 'producer', queues: ['billing.*'], expiresAt, secretHash: tokenSecretHash(secret), createdBy: '', actor, now: T0,
      });
      expect(t).toMatchObject({ name: 'ci-deploy', role: 'producer', queues: ['billing.*'], createdAt: T0, expiresAt, revokedAt: null, createdBy: '' });
      const [row] = (await sql.query('SELECT secret_sha256 FROM evora.api_tokens WHERE id = $1', [t.id])).rows;
      expect(Buffer.compare(row.secret_sha256, tokenSecretHash(secret))).toBe(0);
      expect(await eventsOn(t.id)).toEqual([
        { action: 'token.create', token_name: 'evora (ops)', change: { name: 'ci-deploy', role: 'producer', queues: ['billing.*'], expires_at: '2033-01-02T00:00:00+00:00' } },
      ]);
      const listed = await store.tokenList({ includeRevoked: false });
      expect(listed.map((x) => x.id)).toContain(t.id);
      expect(JSON.stringify(listed)).not.toContain(tokenSecretHash(secret).toString('hex'));
      expect(Object.keys(listed[0]!).sort()).toEqual(['createdAt', 'createdBy', 'expiresAt', 'id', 'name', 'queues', 'revokedAt', 'role']);
      await expect.poll(() => notified).toContain(t.id);
    } finally {
      await listener.end();
    }
  });

  it('a taken name is ALREADY_EXISTS and writes nothing', async () => {
    await store.tokenCreate({ name: 'dup', role: 'viewer', queues: [], expiresAt: null, secretHash: tokenSecretHash(tokenSecretGenerate()), createdBy: '', now: T0 });
    const before = (await sql.query('SELECT count(*)::int AS n FROM evora.audit_events')).rows[0].n;
    await expect(
      store.tokenCreate({ name: 'dup', role: 'admin', queues: [], expiresAt: null, secretHash: tokenSecretHash(tokenSecretGenerate()), createdBy: '' }),
    ).rejects.toMatchObject({ code: 'ALREADY_EXISTS', message: 'a token named "dup" already exists' });
    expect((await sql.query('SELECT count(*)::int AS n FROM evora.audit_events')).rows[0].n).toBe(before);
    expect((await sql.query("SELECT count(*)::int AS n FROM evora.api_tokens WHERE name = 'dup'")).rows[0].n).toBe(1);
  });

  it('a statement that fails after its audit CTE leaves no event (a secret hash already stored)', async () => {
    const hash = tokenSecretHash(tokenSecretGenerate());
    await store.tokenCreate({ name: 'hash-a', role: 'viewer', queues: [], expiresAt: null, secretHash: hash, createdBy: '' });
    const before = (await sql.query('SELECT count(*)::int AS n FROM evora.audit_events')).rows[0].n;
    await expect(store.tokenCreate({ name: 'hash-b', role: 'viewer', queues: [], expiresAt: null, secretHash: hash, createdBy: '' })).rejects.toThrow(/unique/);
    expect((await sql.query('SELECT count(*)::int AS n FROM evora.audit_events')).rows[0].n).toBe(before);
  });

  it('revoke by id or by name; revoking again is a no-op without an event; unknown is NOT_FOUND', async () => {
    const mk = (name: string) =>
      store.tokenCreate({ name, role: 'worker', queues: [], expiresAt: null, secretHash: tokenSecretHash(tokenSecretGenerate()), createdBy: 'root', now: T0 });
    const a = await mk('rev-a');
    const b = await mk('rev-b');
    const at = new Date(T0.getTime() + 1000);
    const ra = await store.tokenRevoke({ token: a.id, actor, now: at });
    expect(ra).toMatchObject({ id: a.id, revokedAt: at, createdBy: 'root' });
    const rb = await store.tokenRevoke({ token: 'rev-b', now: at });
    expect(rb).toMatchObject({ id: b.id, revokedAt: at });
    const again = await store.tokenRevoke({ token: 'rev-a', actor, now: new Date(at.getTime() + 5000) });
    expect(again.revokedAt).toEqual(at);
    expect((await eventsOn(a.id)).map((e) => e.action)).toEqual(['token.create', 'token.revoke']);
    expect((await eventsOn(b.id)).map((e) => [e.action, e.token_name, e.change])).toEqual([
      ['token.create', '', { name: 'rev-b', role: 'worker', queues: [], expires_at: null }],
      ['token.revoke', '', { name: 'rev-b' }],
    ]);
    await expect(store.tokenRevoke({ token: 'nope' })).rejects.toMatchObject({ code: 'NOT_FOUND', message: 'token "nope" not found' });
    const active = (await store.tokenList({ includeRevoked: false })).map((t) => t.name);
    expect(active).not.toContain('rev-a');
    const all = (await store.tokenList({ includeRevoked: true })).map((t) => t.name);
    expect(all).toEqual(expect.arrayContaining(['rev-a', 'rev-b']));
  });

  it('lists newest first', async () => {
    for (const [i, name] of ['old', 'mid', 'new'].entries()) {
      await store.tokenCreate({
        name: `order-${name}`, role: 'viewer', queues: [], expiresAt: null, secretHash: tokenSecretHash(tokenSecretGenerate()), createdBy: '',
        now: new Date(T0.getTime() + 3_600_000 * (i + 1)),
      });
    }
    const names = (await store.tokenList({ includeRevoked: true })).map((t) => t.name).filter((n) => n.startsWith('order-'));
    expect(names).toEqual(['order-new', 'order-mid', 'order-old']);
  });
});

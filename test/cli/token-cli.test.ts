import { userInfo } from 'node:os';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenSecretHash } from '../../src/domain/auth.js';
import { cliSetup } from '../helpers/cli.js';
import { testDatabaseCreate, type TestDatabase } from '../helpers/db.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';

/**
 * `evora token` and `evora audit` as users run them: directly against the database
 * (--database-url) and through a server (auth on from the first token: the calls send the first admin token with --token) on the same database, the
 * --json shapes, revoke by name, a secret printed once and never by `list`, and an
 * unmigrated database refused in one line.
 */

const { evora, json } = cliSetup();
let db: TestDatabase;
let address: string;
let sql: pg.Pool;
beforeAll(async () => {
  db = await testDatabaseCreate();
  ({ address } = await serverSetup({ databaseUrl: db.url }));
  sql = new pg.Pool({ connectionString: db.url, max: 2 });
});
afterAll(async () => {
  await sql.end();
  // After serverSetup's own afterAll (registered later, so run earlier) stopped the server.
  await db.drop();
});

const secrets: string[] = [];
interface Created {
  id: string;
  name: string;
  role: string;
  queues: string[];
  expires_at: string | null;
  token: string;
}

describe('evora token (direct database access)', () => {
  it('create --json prints {id, name, role, queues, expires_at, token}; the table holds only the hash; the event names the role and OS user', async () => {
    const out = await json<Created>('token', 'create', '--role', 'admin', '--name', 'first-admin', '--database-url', db.url);
    expect(Object.keys(out).sort()).toEqual(['expires_at', 'id', 'name', 'queues', 'role', 'token']);
    expect(out).toMatchObject({ name: 'first-admin', role: 'admin', queues: [], expires_at: null });
    expect(out.token).toMatch(/^evora_/);
    secrets.push(out.token);
    const [row] = (await sql.query('SELECT secret_sha256, created_by FROM evora.api_tokens WHERE id = $1', [out.id])).rows;
    expect(Buffer.compare(row.secret_sha256, tokenSecretHash(out.token))).toBe(0);
    expect(row.created_by).toBe('');
    const [event] = (await sql.query("SELECT actor_kind, token_id, token_name, change FROM evora.audit_events WHERE target = $1 AND action = 'token.create'", [out.id])).rows;
    const [{ role }] = (await sql.query('SELECT current_user::text AS role')).rows;
    expect(event).toEqual({ actor_kind: 'database', token_id: null, token_name: `${role} (${userInfo().username})`, change: { name: 'first-admin', role: 'admin', queues: [], expires_at: null } });
  });

  it('human create prints the secret once and says it will not be shown again; --queues and --expires', async () => {
    const r = await evora('token', 'create', '--role', 'producer', '--queues', 'billing.*,mail', '--expires', '30d', '--name', 'ci', '--database-url', db.url);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const secret = /secret: (\S+)/.exec(r.stdout)?.[1];
    expect(secret).toMatch(/^evora_/);
    secrets.push(secret!);
    expect(r.stdout.split(secret!).length).toBe(2);
    expect(r.stdout).toContain('it will not be shown again');
    const [row] = (await sql.query("SELECT queues, expires_at - created_at AS life FROM evora.api_tokens WHERE name = 'ci'")).rows;
    expect(row.queues).toEqual(['billing.*', 'mail']);
    expect(row.life.days).toBe(30);
  });

  it('bad input and conflicts exit with one line and their codes; nothing is written', async () => {
    const before = (await sql.query('SELECT count(*)::int AS n FROM evora.api_tokens')).rows[0].n;
    const role = await evora('token', 'create', '--role', 'root', '--database-url', db.url);
    expect(role).toMatchObject({ code: 2, stdout: '' });
    expect(role.stderr).toBe('evora: --role must be one of producer, worker, viewer, admin, got "root"\n');
    const pattern = await evora('token', 'create', '--role', 'viewer', '--queues', 'a*b*', '--database-url', db.url);
    expect(pattern.code).toBe(2);
    expect(pattern.stderr).toMatch(/^evora: INVALID_ARGUMENT: queue pattern "a\*b\*": \* may appear only at the end\n$/);
    for (const empty of ['', ' , ']) {
      const none = await evora('token', 'create', '--role', 'viewer', '--queues', empty, '--database-url', db.url);
      expect(none).toMatchObject({ code: 2, stdout: '', stderr: "evora: --queues names no queue; leave it out, or pass '*', for every queue\n" });
    }
    const dup = await evora('token', 'create', '--role', 'viewer', '--name', 'ci', '--database-url', db.url);
    expect(dup).toMatchObject({ code: 4, stderr: 'evora: ALREADY_EXISTS: a token named "ci" already exists\n' });
    const unknown = await evora('token', 'revoke', 'nobody', '--database-url', db.url);
    expect(unknown).toMatchObject({ code: 3, stderr: 'evora: NOT_FOUND: token "nobody" not found\n' });
    // A URL pg would misread (it took `db.internal:5432` for localhost:5432) is bad usage.
    const url = await evora('token', 'create', '--role', 'viewer', '--database-url', 'db.internal:5432');
    expect(url).toMatchObject({ code: 2, stdout: '' });
    expect(url.stderr).toBe('evora: --database-url must be a PostgreSQL URL such as postgres://user:password@host:5432/database; the value given starts with "db.internal:", not postgres:// or postgresql://\n');
    expect((await sql.query('SELECT count(*)::int AS n FROM evora.api_tokens')).rows[0].n).toBe(before);
  });

  it('refuses a database whose schema is not migrated, in one line', async () => {
    const empty = await testDatabaseCreate({ empty: true });
    try {
      const r = await evora('token', 'list', '--database-url', empty.url);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe('evora: the database has no token tables: its schema is not migrated (run `evora migrate --database-url <url>` first)\n');
    } finally {
      await empty.drop();
    }
  });
});

describe('evora token and evora audit through the server, with the admin token made directly', () => {
  it('list shows the tokens made directly, never a secret; revoke by name; --all', async () => {
    const list = await evora('--address', address, '--token', secrets[0]!, 'token', 'list');
    expect(list).toMatchObject({ code: 0, stderr: '' });
    expect(list.stdout).toContain('first-admin');
    const listed = await json<{ name: string; revoked_at: string | null }[]>('--address', address, '--token', secrets[0]!, 'token', 'list');
    expect(listed.map((t) => t.name)).toEqual(['ci', 'first-admin']);
    const made = await json<Created>('--address', address, '--token', secrets[0]!, 'token', 'create', '--role', 'worker', '--name', 'runner');
    secrets.push(made.token);

    const revoked = await json<{ id: string; name: string; revoked_at: string | null }>('--address', address, '--token', secrets[0]!, 'token', 'revoke', 'runner');
    expect(revoked).toMatchObject({ id: made.id, name: 'runner' });
    expect(revoked.revoked_at).not.toBeNull();
    const human = await evora('--address', address, '--token', secrets[0]!, 'token', 'revoke', made.id);
    expect(human.stdout).toMatch(/^token runner \(.+\) revoked at /);

    expect((await json<{ name: string }[]>('--address', address, '--token', secrets[0]!, 'token', 'list')).map((t) => t.name)).not.toContain('runner');
    expect((await json<{ name: string }[]>('--address', address, '--token', secrets[0]!, 'token', 'list', '--all')).map((t) => t.name)).toContain('runner');
    for (const args of [['token', 'list', '--all'], ['token', 'list', '--all', '--json'], ['token', 'list', '--all', '--database-url', db.url]]) {
      const r = await evora('--address', address, '--token', secrets[0]!, ...args);
      for (const s of secrets) expect(r.stdout).not.toContain(s);
    }
  });

  it('audit lists the changes newest first, filtered; the same through the server and directly', async () => {
    const q = queueName('cli-audit');
    expect((await evora('--address', address, '--token', secrets[0]!, 'queue', 'pause', q)).code).not.toBe(0); // no such queue: no event
    await json('--address', address, '--token', secrets[0]!, 'queue', 'set', q, '--max-attempts', '3');
    await json('--address', address, '--token', secrets[0]!, 'queue', 'pause', q);
    const onQueue = await json<{ action: string; actor_kind: string; change: unknown }[]>('--address', address, '--token', secrets[0]!, 'audit', '--target', q);
    expect(onQueue.map((e) => e.action)).toEqual(['queue.pause', 'queue.upsert']);
    expect(onQueue[1]).toMatchObject({ actor_kind: 'token', token_name: 'first-admin', change: { max_attempts: 3 } });
    const direct = await json<unknown[]>('audit', '--target', q, '--database-url', db.url);
    expect(direct).toEqual(onQueue);

    const tokenEvents = await json<{ action: string; token_name: string }[]>('--address', address, '--token', secrets[0]!, 'audit', '--action', 'token.create,token.revoke', '--limit', '3');
    expect(tokenEvents.map((e) => e.action)).toEqual(['token.revoke', 'token.create', 'token.create']);
    const human = await evora('--address', address, '--token', secrets[0]!, 'audit', '--limit', '2');
    expect(human.stdout.split('\n')[0]).toMatch(/^ID\s+AT\s+ACTOR\s+ACTION\s+TARGET\s+CHANGE/);
    // --by-token filters; the program-wide --token stays the caller's credential.
    const byToken = await json<{ token_name: string }[]>('--address', address, '--token', secrets[0]!, 'audit', '--by-token', 'first-admin', '--limit', '100');
    expect(byToken.length).toBeGreaterThan(1);
    expect(new Set(byToken.map((e) => e.token_name))).toEqual(new Set(['first-admin']));
    const byTokenDirect = await json<unknown[]>('audit', '--by-token', 'first-admin', '--limit', '100', '--database-url', db.url);
    expect(byTokenDirect).toEqual(byToken);
    const bad = await evora('--address', address, '--token', secrets[0]!, 'audit', '--action', 'queue.explode');
    expect(bad.code).toBe(2);
  });

  it('list marks a token whose expiry has passed (it no longer works) and not one still valid', async () => {
    const made = await json<Created>('--address', address, '--token', secrets[0]!, 'token', 'create', '--role', 'viewer', '--name', 'lapsed', '--expires', '1d');
    secrets.push(made.token);
    await sql.query("UPDATE evora.api_tokens SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 hour' WHERE name = 'lapsed'");
    const rows = (await evora('--address', address, '--token', secrets[0]!, 'token', 'list')).stdout.split('\n');
    expect(rows.find((r) => r.includes(' lapsed '))).toMatch(/Z \(expired\) /);
    expect(rows.find((r) => r.includes(' ci '))).toMatch(/Z +-$/);
    expect(rows.find((r) => r.includes(' ci '))).not.toContain('expired');
  });
});

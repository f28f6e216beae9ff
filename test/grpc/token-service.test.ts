import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenSecretGenerate, tokenSecretHash } from '../../src/domain/auth.js';
import {
  AuditAction,
  AuditActorKind,
  AuditServiceClient,
  TokenRole,
  TokenServiceClient,
} from '../../src/gen/evora/v1/auth.js';
import { JobServiceClient } from '../../src/gen/evora/v1/job.js';
import { QueueServiceClient } from '../../src/gen/evora/v1/queue.js';
import { WorkerServiceClient } from '../../src/gen/evora/v1/worker.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';
import { bearerOptions } from '../helpers/tokens.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';

/**
 * TokenService and AuditService over real gRPC: the secret returned once and stored only
 * as its hash, revoke by id and by name, bad input answered INVALID_ARGUMENT in one line
 * with nothing changed, and the audit log read newest first, paged and filtered.
 */

let tokens: TokenServiceClient;
let audit: AuditServiceClient;
let clients: Clients;
let db: pg.Pool;
/** The server's admin secret (EVORA_BOOTSTRAP_ADMIN_TOKEN): auth is on from the start. */
const ADMIN_SECRET = tokenSecretGenerate();
beforeAll(async () => {
  const setup = await serverSetup({ bootstrapAdminToken: ADMIN_SECRET });
  const insecure = grpc.credentials.createInsecure();
  clients = {
    jobs: new JobServiceClient(setup.address, insecure, bearerOptions(ADMIN_SECRET)),
    workers: new WorkerServiceClient(setup.address, insecure, bearerOptions(ADMIN_SECRET)),
    queues: new QueueServiceClient(setup.address, insecure, bearerOptions(ADMIN_SECRET)),
    close() {
      [this.jobs, this.workers, this.queues].forEach((c) => c.close());
    },
  };
  tokens = new TokenServiceClient(setup.address, insecure, bearerOptions(ADMIN_SECRET));
  audit = new AuditServiceClient(setup.address, insecure, bearerOptions(ADMIN_SECRET));
  db = new pg.Pool({ connectionString: setup.databaseUrl, max: 2 });
});
afterAll(async () => {
  clients.close();
  tokens.close();
  audit.close();
  await db.end();
});

async function refused(p: Promise<unknown>): Promise<grpc.ServiceError> {
  const err = (await p.then(() => null, (e: unknown) => e)) as grpc.ServiceError | null;
  expect(err).not.toBeNull();
  expect(err!.details).not.toContain('\n');
  return err!;
}
async function count(table: string): Promise<number> {
  return (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]!.n;
}

describe('TokenService', () => {
  it('CreateToken returns the secret once; the table holds its hash; ListTokens never has it', async () => {
    const res = await call(tokens, 'createToken', { name: 'deployer', role: TokenRole.TOKEN_ROLE_PRODUCER, queues: ['billing.*', 'mail'], expiresIn: { seconds: 3600, nanos: 0 } });
    expect(res.secret).toMatch(/^evora_[A-Za-z0-9_-]{43}$/);
    expect(res.token).toMatchObject({ name: 'deployer', role: TokenRole.TOKEN_ROLE_PRODUCER, queues: ['billing.*', 'mail'], createdBy: 'bootstrap', revokedAt: undefined });
    const t = res.token!;
    expect(t.expiresAt!.getTime() - t.createdAt!.getTime()).toBeGreaterThan(3_590_000);
    const [row] = (await db.query('SELECT secret_sha256 FROM evora.api_tokens WHERE id = $1', [t.id])).rows;
    expect(Buffer.compare(row.secret_sha256, tokenSecretHash(res.secret))).toBe(0);

    const listed = await call(tokens, 'listTokens', { includeRevoked: false });
    expect(listed.tokens.map((x) => x.id)).toContain(t.id);
    const wire = JSON.stringify(listed);
    expect(wire).not.toContain(res.secret);
    expect(wire).not.toContain(tokenSecretHash(res.secret).toString('hex'));

    const unnamed = await call(tokens, 'createToken', { name: '', role: TokenRole.TOKEN_ROLE_VIEWER, queues: [] });
    expect(unnamed.token!.name).toBe(`token-${unnamed.token!.id.slice(0, 8)}`);
    expect(unnamed.token!.expiresAt).toBeUndefined();
    expect(unnamed.secret).not.toBe(res.secret);
  });

  it('RevokeToken by id and by name; again is a no-op; unknown is NOT_FOUND', async () => {
    const a = (await call(tokens, 'createToken', { name: 'rev-a', role: TokenRole.TOKEN_ROLE_WORKER, queues: [] })).token!;
    const b = (await call(tokens, 'createToken', { name: 'rev-b', role: TokenRole.TOKEN_ROLE_WORKER, queues: ['jobs'] })).token!;
    const ra = (await call(tokens, 'revokeToken', { token: a.id })).token!;
    expect(ra.revokedAt).toBeInstanceOf(Date);
    const rb = (await call(tokens, 'revokeToken', { token: 'rev-b' })).token!;
    expect(rb).toMatchObject({ id: b.id, queues: ['jobs'] });
    expect(rb.revokedAt).toBeInstanceOf(Date);
    expect((await call(tokens, 'revokeToken', { token: 'rev-a' })).token!.revokedAt).toEqual(ra.revokedAt);
    const active = (await call(tokens, 'listTokens', { includeRevoked: false })).tokens.map((t) => t.name);
    expect(active).not.toContain('rev-a');
    expect((await call(tokens, 'listTokens', { includeRevoked: true })).tokens.map((t) => t.name)).toEqual(expect.arrayContaining(['rev-a', 'rev-b']));
    const err = await refused(call(tokens, 'revokeToken', { token: 'nobody' }));
    expect(err.code).toBe(grpc.status.NOT_FOUND);
  });

  it('bad input is INVALID_ARGUMENT in one line and changes nothing; a taken name ALREADY_EXISTS', async () => {
    const [tokensBefore, eventsBefore] = [await count('evora.api_tokens'), await count('evora.audit_events')];
    const bad: [Parameters<TokenServiceClient['createToken']>[0], RegExp][] = [
      [{ name: 'x', role: TokenRole.TOKEN_ROLE_UNSPECIFIED, queues: [] }, /role is required/],
      [{ name: 'bad name!', role: TokenRole.TOKEN_ROLE_ADMIN, queues: [] }, /name/],
      [{ name: 'x', role: TokenRole.TOKEN_ROLE_ADMIN, queues: ['a*b*'] }, /queue pattern/],
      [{ name: 'x', role: TokenRole.TOKEN_ROLE_ADMIN, queues: [], expiresIn: { seconds: 0, nanos: 0 } }, /expires_in must be positive/],
      [{ name: 'x', role: TokenRole.TOKEN_ROLE_ADMIN, queues: [], expiresIn: { seconds: -5, nanos: 0 } }, /expires_in must be positive/],
      [{ name: 'x', role: TokenRole.TOKEN_ROLE_ADMIN, queues: [], expiresIn: { seconds: 11 * 366 * 86_400, nanos: 0 } }, /at most 10 years/],
      // A name that is a UUID: revoking it by name would revoke the token of that id (an id wins).
      [{ name: '7184C005-E428-4A61-8F61-EED7A60B7BCD', role: TokenRole.TOKEN_ROLE_VIEWER, queues: [] }, /is a UUID/],
    ];
    for (const [req, message] of bad) {
      const err = await refused(call(tokens, 'createToken', req as never));
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toMatch(message);
    }
    expect((await refused(call(tokens, 'revokeToken', { token: '' }))).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect((await refused(call(audit, 'listAuditEvents', { pageSize: 1001, pageToken: '', actions: [], target: '', token: '' }))).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect((await refused(call(audit, 'listAuditEvents', { pageSize: 0, pageToken: 'forged', actions: [], target: '', token: '' }))).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect([await count('evora.api_tokens'), await count('evora.audit_events')]).toEqual([tokensBefore, eventsBefore]);

    await call(tokens, 'createToken', { name: 'taken', role: TokenRole.TOKEN_ROLE_VIEWER, queues: [] });
    const dup = await refused(call(tokens, 'createToken', { name: 'taken', role: TokenRole.TOKEN_ROLE_ADMIN, queues: [] }));
    expect(dup.code).toBe(grpc.status.ALREADY_EXISTS);
  });
});

describe('AuditService', () => {
  it('lists events newest first, paged, filtered by action, target and token', async () => {
    const q = queueName('audited');
    await call(clients.queues, 'upsertQueue', { name: q, maxAttempts: 4 } as never);
    await call(clients.queues, 'pauseQueue', { name: q });
    await call(clients.queues, 'resumeQueue', { name: q });
    const t = (await call(tokens, 'createToken', { name: 'audit-me', role: TokenRole.TOKEN_ROLE_VIEWER, queues: [] })).token!;
    await call(tokens, 'revokeToken', { token: 'audit-me' });

    const onQueue = await call(audit, 'listAuditEvents', { pageSize: 2, pageToken: '', actions: [], target: q, token: '' });
    expect(onQueue.events.map((e) => e.action)).toEqual([AuditAction.AUDIT_ACTION_QUEUE_RESUME, AuditAction.AUDIT_ACTION_QUEUE_PAUSE]);
    expect(onQueue.events[0]).toMatchObject({ actorKind: AuditActorKind.AUDIT_ACTOR_KIND_TOKEN, tokenName: 'bootstrap', target: q });
    expect(onQueue.nextPageToken).not.toBe('');
    const next = await call(audit, 'listAuditEvents', { pageSize: 2, pageToken: onQueue.nextPageToken, actions: [], target: q, token: '' });
    expect(next.events.map((e) => [e.action, e.change])).toEqual([[AuditAction.AUDIT_ACTION_QUEUE_UPSERT, { max_attempts: 4 }]]);
    expect(next.nextPageToken).toBe('');

    const all = await call(audit, 'listAuditEvents', { pageSize: 0, pageToken: '', actions: [], target: '', token: '' });
    const ids = all.events.map((e) => e.id);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    expect(all.events[0]).toMatchObject({ action: AuditAction.AUDIT_ACTION_TOKEN_REVOKE, target: t.id, change: { name: 'audit-me' } });

    const creates = await call(audit, 'listAuditEvents', { pageSize: 100, pageToken: '', actions: [AuditAction.AUDIT_ACTION_TOKEN_CREATE], target: t.id, token: '' });
    expect(creates.events).toHaveLength(1);
    expect(creates.events[0]!.change).toEqual({ name: 'audit-me', role: 'viewer', queues: [], expires_at: null });
    const none = await call(audit, 'listAuditEvents', { pageSize: 100, pageToken: '', actions: [AuditAction.AUDIT_ACTION_UNSPECIFIED], target: '', token: '' });
    expect(none.events).toEqual([]);
    // No event was made with a token yet (auth is not wired here): a token filter matches none.
    const byToken = await call(audit, 'listAuditEvents', { pageSize: 100, pageToken: '', actions: [], target: '', token: 'audit-me' });
    expect(byToken.events).toEqual([]);
  });
});

describe('the first token', () => {
  it('made by an anonymous caller (auth off) must be an admin token: any other is FAILED_PRECONDITION, nothing made, auth stays off', async () => {
    const open = await serverSetup();
    const insecure = grpc.credentials.createInsecure();
    const anonymous = new TokenServiceClient(open.address, insecure);
    try {
      for (const role of [TokenRole.TOKEN_ROLE_VIEWER, TokenRole.TOKEN_ROLE_WORKER, TokenRole.TOKEN_ROLE_PRODUCER]) {
        const err = await refused(call(anonymous, 'createToken', { name: 'first', role, queues: [] }));
        expect(err.code).toBe(grpc.status.FAILED_PRECONDITION);
        expect(err.details).toMatch(/^auth is off \(no token exists\), and the first token turns it on for every caller: make it an admin token/);
      }
      // Nothing was made: auth is still off, an anonymous call still works.
      expect((await call(anonymous, 'listTokens', { includeRevoked: true })).tokens).toEqual([]);
      // Bad input is still answered as such first.
      expect((await refused(call(anonymous, 'createToken', { name: 'x', role: TokenRole.TOKEN_ROLE_UNSPECIFIED, queues: [] }))).code).toBe(grpc.status.INVALID_ARGUMENT);
      const admin = await call(anonymous, 'createToken', { name: 'first', role: TokenRole.TOKEN_ROLE_ADMIN, queues: [] });
      expect(admin.token).toMatchObject({ name: 'first', role: TokenRole.TOKEN_ROLE_ADMIN });
      // With auth on (every server sees the new token within 5 s), the admin makes any role.
      const withAdmin = new TokenServiceClient(open.address, insecure, bearerOptions(admin.secret));
      try {
        await waitFor(async () => (await call(withAdmin, 'getCaller', {})).authOn, { what: 'auth to be on' });
        const viewer = await call(withAdmin, 'createToken', { name: 'second', role: TokenRole.TOKEN_ROLE_VIEWER, queues: [] });
        expect(viewer.token).toMatchObject({ name: 'second', role: TokenRole.TOKEN_ROLE_VIEWER });
      } finally {
        withAdmin.close();
      }
    } finally {
      anonymous.close();
    }
  });
});

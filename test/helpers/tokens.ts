import { randomUUID } from 'node:crypto';
import { InterceptingCall, Metadata, type ClientOptions } from '@grpc/grpc-js';
import pg from 'pg';
import { tokenSecretGenerate, tokenSecretHash, type TokenRole } from '../../src/domain/auth.js';

/** A token a test made, and its secret (to send as `authorization: Bearer <secret>`). */
export interface TestToken {
  id: string;
  name: string;
  role: TokenRole;
  secret: string;
}

/**
 * Inserts an API token straight into evora.api_tokens (as `evora token create` with
 * DATABASE_URL would, without the audit event), and NOTIFYs the servers' token caches.
 * For tests that need tokens before or apart from the token API.
 */
export async function tokenInsert(
  databaseUrl: string,
  opts: { role: TokenRole; queues?: string[]; name?: string; expiresAt?: Date | null; revokedAt?: Date | null },
): Promise<TestToken> {
  const id = randomUUID();
  const name = opts.name ?? `${opts.role}-${id.slice(0, 8)}`;
  const secret = tokenSecretGenerate();
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(
      `INSERT INTO evora.api_tokens (id, name, role, queues, secret_sha256, created_at, expires_at, revoked_at)
       VALUES ($1, $2, $3, $4, $5, now() - interval '1 minute', $6, $7)`,
      [id, name, opts.role, opts.queues ?? [], tokenSecretHash(secret), opts.expiresAt ?? null, opts.revokedAt ?? null],
    );
    await client.query(`SELECT pg_notify('evora_tokens_changed', $1)`, [id]);
  } finally {
    await client.end();
  }
  return { id, name, role: opts.role, secret };
}

/** Call metadata carrying `token` (or a raw header value's secret) as a bearer token. */
export function bearer(token: TestToken | string): Metadata {
  const md = new Metadata();
  md.set('authorization', `Bearer ${typeof token === 'string' ? token : token.secret}`);
  return md;
}

/**
 * Client options whose interceptor adds `authorization: Bearer <secret>` to every call of
 * a generated client (plaintext channels refuse call credentials).
 */
export function bearerOptions(token: TestToken | string): Partial<ClientOptions> {
  const secret = typeof token === 'string' ? token : token.secret;
  return {
    interceptors: [
      (options, next) =>
        new InterceptingCall(next(options), {
          start(metadata, listener, start) {
            metadata.set('authorization', `Bearer ${secret}`);
            start(metadata, listener);
          },
        }),
    ],
  };
}

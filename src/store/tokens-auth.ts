import { randomUUID } from 'node:crypto';
import type { ApiToken, TokenRole } from '../domain/auth.js';
import type { StorePool } from './pool.js';
import { rowOf, rowsOf, statement, type None, type PgTypes } from './statements.js';

/**
 * The read side of API tokens, for authentication: the whole table with the secrets'
 * hashes (each server's cache, src/auth/), and the bootstrap token of
 * EVORA_BOOTSTRAP_ADMIN_TOKEN. The hashes never leave the store but to the cache; the
 * token API (tokens.ts) lists tokens without them.
 */

/** A row of evora.api_tokens as the auth statements return it (the hash last). */
interface TokenAuthRow {
  id: string;
  name: string;
  role: TokenRole;
  queues: string[];
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  created_by: string;
}

const TOKEN_AUTH_COLUMNS: PgTypes<TokenAuthRow> = {
  id: 'uuid',
  name: 'text',
  role: 'text',
  queues: 'text[]',
  created_at: 'timestamptz',
  expires_at: 'timestamptz',
  revoked_at: 'timestamptz',
  created_by: 'text',
};

const tokenAuthListSql = statement<None, TokenAuthRow & { secret_sha256: Buffer }>(
  'token-auth-list',
  {},
  { ...TOKEN_AUTH_COLUMNS, secret_sha256: 'bytea' },
);
const tokenBootstrapEnsureSql = statement<{ id: string; secretHash: Buffer; now: Date | null }, TokenAuthRow & { created: boolean }>(
  'token-bootstrap-ensure',
  { id: 'uuid', secretHash: 'bytea', now: 'timestamptz' },
  { ...TOKEN_AUTH_COLUMNS, created: 'bool' },
);

function tokenFromRow(r: TokenAuthRow): ApiToken {
  return {
    id: r.id,
    name: r.name,
    role: r.role,
    queues: r.queues,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
    revokedAt: r.revoked_at,
    createdBy: r.created_by,
  };
}

/** Every token with its hash, revoked and expired ones too (Store.tokenAuthList). */
export async function tokensAuthList(pool: StorePool): Promise<(ApiToken & { secretHash: Buffer })[]> {
  return (await rowsOf(pool, tokenAuthListSql, {})).map((r) => ({ ...tokenFromRow(r), secretHash: r.secret_sha256 }));
}

/** Keeps or creates the bootstrap token (Store.tokenBootstrapEnsure). */
export async function tokenBootstrapEnsure(pool: StorePool, secretHash: Buffer, now: Date | null): Promise<{ token: ApiToken; created: boolean }> {
  // A second run finds the token a concurrent start inserted (the first did nothing).
  for (let attempt = 0; attempt < 3; attempt++) {
    const row = await rowOf(pool, tokenBootstrapEnsureSql, { id: randomUUID(), secretHash, now });
    if (row) return { token: tokenFromRow(row), created: row.created };
  }
  throw new Error('the bootstrap token could not be created or found (a concurrent start kept taking its name)');
}

import { randomUUID } from 'node:crypto';
import type { ApiToken } from '../domain/auth.js';
import type { StorePool } from './pool.js';
import { rowOf, rowsOf, statement, type None } from './statements.js';
import { TOKEN_COLUMNS, tokenFromRow, type TokenRow } from './tokens.js';

/**
 * The read side of API tokens, for authentication: the whole table with the secrets'
 * hashes (each server's cache, src/auth/), and the bootstrap token of
 * EVORA_BOOTSTRAP_ADMIN_TOKEN. The hashes never leave the store but to the cache; the
 * token API (tokens.ts) lists tokens without them.
 */

const tokenAuthListSql = statement<None, TokenRow & { secret_sha256: Buffer }>(
  'token-auth-list',
  {},
  { ...TOKEN_COLUMNS, secret_sha256: 'bytea' },
);
const tokenBootstrapEnsureSql = statement<{ id: string; secretHash: Buffer; now: Date | null }, TokenRow & { created: boolean }>(
  'token-bootstrap-ensure',
  { id: 'uuid', secretHash: 'bytea', now: 'timestamptz' },
  { ...TOKEN_COLUMNS, created: 'bool' },
);

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

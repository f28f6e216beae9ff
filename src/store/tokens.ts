import type { StorePool } from './pool.js';
import type { ApiToken, TokenRole } from '../domain/auth.js';
import type { AuditActor } from '../domain/audit.js';
import { alreadyExists, notFound } from '../domain/errors.js';
import { ACTOR_TYPES, actorParams, type ActorParams } from './audit.js';
import { rowOf, rowsOf, statement, type None, type PgTypes } from './statements.js';

/**
 * API tokens as operators manage them (TokenService, `evora token`): create, list, revoke.
 * Each write is one statement that also writes its audit event and NOTIFYs the servers'
 * token caches (evora_tokens_changed). The hash is written here and never read back: the
 * auth cache (tokens-auth.ts) is the only reader of secret_sha256.
 */

/** A row of evora.api_tokens without its hash (shared with tokens-auth.ts). */
export interface TokenRow {
  id: string;
  name: string;
  role: TokenRole;
  queues: string[];
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  created_by: string;
}
/** The columns of TokenRow with their PostgreSQL types. */
export const TOKEN_COLUMNS: PgTypes<TokenRow> = {
  id: 'uuid',
  name: 'text',
  role: 'text',
  queues: 'text[]',
  created_at: 'timestamptz',
  expires_at: 'timestamptz',
  revoked_at: 'timestamptz',
  created_by: 'text',
};

/** A token row as the domain's ApiToken. */
export function tokenFromRow(r: TokenRow): ApiToken {
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

interface TokenCreateParams extends ActorParams {
  id: string;
  name: string;
  role: TokenRole;
  queues: string[];
  secretHashHex: string;
  expiresAt: Date | null;
  createdBy: string;
  now: Date | null;
}
const tokenCreateSql = statement<TokenCreateParams, TokenRow>(
  'token-create',
  {
    ...ACTOR_TYPES,
    id: 'uuid',
    name: 'text',
    role: 'text',
    queues: 'text[]',
    secretHashHex: 'text',
    expiresAt: 'timestamptz',
    createdBy: 'text',
    now: 'timestamptz',
  },
  TOKEN_COLUMNS,
);
const tokenListSql = statement<{ includeRevoked: boolean }, TokenRow>('token-list', { includeRevoked: 'bool' }, TOKEN_COLUMNS);
const tokenRevokeSql = statement<ActorParams & { token: string; now: Date | null }, TokenRow>(
  'token-revoke',
  { ...ACTOR_TYPES, token: 'text', now: 'timestamptz' },
  TOKEN_COLUMNS,
);

const adminSessionCheckSql = statement<None, { role: string; migrated: boolean }>(
  'admin-session-check',
  {},
  { role: 'text', migrated: 'bool' },
);

/** The session's role, and whether the token and audit tables exist (Store.adminSessionCheck). */
export async function adminSessionCheck(pool: StorePool): Promise<{ role: string; migrated: boolean }> {
  return (await rowOf(pool, adminSessionCheckSql, {}))!;
}

/** What Store.tokenCreate takes (validated by the caller: src/domain/validate-admin.ts). */
export interface TokenCreateInput {
  id: string;
  name: string;
  role: TokenRole;
  queues: string[];
  expiresAt: Date | null;
  /** tokenSecretHash of the secret (32 bytes). */
  secretHash: Buffer;
  createdBy: string;
  actor?: AuditActor;
  now?: Date;
}

/** Makes a token (Store.tokenCreate); ALREADY_EXISTS when its name is taken. */
export async function tokenCreate(pool: StorePool, input: TokenCreateInput): Promise<ApiToken> {
  const row = await rowOf(pool, tokenCreateSql, {
    ...actorParams(input.actor),
    id: input.id,
    name: input.name,
    role: input.role,
    queues: input.queues,
    secretHashHex: input.secretHash.toString('hex'),
    expiresAt: input.expiresAt,
    createdBy: input.createdBy,
    now: input.now ?? null,
  });
  if (!row) throw alreadyExists(`a token named "${input.name}" already exists`);
  return tokenFromRow(row);
}

/** Tokens, newest first, never their hashes (Store.tokenList). */
export async function tokensList(pool: StorePool, includeRevoked: boolean): Promise<ApiToken[]> {
  return (await rowsOf(pool, tokenListSql, { includeRevoked })).map(tokenFromRow);
}

/** Revokes a token by id or name (Store.tokenRevoke); NOT_FOUND when there is none. */
export async function tokenRevoke(pool: StorePool, params: { token: string; actor?: AuditActor; now?: Date }): Promise<ApiToken> {
  const row = await rowOf(pool, tokenRevokeSql, { ...actorParams(params.actor), token: params.token, now: params.now ?? null });
  if (!row) throw notFound(`token "${params.token}" not found`);
  return tokenFromRow(row);
}

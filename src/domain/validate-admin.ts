import { checkQueuePatterns, type TokenRole } from './auth.js';
import type { AuditActor } from './audit.js';
import { invalidArgument } from './errors.js';
import { isUuid } from './ids.js';
import { checkName, checkNoNul } from './validate.js';

/**
 * Checks of the token and audit-log APIs' input (TokenService, AuditService, `evora token`
 * and `evora audit`), shared so that every API layer (gRPC now, HTTP later) refuses the
 * same input with the same one-line INVALID_ARGUMENT before anything is written.
 */

/** Longest life a token may be given: 10 years. */
export const MAX_TOKEN_LIFETIME_SECONDS = 10 * 365.25 * 86_400;

/** A token's settings as a client sends them, before the checks. */
export interface TokenCreateRequestInput {
  /** '' (or absent): "token-" and the first 8 characters of `id`. */
  name?: string;
  /** undefined: refused (a role is required). */
  role: TokenRole | undefined;
  queues?: readonly string[];
  /** null: until revoked. */
  expiresInSeconds: number | null;
}

/** A token's checked settings. */
export interface TokenCreateChecked {
  name: string;
  role: TokenRole;
  /** Patterns, deduplicated; empty: every queue. */
  queues: string[];
  expiresInSeconds: number | null;
}

/** The name of a token made without one: "token-" and the first 8 characters of its id. */
export function tokenDefaultName(id: string): string {
  return `token-${id.slice(0, 8)}`;
}

/**
 * Checks a token's settings (the token to be made has id `id`). A name may not be a UUID:
 * RevokeToken and the audit log's token filter take an id or a name, and an id wins, so
 * revoking such a token by its name would revoke the token whose id it is (or none).
 */
export function checkTokenCreate(id: string, input: TokenCreateRequestInput): TokenCreateChecked {
  const name = input.name ? checkName('name', input.name) : tokenDefaultName(id);
  if (isUuid(name)) {
    throw invalidArgument(`name "${name}" is a UUID, which names a token by its id (revoke and the audit's token filter take an id or a name): choose another name`);
  }
  if (!input.role) throw invalidArgument('role is required: producer, worker, viewer or admin');
  const queues = checkQueuePatterns(input.queues ?? []);
  const e = input.expiresInSeconds;
  if (e !== null) {
    if (!Number.isFinite(e) || e <= 0) throw invalidArgument('expires_in must be positive (leave it unset for a token that does not expire)');
    if (e > MAX_TOKEN_LIFETIME_SECONDS) throw invalidArgument('expires_in must be at most 10 years');
  }
  return { name, role: input.role, queues, expiresInSeconds: e };
}

/** When a token made at `now` with `expiresInSeconds` stops working (null: never). */
export function tokenExpiresAt(now: Date, expiresInSeconds: number | null): Date | null {
  return expiresInSeconds === null ? null : new Date(now.getTime() + Math.ceil(expiresInSeconds * 1000));
}

/** What a new token records as its maker: the creating token's name; '' for anyone else. */
export function tokenCreatedBy(actor: AuditActor): string {
  return actor.kind === 'token' ? actor.name : '';
}

/** Checks the id-or-name of a token to revoke. */
export function checkTokenRef(value: string): string {
  if (!value) throw invalidArgument('token is required: its id or its name');
  if (value.length > 128) throw invalidArgument('token must be a token id or name (at most 128 characters)');
  return checkNoNul('token', value);
}

/** Events per page of the audit log when the request says 0. */
export const DEFAULT_AUDIT_PAGE_SIZE = 100;
/** Most events per page of the audit log. */
export const MAX_AUDIT_PAGE_SIZE = 1000;

/** A page size of ListAuditEvents: 0 is the default (100); otherwise 1..1000. */
export function checkAuditPageSize(size: number): number {
  if (size === 0) return DEFAULT_AUDIT_PAGE_SIZE;
  if (!Number.isInteger(size) || size < 1 || size > MAX_AUDIT_PAGE_SIZE) {
    throw invalidArgument(`page_size must be from 1 to ${MAX_AUDIT_PAGE_SIZE} (0: ${DEFAULT_AUDIT_PAGE_SIZE})`);
  }
  return size;
}

/** An audit page token: opaque to clients, the base64url of the page's last event id. */
export function auditPageTokenEncode(beforeId: number | null): string {
  return beforeId === null ? '' : Buffer.from(`a:${beforeId}`).toString('base64url');
}

/** The event id an audit page token carries; null for '' (the newest page); anything else INVALID_ARGUMENT. */
export function auditPageTokenDecode(token: string): number | null {
  if (!token) return null;
  const m = /^a:([1-9]\d{0,15})$/.exec(Buffer.from(token, 'base64url').toString('utf8'));
  if (!m?.[1]) throw invalidArgument('page_token is not valid (pass next_page_token back unchanged)');
  return Number(m[1]);
}

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { EvoraError, invalidArgument, permissionDenied, unauthenticated } from './errors.js';
import { checkName } from './validate.js';

/**
 * Who may do what: API token roles, queue scopes, the secret's form and hash, and the
 * check every API layer (gRPC now, HTTP later) runs before it acts. Pure logic; the token
 * table is read by the store and cached by src/auth. docs/security.md "API tokens" and
 * proto/evora/v1/auth.proto state the same rules for clients.
 */

/** What a token may do (TokenRole in the proto). */
export type TokenRole = 'producer' | 'worker' | 'viewer' | 'admin';
/** Every role, weakest first. */
export const TOKEN_ROLES: readonly TokenRole[] = ['producer', 'worker', 'viewer', 'admin'];

/**
 * One kind of act an API method performs. A method needs exactly one permission
 * (src/grpc/auth.ts maps each method), and a role is the set of permissions it grants.
 */
export type Permission =
  | 'job.submit'
  | 'job.read'
  | 'job.manage'
  | 'work'
  | 'queue.read'
  | 'queue.manage'
  | 'schedule.read'
  | 'schedule.manage'
  | 'token.manage'
  | 'audit.read'
  /** Who am I (GetCaller): every role has it. */
  | 'caller.read';

const ALL_PERMISSIONS: readonly Permission[] = [
  'job.submit',
  'job.read',
  'job.manage',
  'work',
  'queue.read',
  'queue.manage',
  'schedule.read',
  'schedule.manage',
  'token.manage',
  'audit.read',
  'caller.read',
];

/** The permissions of each role: the table auth.proto's comment lists, and nothing more. */
export const ROLE_PERMISSIONS: Readonly<Record<TokenRole, ReadonlySet<Permission>>> = {
  producer: new Set<Permission>(['job.submit', 'job.read', 'caller.read']),
  worker: new Set<Permission>(['work', 'job.submit', 'caller.read']),
  viewer: new Set<Permission>(['job.read', 'queue.read', 'schedule.read', 'caller.read']),
  admin: new Set<Permission>(ALL_PERMISSIONS),
};

/** Who is calling: a token's holder, anyone (auth off), or whoever holds the database. */
export type PrincipalKind = 'token' | 'anonymous' | 'database';

/**
 * The caller of one API call, as authentication found it. `queues` holds the token's
 * queue patterns; empty means every queue. Anonymous and database principals are admins
 * of every queue.
 */
export interface Principal {
  kind: PrincipalKind;
  /** The token's id (kind 'token'); null otherwise. */
  tokenId: string | null;
  /** The token's name; for 'database' "role (user)"; '' for 'anonymous'. */
  name: string;
  role: TokenRole;
  queues: readonly string[];
  /** When the token stops working; null: never (or not a token). */
  expiresAt: Date | null;
}

/** The caller of a server running without auth. */
export const ANONYMOUS: Principal = Object.freeze({ kind: 'anonymous', tokenId: null, name: '', role: 'admin', queues: [], expiresAt: null });

/** The caller with direct database access (`evora token create` with DATABASE_URL, the bootstrap token). */
export function databasePrincipal(name: string): Principal {
  return { kind: 'database', tokenId: null, name, role: 'admin', queues: [], expiresAt: null };
}

/** How a principal appears in log lines and messages: never a secret. */
export function principalLabel(p: Principal): string {
  if (p.kind === 'anonymous') return 'anonymous caller';
  if (p.kind === 'database') return `database access ${p.name}`;
  return `token "${p.name}" (${p.role})`;
}

/** Longest queue pattern list of one token. */
export const MAX_TOKEN_QUEUES = 100;

/**
 * Checks a token's queue patterns: each a queue name, or a name prefix followed by `*`
 * ("billing.*"); a lone "*" means every queue and is stored as the empty list.
 */
export function checkQueuePatterns(patterns: readonly string[]): string[] {
  if (patterns.length > MAX_TOKEN_QUEUES) throw invalidArgument(`a token names at most ${MAX_TOKEN_QUEUES} queue patterns`);
  if (patterns.includes('*')) return [];
  const out = new Set<string>();
  for (const p of patterns) {
    if (p.endsWith('*')) {
      const prefix = p.slice(0, -1);
      if (prefix.includes('*')) throw invalidArgument(`queue pattern "${p}": * may appear only at the end`);
      checkName('queue pattern', prefix);
    } else checkName('queue pattern', p);
    out.add(p);
  }
  return [...out];
}

/** Whether `queue` is one the patterns allow (empty patterns: every queue). */
export function queueInScope(patterns: readonly string[], queue: string): boolean {
  if (patterns.length === 0) return true;
  return patterns.some((p) => (p.endsWith('*') ? queue.startsWith(p.slice(0, -1)) : queue === p));
}

/** Whether the principal is limited to some queues (and so must name them). */
export function scoped(p: Principal): boolean {
  return p.queues.length > 0;
}

/**
 * Throws PERMISSION_DENIED unless the principal's role grants `permission` and its
 * scope includes every one of `queues`. `what` names the act in the message ("SubmitJobs").
 */
export function authorize(p: Principal, permission: Permission, what: string, queues: readonly string[] = []): void {
  if (!ROLE_PERMISSIONS[p.role].has(permission)) {
    throw permissionDenied(`${principalLabel(p)} may not call ${what}`);
  }
  for (const q of queues) {
    if (!queueInScope(p.queues, q)) {
      throw permissionDenied(`${principalLabel(p)} may not use queue "${q}" (it is limited to ${p.queues.join(', ')})`);
    }
  }
}

/**
 * Throws PERMISSION_DENIED when a scoped principal calls `what` without naming a queue
 * (a list or bulk filter over every queue would reach queues outside its scope).
 */
export function requireQueueForScoped(p: Principal, what: string, queue: string | null | undefined): void {
  if (scoped(p) && !queue) {
    throw permissionDenied(`${principalLabel(p)} is limited to queues ${p.queues.join(', ')}; ${what} must name one of them`);
  }
}

/**
 * Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost): only this machine can
 * connect. The server's bind address decides whether it may run without auth
 * (src/server/auth-start.ts); a request's Host whether it was addressed to such a server by
 * a loopback name (src/http/browser-guard.ts).
 */
export function hostIsLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || h === '::ffff:127.0.0.1';
}

/** Prefix of the secrets Evora makes (so a leaked one is recognisable by secret scanners). */
export const TOKEN_SECRET_PREFIX = 'evora_';
/** Shortest secret accepted (EVORA_BOOTSTRAP_ADMIN_TOKEN included). */
export const MIN_SECRET_LENGTH = 32;
/** Longest secret accepted in a header. */
export const MAX_SECRET_LENGTH = 512;
/** Characters a secret may contain (the RFC 6750 bearer token alphabet). */
const SECRET_RE = /^[A-Za-z0-9\-._~+/]+=*$/;

/** A new token secret: the prefix and 32 random bytes, base64url (256 bits of entropy). */
export function tokenSecretGenerate(): string {
  return TOKEN_SECRET_PREFIX + randomBytes(32).toString('base64url');
}

/**
 * The stored form of a secret: SHA-256. A fast hash suffices because secrets carry 256
 * random bits (a bootstrap secret at least 32 characters chosen by the operator), so
 * there is nothing to brute-force; what the table holds cannot be sent as a token.
 */
export function tokenSecretHash(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/** Whether two stored hashes are equal, in constant time. */
export function tokenHashEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Whether `secret` has the form of a token (length and alphabet); says nothing of validity. */
export function secretWellFormed(secret: string): boolean {
  return secret.length >= MIN_SECRET_LENGTH && secret.length <= MAX_SECRET_LENGTH && SECRET_RE.test(secret);
}

/**
 * The secret of an `authorization` header value ("Bearer <secret>", the scheme in any
 * case). UNAUTHENTICATED when the header is missing or malformed; the message never
 * contains what was sent.
 */
export function bearerSecret(header: string | undefined): string {
  if (header === undefined || header === '') throw unauthenticated('a token is required: send "authorization: Bearer <token>"');
  const m = /^bearer[ ]+(\S+)\s*$/i.exec(header);
  if (!m || !m[1]) throw unauthenticated('the authorization header is malformed: expected "Bearer <token>"');
  if (!secretWellFormed(m[1])) {
    throw unauthenticated(
      `the token is malformed: an Evora token is ${MIN_SECRET_LENGTH} to ${MAX_SECRET_LENGTH} characters of letters, digits and - . _ ~ + / (and = at the end)`,
    );
  }
  return m[1];
}

/** Checks EVORA_BOOTSTRAP_ADMIN_TOKEN's value; the message never repeats it. */
export function checkBootstrapSecret(secret: string): string {
  if (secret.length < MIN_SECRET_LENGTH) {
    throw invalidArgument(`EVORA_BOOTSTRAP_ADMIN_TOKEN must be at least ${MIN_SECRET_LENGTH} characters (it has ${secret.length})`);
  }
  if (secret.length > MAX_SECRET_LENGTH) {
    throw invalidArgument(`EVORA_BOOTSTRAP_ADMIN_TOKEN must be at most ${MAX_SECRET_LENGTH} characters (it has ${secret.length}): no longer one is accepted in a header`);
  }
  if (!secretWellFormed(secret)) {
    throw invalidArgument('EVORA_BOOTSTRAP_ADMIN_TOKEN may contain only letters, digits and - . _ ~ + / (and = at the end)');
  }
  return secret;
}

/** A token as stored and listed: never its secret (the hash stays in the store and the cache). */
export interface ApiToken {
  id: string;
  name: string;
  role: TokenRole;
  /** Queue patterns; empty: every queue. */
  queues: string[];
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
  /** Name of the token that created it; '' for direct database access or the bootstrap. */
  createdBy: string;
}

/** Why a known token is refused at `now`, or null when it works. */
export function tokenRefusal(t: Pick<ApiToken, 'name' | 'expiresAt' | 'revokedAt'>, now: Date): string | null {
  if (t.revokedAt) return `token "${t.name}" was revoked`;
  if (t.expiresAt && t.expiresAt.getTime() <= now.getTime()) return `token "${t.name}" expired at ${t.expiresAt.toISOString()}`;
  return null;
}

/**
 * UNAUTHENTICATED for a token this server knows but refuses (revoked, expired): it carries
 * the token's id and name, so that the refusal's log line names the token (the secret never).
 */
export class TokenRefusedError extends EvoraError {
  constructor(
    message: string,
    readonly tokenId: string,
    readonly tokenName: string,
  ) {
    super('UNAUTHENTICATED', message);
  }
}

/** The principal a working token authenticates as. */
export function tokenPrincipal(t: ApiToken): Principal {
  return { kind: 'token', tokenId: t.id, name: t.name, role: t.role, queues: t.queues, expiresAt: t.expiresAt };
}

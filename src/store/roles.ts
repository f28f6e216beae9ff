import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import pg from 'pg';
import { SETUP_CONNECT_TIMEOUT_MS } from './migrate.js';
import { inTransaction, rowOf, script, scriptRun, statement } from './statements.js';

/** The roles of dbRoleEnsure: the one Evora logs in as, and the one that owns its schema. */
export interface DbRoleNames {
  /** LOGIN role the server connects as: DML and EXECUTE only, never the owner. */
  app: string;
  /** NOLOGIN role that owns schema evora and everything in it; migrations act as it. */
  owner: string;
}

/** What dbRoleEnsure found and did. */
export interface DbRoleEnsureResult {
  appCreated: boolean;
  ownerCreated: boolean;
  /** Objects of the evora schema (the schema included) whose ownership moved to the owner role. */
  objectsMoved: number;
  passwordSet: boolean;
}

const dbRoleStateSql = statement<{ app: string; owner: string }, { app_exists: boolean; owner_exists: boolean; foreign_owned: number }>(
  'db-role-state',
  { app: 'text', owner: 'text' },
  { app_exists: 'bool', owner_exists: 'bool', foreign_owned: 'int4' },
);
const dbRoleSettingsSql = statement<{ app: string; owner: string; verifier: string }, { app: string; owner: string; verifier_set: boolean }>(
  'db-role-settings',
  { app: 'text', owner: 'text', verifier: 'text' },
  { app: 'text', owner: 'text', verifier_set: 'bool' },
);
const dbRoleEnsureSql = script('db-role-ensure');

/** PostgreSQL's limit on a role name (NAMEDATALEN - 1 bytes). */
const ROLE_NAME_MAX_BYTES = 63;

/**
 * Refuses a role name PostgreSQL would truncate or that needs quoting, with one line: the
 * names are shown in docs and connection strings, so they stay plain identifiers.
 */
export function dbRoleNameCheck(name: string, what: string): void {
  if (!/^[a-z_][a-z0-9_]*$/.test(name) || Buffer.byteLength(name) > ROLE_NAME_MAX_BYTES || name.startsWith('pg_')) {
    throw new TypeError(`${what} must be a lower-case identifier of at most ${ROLE_NAME_MAX_BYTES} characters (a-z, 0-9, _), not starting with pg_, got "${name}"`);
  }
}

/**
 * The SCRAM-SHA-256 verifier PostgreSQL stores for `password` (RFC 5802/7677, the format
 * of pg_authid.rolpassword), so that the plain password never reaches the server or its
 * statement log. Passwords are used as given (PostgreSQL's SASLprep leaves ASCII unchanged).
 */
export function scramVerifier(password: string, iterations = 4096): string {
  const salt = randomBytes(16);
  const salted = pbkdf2Sync(password, salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/**
 * Creates or updates the application and owner roles on the database at `connectionString`
 * (a role that may create roles and act as the owner: a superuser), moves the ownership of
 * schema evora and its objects to the owner role, and grants the application role what the
 * server needs and nothing that could switch the schema's rules off
 * (sql/db-role-ensure.sql; docs/security.md, "Database role"). One transaction;
 * idempotent. `password` null keeps the application role's password.
 */
export async function dbRoleEnsure(connectionString: string, opts: DbRoleNames & { password: string | null }): Promise<DbRoleEnsureResult> {
  dbRoleNameCheck(opts.app, 'the role name');
  dbRoleNameCheck(opts.owner, 'the owner role name');
  const client = new pg.Client({ connectionString, application_name: 'evora-db-role', connectionTimeoutMillis: SETUP_CONNECT_TIMEOUT_MS });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await inTransaction(client, async () => {
      const state = (await rowOf(client, dbRoleStateSql, { app: opts.app, owner: opts.owner }))!;
      await rowOf(client, dbRoleSettingsSql, {
        app: opts.app,
        owner: opts.owner,
        verifier: opts.password === null ? '' : scramVerifier(opts.password),
      });
      await scriptRun(client, dbRoleEnsureSql);
      return {
        appCreated: !state.app_exists,
        ownerCreated: !state.owner_exists,
        objectsMoved: state.foreign_owned,
        passwordSet: opts.password !== null,
      };
    });
  } finally {
    await client.end().catch(() => undefined);
  }
}

import { userInfo } from 'node:os';
import type { Command } from 'commander';
import { AUDIT_ACTIONS, EvoraApiError, StatusCode, TOKEN_ROLES, type AuditActionName, type AuditEvent, type Token, type TokenRoleName } from '../sdk/index.js';
import { EvoraError } from '../domain/errors.js';
import { withClient } from './client-context.js';
import { databaseUrlOption } from './db-commands.js';
import { UsageError, nonEmpty, parseDuration, parseInteger } from './flags.js';
import { table, time } from './format.js';

/**
 * `evora token create|list|revoke` and `evora audit`: API tokens and the audit log
 * (docs/security.md, "Managing tokens and the audit log"). Each works through the server
 * (an admin token; the SDK), or, with --database-url or DATABASE_URL, directly against
 * the database through the store: that is how the first admin token is made. Direct
 * access is audited as the database role and the OS user, "role (user)". The secret of a
 * new token is printed once and never again: `list` prints no secret in any mode.
 */

/** What a token command does, through the server or directly. */
interface TokenBackend {
  create(input: { name?: string; role: TokenRoleName; queues: string[]; expiresInSeconds?: number }): Promise<{ token: Token; secret: string }>;
  list(includeRevoked: boolean): Promise<Token[]>;
  revoke(ref: string): Promise<Token>;
  audit(filter: { actions?: AuditActionName[]; target?: string; token?: string; limit: number }): Promise<AuditEvent[]>;
}

/** Options of the token and audit commands. */
interface AdminOptions {
  databaseUrl?: string;
}

/** The database URL of direct mode: --database-url, else DATABASE_URL; undefined: through the server. */
function directUrl(opts: AdminOptions): string | undefined {
  return databaseUrlOption(opts.databaseUrl);
}

/** A domain error of direct mode as the SDK's error, so the CLI prints and exits as for the server's. */
function asApiError(err: unknown, method: string): unknown {
  if (err instanceof EvoraError) return new EvoraApiError({ code: StatusCode[err.code], details: err.message, method, cause: err });
  return err;
}

/**
 * Runs `fn` with a backend: the store on `url` (refusing an unmigrated database), or the
 * SDK client of the global options. Closes what it opened. `subject` (the token a revoke
 * names) is what a timed-out call's check names (withClient's first argument).
 */
async function withBackend(cmd: Command, opts: AdminOptions, method: string, fn: (b: TokenBackend, json: boolean) => Promise<void>, subject?: string): Promise<void> {
  const json = Boolean(cmd.optsWithGlobals<{ json?: boolean }>().json);
  const url = directUrl(opts);
  if (!url) {
    await withClient(async (ctx, _subject: string | undefined) => fn(serverBackend(ctx.client), ctx.json))(subject, cmd);
    return;
  }
  const { Store } = await import('../store/store.js');
  const { databasePrincipal } = await import('../domain/auth.js');
  const { auditActor } = await import('../domain/audit.js');
  const store = new Store({ connectionString: url, maxConnections: 1, applicationName: 'evora-cli' });
  try {
    const session = await store.adminSessionCheck();
    if (!session.migrated) {
      throw new UsageError('the database has no token tables: its schema is not migrated (run `evora migrate --database-url <url>` first)');
    }
    const actor = auditActor(databasePrincipal(`${session.role} (${osUser()})`));
    await fn(await directBackend(store, actor), json);
  } catch (err) {
    throw asApiError(err, method);
  } finally {
    await store.close();
  }
}

function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    return process.env.USER ?? 'unknown';
  }
}

function serverBackend(client: import('../sdk/index.js').EvoraClient): TokenBackend {
  return {
    create: (input) => client.createToken(input),
    list: (includeRevoked) => client.listTokens({ includeRevoked }),
    revoke: (ref) => client.revokeToken(ref),
    async audit(filter) {
      const events: AuditEvent[] = [];
      let pageToken: string | undefined;
      while (events.length < filter.limit) {
        const page = await client.listAuditEvents({ ...filter, pageSize: Math.min(1000, filter.limit - events.length), pageToken });
        events.push(...page.events);
        if (!page.nextPageToken) break;
        pageToken = page.nextPageToken;
      }
      return events;
    },
  };
}

async function directBackend(
  store: import('../store/store.js').Store,
  actor: import('../domain/audit.js').AuditActor,
): Promise<TokenBackend> {
  const { checkTokenRef } = await import('../domain/validate-admin.js');
  const { tokenIssue } = await import('../auth/token-issue.js');
  return {
    create: (input) => tokenIssue(store, { ...input, expiresInSeconds: input.expiresInSeconds ?? null }, actor),
    list: (includeRevoked) => store.tokenList({ includeRevoked }),
    revoke: (ref) => store.tokenRevoke({ token: checkTokenRef(ref), actor }),
    async audit(filter) {
      const events: AuditEvent[] = [];
      let beforeId: number | null = null;
      while (events.length < filter.limit) {
        const page = await store.auditList({
          actions: filter.actions ?? null,
          target: filter.target ?? null,
          token: filter.token ?? null,
          beforeId,
          limit: Math.min(1000, filter.limit - events.length),
        });
        events.push(
          ...page.events.map((e) => ({
            id: e.id,
            at: e.at,
            actorKind: e.actor.kind,
            tokenId: e.actor.tokenId,
            tokenName: e.actor.name,
            action: e.action,
            target: e.target,
            change: e.change as AuditEvent['change'],
          })),
        );
        if (page.nextBeforeId === null) break;
        beforeId = page.nextBeforeId;
      }
      return events;
    },
  };
}

/** A token as --json prints it (snake_case, as the proto's fields). */
function tokenJson(t: Token, secret?: string) {
  return {
    id: t.id,
    name: t.name,
    role: t.role,
    queues: t.queues,
    expires_at: t.expiresAt?.toISOString() ?? null,
    ...(secret === undefined
      ? { created_at: t.createdAt?.toISOString() ?? null, revoked_at: t.revokedAt?.toISOString() ?? null, created_by: t.createdBy }
      : { token: secret }),
  };
}

/** The token table; an expiry already past (by this machine's clock) is marked, as such a token no longer works. */
function tokenTable(tokens: Token[], now = new Date()): string {
  const expires = (t: Token) => (!t.expiresAt ? 'never' : `${time(t.expiresAt)}${t.expiresAt <= now ? ' (expired)' : ''}`);
  return table(
    ['ID', 'NAME', 'ROLE', 'QUEUES', 'CREATED', 'EXPIRES', 'REVOKED'],
    tokens.map((t) => [t.id, t.name, t.role ?? '?', t.queues.length > 0 ? t.queues.join(',') : '*', time(t.createdAt), expires(t), t.revokedAt ? time(t.revokedAt) : '-']),
  );
}

function actorText(e: AuditEvent): string {
  if (e.actorKind === 'token') return `token ${e.tokenName}`;
  if (e.actorKind === 'database') return `database ${e.tokenName}`;
  return 'anonymous';
}

function roleParse(text: string): TokenRoleName {
  const role = text.toLowerCase() as TokenRoleName;
  if (!TOKEN_ROLES.includes(role)) throw new UsageError(`--role must be one of ${TOKEN_ROLES.join(', ')}, got "${text}"`);
  return role;
}

function listParse(text: string | undefined): string[] {
  return text === undefined ? [] : text.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

/** Adds `evora token ...` and `evora audit` to the program. */
export function tokenCommandsAdd(program: Command): void {
  const dbOption = '--database-url <url>';
  const dbDoc = 'act directly on this database instead of through the server (audited as its role and your OS user) [env DATABASE_URL]';
  const token = program.command('token').description('API tokens: create (the secret is shown once), list, revoke');

  token
    .command('create')
    .description('make an API token and print its secret (shown this once)')
    .requiredOption('--role <role>', `what it may do: ${TOKEN_ROLES.join(', ')}`)
    .option('--queues <patterns>', 'limit it to these queues: names or prefixes ending in * (comma-separated; default every queue)')
    .option('--expires <duration>', 'how long it works, e.g. 30d or 12h (default: until revoked)')
    .option('--name <name>', 'its unique name (default token-<first 8 characters of its id>)')
    .option(dbOption, dbDoc)
    .action(async (opts: AdminOptions & { role: string; queues?: string; expires?: string; name?: string }, cmd: Command) => {
      const role = roleParse(opts.role);
      const queues = listParse(opts.queues);
      // An empty value (a script's unset variable) must not widen the token to every queue.
      if (opts.queues !== undefined && queues.length === 0) {
        throw new UsageError("--queues names no queue; leave it out, or pass '*', for every queue");
      }
      const expiresInSeconds = opts.expires === undefined ? undefined : parseDuration(opts.expires, '--expires');
      await withBackend(cmd, opts, 'CreateToken', async (b, json) => {
        const { token: t, secret } = await b.create({ name: opts.name, role, queues, expiresInSeconds });
        if (json) {
          process.stdout.write(`${JSON.stringify(tokenJson(t, secret), null, 2)}\n`);
          return;
        }
        process.stdout.write(
          `token ${t.name} (${t.id}) created: role ${t.role}, queues ${t.queues.length > 0 ? t.queues.join(',') : '*'}, ` +
            `expires ${t.expiresAt ? time(t.expiresAt) : 'never'}\n` +
            `secret: ${secret}\n` +
            'Store the secret now: it will not be shown again (only its hash is kept).\n',
        );
      });
    });

  token
    .command('list')
    .description('list the tokens not revoked (expired ones too, with their expiry), newest first (never their secrets)')
    .option('--all', 'also list revoked tokens')
    .option(dbOption, dbDoc)
    .action(async (opts: AdminOptions & { all?: boolean }, cmd: Command) => {
      await withBackend(cmd, opts, 'ListTokens', async (b, json) => {
        const tokens = await b.list(Boolean(opts.all));
        process.stdout.write(`${json ? JSON.stringify(tokens.map((t) => tokenJson(t)), null, 2) : tokenTable(tokens)}\n`);
      });
    });

  token
    .command('revoke <token>')
    .description('revoke a token by its id or its name (it stops working within 5 s on every server)')
    .option(dbOption, dbDoc)
    .action(async (ref: string, opts: AdminOptions, cmd: Command) => {
      await withBackend(cmd, opts, 'RevokeToken', async (b, json) => {
        const t = await b.revoke(ref);
        process.stdout.write(`${json ? JSON.stringify(tokenJson(t), null, 2) : `token ${t.name} (${t.id}) revoked at ${time(t.revokedAt)}`}\n`);
      }, ref);
    });

  program
    .command('audit')
    .description('the audit log, newest first: every administrative change, who made it and when')
    .option('--limit <n>', 'how many events (1..10000)', '50')
    .option('--action <actions>', `only these actions, comma-separated (${AUDIT_ACTIONS.join(', ')})`)
    .option('--target <target>', 'only changes of this target (a queue, job id, schedule or token id)')
    // Not --token: that is the program-wide option carrying the caller's own API token.
    .option('--by-token <token>', 'only changes made with this token (its id or name)')
    .option(dbOption, dbDoc)
    .action(async (opts: AdminOptions & { limit: string; action?: string; target?: string; byToken?: string }, cmd: Command) => {
      const limit = parseInteger(opts.limit, '--limit', 1, 10_000);
      const actions = listParse(opts.action).map((a) => {
        if (!AUDIT_ACTIONS.includes(a as AuditActionName)) throw new UsageError(`--action: unknown action "${a}" (expected ${AUDIT_ACTIONS.join(', ')})`);
        return a as AuditActionName;
      });
      if (opts.action !== undefined && actions.length === 0) throw new UsageError('--action names no action: give one, or leave the flag out');
      const target = nonEmpty(opts.target, '--target');
      const byToken = nonEmpty(opts.byToken, '--by-token');
      await withBackend(cmd, opts, 'ListAuditEvents', async (b, json) => {
        const events = await b.audit({ actions: actions.length > 0 ? actions : undefined, target, token: byToken, limit });
        if (json) {
          const out = events.map((e) => ({
            id: e.id, at: e.at?.toISOString() ?? null, actor_kind: e.actorKind, token_id: e.tokenId, token_name: e.tokenName,
            action: e.action, target: e.target, change: e.change,
          }));
          process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
          return;
        }
        process.stdout.write(
          `${table(['ID', 'AT', 'ACTOR', 'ACTION', 'TARGET', 'CHANGE'], events.map((e) => [String(e.id), time(e.at), actorText(e), e.action ?? '?', e.target, JSON.stringify(e.change)]))}\n`,
        );
      });
    });
}

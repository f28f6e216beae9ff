import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { EvoraApiError, StatusCode } from '../sdk/index.js';
import { databaseUrlCheck } from '../server/config.js';
import { UsageError } from './flags.js';

/**
 * A failure of `evora migrate` or `evora db create-role` as the CLI reports it: a database
 * that cannot be reached (refused, timed out, restarting: src/store/availability.ts decides)
 * becomes UNAVAILABLE, exit 5 and "database unavailable: <reason>", as for the token
 * commands' --database-url and a client command's unreachable server, so a deploy script
 * can tell "retry later" from a real failure; any other error is returned as it is.
 */
export async function databaseFailure(err: unknown, method: string): Promise<unknown> {
  const { databaseUnavailableReason } = await import('../store/availability.js');
  const reason = databaseUnavailableReason(err);
  if (reason === null) return err;
  return new EvoraApiError({ code: StatusCode.UNAVAILABLE, method, details: `database unavailable: ${reason}`, cause: err });
}

/**
 * The database URL a command was given (`--database-url`, else DATABASE_URL), checked as the
 * server checks its own (databaseUrlCheck): a value pg would misread is bad usage, exit 2,
 * in one line naming where it came from; undefined when neither is set. An empty flag is
 * bad usage too.
 */
export function databaseUrlOption(flag: string | undefined): string | undefined {
  // An empty flag is an unset shell variable (`--database-url "$URL"`), refused as serve and
  // migrate refuse it (configLoad), not taken for DATABASE_URL or, for token and audit, the server.
  if (flag === '') throw new UsageError('--database-url was given an empty value: give a PostgreSQL URL, or leave the flag out (then DATABASE_URL is used)');
  const url = flag || process.env.DATABASE_URL || undefined;
  if (url === undefined) return undefined;
  try {
    return databaseUrlCheck(url, flag ? '--database-url' : 'DATABASE_URL');
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/**
 * `evora db create-role`: the least-privilege database roles (docs/security.md, "Database
 * role"), made with DATABASE_URL of a role that may create roles and act as them (a
 * superuser). It applies the pending migrations (acting as the owner role when the schema
 * has one), then creates or updates the application role and the owner role, moves the
 * ownership of schema evora to the owner role, and grants the application role DML and
 * EXECUTE only. Idempotent: run it again after an upgrade, or to change the password.
 * Prints one line (or with --json one object); never the password.
 */
export function dbCommandsAdd(program: Command): void {
  const db = program.command('db').description('database administration (run with DATABASE_URL of a superuser)');
  db.command('create-role')
    .description(
      'create or update the LOGIN role Evora connects as (DML and EXECUTE on schema evora only) and the NOLOGIN role that owns ' +
        'the schema (migrations act as it); applies pending migrations first; idempotent',
    )
    .option('--name <role>', 'the application role (LOGIN)', 'evora_app')
    .option('--owner <role>', 'the role that owns schema evora (NOLOGIN)', 'evora_owner')
    .option('--password <password>', "the application role's password (sent to PostgreSQL only as a SCRAM verifier)")
    .option('--password-file <file>', 'read the password from this file (its first line)')
    .option('--database-url <url>', 'PostgreSQL as a superuser [env DATABASE_URL]')
    .action(async (opts: { name: string; owner: string; password?: string; passwordFile?: string; databaseUrl?: string }) => {
      const url = databaseUrlOption(opts.databaseUrl);
      if (!url) throw new UsageError('evora db create-role needs --database-url or DATABASE_URL (a role that may create roles, e.g. the superuser)');
      if (opts.password !== undefined && opts.passwordFile !== undefined) throw new UsageError('give --password or --password-file, not both');
      let password: string | null = opts.password ?? null;
      if (opts.passwordFile !== undefined) {
        const text = await readFile(opts.passwordFile, 'utf8').catch((err: unknown) => {
          throw new UsageError(`cannot read --password-file ${opts.passwordFile}: ${(err as Error).message}`);
        });
        password = text.split(/\r?\n/)[0] ?? '';
      }
      if (password === '') throw new UsageError('the password is empty');
      const { dbRoleEnsure, dbRoleNameCheck } = await import('../store/roles.js');
      const { migrate } = await import('../store/migrate.js');
      try {
        dbRoleNameCheck(opts.name, '--name');
        dbRoleNameCheck(opts.owner, '--owner');
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
      if (opts.name === opts.owner) throw new UsageError('--name and --owner must differ');
      let applied: number[];
      let r: Awaited<ReturnType<typeof dbRoleEnsure>>;
      try {
        applied = await migrate(url, undefined, { waiting: (line) => process.stderr.write(`evora: ${line}\n`) });
        r = await dbRoleEnsure(url, { app: opts.name, owner: opts.owner, password });
      } catch (err) {
        throw await databaseFailure(err, 'db create-role');
      }
      const json = program.opts<{ json?: boolean }>().json;
      if (json) {
        process.stdout.write(
          `${JSON.stringify({
            role: opts.name,
            owner: opts.owner,
            role_created: r.appCreated,
            owner_created: r.ownerCreated,
            password_set: r.passwordSet,
            objects_moved: r.objectsMoved,
            migrations_applied: applied,
          })}\n`,
        );
        return;
      }
      const parts = [
        `role ${opts.name} ${r.appCreated ? 'created' : 'updated'} (LOGIN, DML and EXECUTE on schema evora${r.passwordSet ? ', password set' : ''})`,
        `${opts.owner} ${r.ownerCreated ? 'created, ' : ''}owns schema evora${r.objectsMoved > 0 ? ` (${r.objectsMoved} objects moved to it)` : ''}`,
        applied.length > 0 ? `migrations ${applied.join(', ')} applied` : 'schema up to date',
      ];
      process.stdout.write(`evora: ${parts.join('; ')}\n`);
    });
}

import { readFileSync, readdirSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { inTransaction, rowsOf, script, scriptRun, statement, type None } from './statements.js';

/** One numbered SQL file from ./migrations/. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The folder of the migrations, next to this module (the build copies them to dist). */
const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);

/**
 * The migrations in version order: ./migrations/NNNN_name.sql. File names are the contract:
 * a version, once released, keeps its number, name and content; a schema change is a new
 * file with the next number.
 */
export function migrationsLoad(): Migration[] {
  const migrations: Migration[] = [];
  for (const file of readdirSync(MIGRATIONS_DIR).sort()) {
    const match = /^(\d+)_([\w-]+)\.sql$/.exec(file);
    if (!match) continue;
    migrations.push({ version: Number(match[1]), name: match[2]!, sql: readFileSync(new URL(file, MIGRATIONS_DIR), 'utf8') });
  }
  return migrations;
}

/**
 * A line `-- evora:commit` in a migration: what comes before it is committed before the rest
 * runs, in a transaction of its own (ALTER TYPE ... ADD VALUE: a new enum value cannot be
 * used in the transaction that adds it). The part before it must be safe to run again (IF NOT
 * EXISTS): a failure after that commit leaves it applied and the migration unrecorded.
 */
const COMMIT_MARKER = /^-- evora:commit[ \t]*$/m;

/** A migration's SQL as [the part before its commit marker, the rest], or [all of it, null]. */
function migrationSplit(sql: string): [string, string | null] {
  const m = COMMIT_MARKER.exec(sql);
  if (!m) return [sql, null];
  return [sql.slice(0, m.index), sql.slice(m.index + m[0].length)];
}

/**
 * How long the migrations' and the role setup's own connection may take to be made (TCP and
 * the startup handshake) before it is given up as "database unavailable". Without a bound a
 * host that drops packets, or a database that accepts connections but never answers (frozen),
 * holds `evora migrate` forever, and the server's start with it instead of retrying. Only the
 * connect is bounded: the migrations themselves may wait on the migration lock for as long
 * as another process holds it.
 */
export const SETUP_CONNECT_TIMEOUT_MS = 10_000;

/**
 * How many times a migration's transaction that PostgreSQL aborted to break a deadlock (40P01)
 * is run again, after DEADLOCK_RETRY_MS times the attempt. Traffic locks evora.queues before
 * evora.jobs (a submit); a migration that takes them the other way round can be chosen as the
 * victim while jobs are submitted. Its transaction was rolled back whole, so running it again is
 * safe, and the next attempt usually meets other statements.
 */
export const MIGRATION_DEADLOCK_RETRIES = 5;
const DEADLOCK_RETRY_MS = 200;

/** Advisory lock key that serialises migration runs across every process on the database. */
const MIGRATION_LOCK_KEY = 7_301_846_001;

const migrationLockSql = statement<{ key: number }, { locked: string }>('migration-lock', { key: 'int8' }, { locked: 'void' });
const migrationBlockersSql = statement<{ pid: number }, { pid: number; application_name: string; usename: string | null; state: string | null; xact_start: Date | null; query: string }>(
  'migration-blockers',
  { pid: 'int4' },
  { pid: 'int4', application_name: 'text', usename: 'text', state: 'text', xact_start: 'timestamptz', query: 'text' },
);

/**
 * How long a migration round may wait before `waiting` is told who it waits for, and then
 * how often again while it still waits. Another server or `evora migrate` migrating holds the
 * migration lock for a moment; a session that locked evora.schema_migrations or evora.jobs
 * and was left open holds it for good, and a start that waits on it silently (its /readyz
 * "not ready", nothing logged) leaves the operator guessing.
 */
export const MIGRATION_WAIT_NOTICE_MS = 10_000;
const MIGRATION_WAIT_REPEAT_MS = 60_000;

/** Options of migrate(). */
export interface MigrateOptions {
  /**
   * Told, in one line, when a migration round has waited MIGRATION_WAIT_NOTICE_MS for locks
   * (and every minute after): the sessions it waits for. The server logs it; the CLI prints it.
   */
  waiting?: (line: string) => void;
  /** MIGRATION_WAIT_NOTICE_MS unless a test says otherwise. */
  waitNoticeMs?: number;
}

/**
 * Until the returned stop is called: after `noticeMs`, then every minute, asks PostgreSQL on a
 * connection of its own which sessions the backend `pid` waits for, and tells `waiting` (none:
 * nothing said; it is not waiting on a lock). Best effort: a failure to ask is ignored.
 */
function waitWatch(connectionString: string, pid: number, waiting: (line: string) => void, noticeMs: number): () => void {
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  const ask = async () => {
    const client = new pg.Client({ connectionString, application_name: 'evora-migrate-watch', connectionTimeoutMillis: SETUP_CONNECT_TIMEOUT_MS });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const blockers = await rowsOf(client, migrationBlockersSql, { pid });
      if (!stopped && blockers.length > 0) waiting(migrationWaitLine(blockers));
    } catch {
      // Best effort: the migration's own connection reports a database that went away.
    } finally {
      await client.end().catch(() => undefined);
    }
    if (!stopped) timer = setTimeout(() => void ask(), MIGRATION_WAIT_REPEAT_MS);
  };
  timer = setTimeout(() => void ask(), noticeMs);
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

/** The line a waiting migration says: the sessions it waits for, and that it goes on by itself. */
export function migrationWaitLine(
  blockers: readonly { pid: number; application_name: string; usename: string | null; state: string | null; xact_start: Date | null; query: string }[],
): string {
  const who = blockers
    .map((b) => {
      const since = b.xact_start ? `, in a transaction since ${b.xact_start.toISOString()}` : '';
      return `pid ${b.pid} (${b.application_name ? `application "${b.application_name}", ` : ''}role ${b.usename ?? '?'}, ${b.state ?? 'state unknown'}${since}, last statement ${JSON.stringify(b.query.replace(/\s+/g, ' ').trim())})`;
    })
    .join('; ');
  return `migrations are waiting for a lock held by ${blockers.length === 1 ? 'another session' : `${blockers.length} other sessions`}: ${who}; they go on by themselves once it ends (another server or \`evora migrate\` migrating ends soon; a session left open does not: end it, e.g. SELECT pg_terminate_backend(${blockers[0]!.pid}))`;
}
const migrationBookkeepingCreateSql = script('migration-bookkeeping-create');
const migrationSchemaCreateSql = script('migration-schema-create');
const migrationOwnerBecomeSql = statement<None, { role: string | null; schema_exists: boolean; bookkept: boolean }>(
  'migration-owner-become',
  {},
  { role: 'text', schema_exists: 'bool', bookkept: 'bool' },
);
const migrationAppliedListSql = statement<None, { version: number; name: string }>(
  'migration-applied-list',
  {},
  { version: 'int4', name: 'text' },
);
const migrationRecordSql = statement<{ version: number; name: string }, None>('migration-record', { version: 'int4', name: 'text' }, {});
const migrationDatabaseEncodingSql = statement<None, { encoding: string }>('migration-database-encoding', {}, { encoding: 'text' });

/**
 * The database character sets Evora's schema may be created in: UTF8, and SQL_ASCII (which
 * stores the bytes it is sent, so UTF-8 too). In any other (LATIN1, WIN1252, EUC_JP) the
 * baseline failed halfway through with a line about its own text ("character with byte
 * sequence 0xe2 0x80 0xa6 in encoding "UTF8" has no equivalent in encoding "LATIN1""), and
 * payloads, names and errors outside that set could not have been stored either.
 */
const MIGRATION_ENCODINGS = new Set(['UTF8', 'SQL_ASCII']);

/**
 * A database whose recorded migrations this version does not know: migrated by the
 * development chain 0001_jobs … 0009_submit_handoff that the baseline replaced, or by a newer
 * Evora. Nothing was changed. Its message is one line saying which, and what to do.
 */
export class MigrationsUnknownError extends Error {
  // The CLI tells it by name (its own exit code) without loading the store.
  override readonly name = 'MigrationsUnknownError';
}

/** The first migration of the development chain the baseline replaced (it recorded 1 'jobs'). */
const PRE_RELEASE_FIRST = { version: 1, name: 'jobs' };

/** The refusal of a database whose `unknown` migrations this version, knowing `known`, does not know. */
function migrationsUnknownMessage(unknown: { version: number; name: string }[], known: Migration[]): string {
  const label = (m: { version: number; name: string }) => `${String(m.version).padStart(4, '0')}_${m.name}`;
  const names = unknown.map(label).join(', ');
  const newest = known.reduce<Migration | null>((a, m) => (a && a.version > m.version ? a : m), null);
  if (unknown.some((m) => m.version === PRE_RELEASE_FIRST.version && m.name === PRE_RELEASE_FIRST.name)) {
    return (
      `the database records migrations this version does not know (${names}): its schema predates the ` +
      'baseline migration; nothing was changed. Start from an empty database: drop the evora schema (DROP SCHEMA ' +
      'evora CASCADE; its jobs are lost), or for the embedded database delete its data folder (.evora/pgdata), ' +
      'then start again.'
    );
  }
  if (newest && unknown.every((m) => m.version > newest.version)) {
    return (
      `the database was migrated by a newer Evora (it records ${names}; this version knows migrations up to ` +
      `${label(newest)}); nothing was changed. Run that version of Evora, or a newer one.`
    );
  }
  return (
    `the database records migrations this version does not know (${names}); nothing was changed. ` +
    'Run the version of Evora that migrated it.'
  );
}

/**
 * Applies every migration not yet recorded in evora.schema_migrations, each in a transaction
 * of its own (two for one with a commit marker, see COMMIT_MARKER) that records it, under a
 * transaction-level advisory lock taken again for each: processes migrating at once apply
 * each migration exactly once, taking turns (each may apply some of them and returns only
 * when none is pending; its list is its own share). One transaction per migration, not one for all, so
 * that the locks a migration takes (ACCESS EXCLUSIVE on evora.jobs for an ALTER TABLE) are
 * held only while it runs: held across a jump of several releases, a lock on evora.jobs
 * taken by one migration and one on evora.queues by a later one deadlocked with submits, which
 * take them in the other order. A deadlock aborts only the migration that ran, which is run
 * again (MIGRATION_DEADLOCK_RETRIES). A failure leaves the schema at the last migration
 * applied (and a marked migration's re-runnable first part): running again goes on from
 * there. Forward only. Returns the versions it applied.
 *
 * Each transaction acts as the owner role of the evora schema when the connecting role is
 * another that may (a superuser; sql/migration-owner-become.sql), so what migrations create
 * belongs to that owner; a role that may not (the application role) runs nothing when the
 * schema is up to date and fails with a hint when a migration is pending.
 *
 * Refuses (MigrationsUnknownError, one line saying what to do) a database that records a
 * migration this version does not know, instead of applying the rest over a schema it
 * cannot vouch for. Messages carry no "evora:" prefix: the CLI adds it.
 */
export async function migrate(connectionString: string, migrations: Migration[] = migrationsLoad(), opts: MigrateOptions = {}): Promise<number[]> {
  const client = new pg.Client({ connectionString, application_name: 'evora-migrate', connectionTimeoutMillis: SETUP_CONNECT_TIMEOUT_MS });
  // A dropped connection is reported by the query that was running.
  client.on('error', () => undefined);
  await client.connect();
  const pid = (client as unknown as { processID: number | null }).processID;
  const watchStop =
    opts.waiting && pid !== null ? waitWatch(connectionString, pid, opts.waiting, opts.waitNoticeMs ?? MIGRATION_WAIT_NOTICE_MS) : () => undefined;
  try {
    const applied: number[] = [];
    // The migrations whose part before their commit marker this call has committed.
    const headsDone = new Set<number>();
    // One transaction per round; a round ends after one migration, or its part before its
    // marker, and says which: the sets above change only once its transaction has committed.
    for (let deadlocks = 0; ; ) {
      let step: { version: number; part: 'head' | 'whole' } | null;
      try {
        step = await inTransaction(client, async () => {
          await rowsOf(client, migrationLockSql, { key: MIGRATION_LOCK_KEY });
          // Act as the schema's owner role when it is not us (docs/security.md, "Database role").
          const owner = (await rowsOf(client, migrationOwnerBecomeSql, {}))[0]!;
          if (!owner.schema_exists) await scriptRun(client, migrationSchemaCreateSql);
          if (!owner.bookkept) await scriptRun(client, migrationBookkeepingCreateSql);
          const recorded = await rowsOf(client, migrationAppliedListSql, {});
          const unknown = recorded.filter((r) => !migrations.some((m) => m.version === r.version && m.name === r.name));
          if (unknown.length > 0) throw new MigrationsUnknownError(migrationsUnknownMessage(unknown, migrations));
          const done = new Set(recorded.map((r) => r.version));
          const m = migrations.find((x) => !done.has(x.version));
          if (!m) return null;
          const { encoding } = (await rowsOf(client, migrationDatabaseEncodingSql, {}))[0]!;
          if (!MIGRATION_ENCODINGS.has(encoding)) {
            throw new Error(
              `the database's encoding is ${encoding}, and Evora needs UTF8: create its database with ENCODING 'UTF8' ` +
                `(CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0); nothing was changed`,
            );
          }
          const [head, tail] = migrationSplit(m.sql);
          if (tail !== null && !headsDone.has(m.version)) {
            await client.query(head);
            return { version: m.version, part: 'head' as const };
          }
          await client.query(tail ?? head);
          await rowsOf(client, migrationRecordSql, { version: m.version, name: m.name });
          return { version: m.version, part: 'whole' as const };
        });
      } catch (err) {
        // 40P01 deadlock_detected: this round's transaction was the victim and rolled back whole.
        if ((err as { code?: string }).code !== '40P01' || deadlocks >= MIGRATION_DEADLOCK_RETRIES) throw err;
        deadlocks++;
        await delay(DEADLOCK_RETRY_MS * deadlocks);
        continue;
      }
      if (!step) return applied;
      if (step.part === 'head') headsDone.add(step.version);
      else applied.push(step.version);
    }
  } catch (err) {
    if (err instanceof MigrationsUnknownError) throw err;
    // 42501 insufficient_privilege: the application role (which may not change the schema) met a pending migration.
    const hint =
      (err as { code?: string }).code === '42501'
        ? ' (this role may not change the evora schema: run `evora migrate` with the URL of a superuser or of a member of the schema\'s owner role, docs/security.md)'
        : '';
    throw new Error(`migration failed: ${(err as Error).message}${hint}`, { cause: err });
  } finally {
    watchStop();
    await client.end().catch(() => undefined);
  }
}

import { databaseUnavailableReason } from './availability.js';
import { readFileSync, readdirSync } from 'node:fs';
import type pg from 'pg';

/**
 * The statement loader: every query and data statement Evora runs is a file in ./sql/ (see
 * its README.md), read once when this module loads, relative to this module (the build
 * copies the files next to the compiled code). Not files: transaction control (BEGIN,
 * COMMIT, ROLLBACK) and the listener's LISTEN, which take no parameters and return nothing
 * to declare, and the migrations (./migrations/). Each file opens with a header naming the statement
 * (`-- name: jobClaim`, the camelCase of the file name) and uses named parameters
 * (`:queues`, `:now`); the loader turns them into `$1..$n` once, and a call builds the
 * values array by index from a precomputed list of names, so running a statement costs no
 * parsing. The files repeat shared pieces (the outbox CTE) on purpose: each statement is
 * read whole, in one place, as PostgreSQL runs it.
 *
 * Each statement is declared once in TypeScript (`statement<Params, Row>(file, paramTypes,
 * rowTypes)`) next to the code that runs it. The declared PostgreSQL types are checked
 * against the migrated schema by test/store/statements.test.ts (parameter and result types
 * as PostgreSQL infers them when it prepares the statement), which also fails on a file that
 * nothing declares. A declaration whose parameter names differ from the file's fails when
 * the module loads.
 */

/** The folder of the statement files. */
export const SQL_DIR = new URL('./sql/', import.meta.url);

/**
 * A PostgreSQL type as a declaration names it: any spelling `::regtype` accepts (the
 * statement test compares them by their canonical name).
 */
export type PgType =
  | 'bool' | 'bool[]' | 'int4' | 'int4[]' | 'int8' | 'int8[]' | 'float8' | 'float8[]'
  | 'text' | 'text[]' | 'uuid' | 'uuid[]' | 'jsonb' | 'jsonb[]' | 'timestamptz' | 'timestamptz[]'
  | 'xid8' | 'void' | 'bytea'
  | 'evora.job_state' | 'evora.job_state[]' | 'evora.backoff_kind'
  | 'evora.job_event_kind[]' | 'evora.attempt_outcome';

/** The declared type of every parameter (or column) of a statement: every key, nothing else. */
export type PgTypes<T> = { readonly [K in keyof T]-?: PgType };

/** A statement without parameters (or a result without columns). */
export type None = Record<never, never>;

/** How a statement runs. */
export type StatementKind =
  /** One statement over the extended protocol, with parameters. */
  | 'query'
  /** Utility SQL (DDL, several statements) over the simple protocol: no parameters, no rows. */
  | 'script';

/** A loaded, declared statement: what the store runs and the tests check. */
export interface Statement<P = unknown, R = unknown> {
  /** The header's name, e.g. jobClaim. */
  readonly name: string;
  /** The file in ./sql/, e.g. job-claim.sql. */
  readonly file: string;
  readonly kind: StatementKind;
  /** The SQL sent to PostgreSQL: the file without its header, parameters as $1..$n. */
  readonly text: string;
  /** Parameter i+1's name ($1 is paramNames[0]). */
  readonly paramNames: readonly string[];
  readonly paramTypes: PgTypes<P>;
  /** The result columns in order (empty for a statement that returns no rows). */
  readonly rowTypes: PgTypes<R>;
  /**
   * The name it is prepared under on each connection (`evora_job_claim`), or null for a
   * statement planned at every call. Hot-path statements are prepared: planning their CTEs
   * costs about 1 ms, paid once per connection. Behind a pooler the store's connections
   * drop the name and run it unnamed (connections.ts).
   */
  readonly preparedName: string | null;
  /**
   * `raw`: rows come back as arrays of PostgreSQL's text, nothing parsed (rawRowsOf), for the
   * hot path's big results: the caller reads only what it needs, by column index
   * (columnIndexes), and parses it itself. `object`: rows as objects of parsed values.
   */
  readonly rowForm: 'object' | 'raw';
}

/** What can run a statement: a pool, a pool's client, or a dedicated client. */
export interface Queryable {
  query(config: pg.QueryConfig): Promise<pg.QueryResult>;
}

/** A statement file, parsed. */
export interface ParsedSql {
  name: string;
  text: string;
  paramNames: string[];
}

/**
 * Parses a statement file: the header's name, and the named parameters turned into
 * positional ones. `::type` casts are not parameters; string literals (also E'' and
 * dollar-quoted), quoted identifiers and comments are skipped. Positional `$n` in a file
 * is refused: the files name their parameters.
 */
export function sqlParse(source: string, file: string): ParsedSql {
  const lines = source.split('\n');
  let bodyStart = 0;
  while (bodyStart < lines.length && /^\s*(--.*)?$/.test(lines[bodyStart]!)) bodyStart++;
  const header = lines.slice(0, bodyStart).join('\n');
  const name = /^--\s*name:\s*(\w+)\s*$/m.exec(header)?.[1];
  if (!name) throw new Error(`evora: ${file}: the header names no statement (-- name: ...)`);
  const body = lines.slice(bodyStart).join('\n').trim();

  const paramNames: string[] = [];
  let out = '';
  let i = 0;
  const n = body.length;
  const isIdentStart = (c: string | undefined) => c !== undefined && /[A-Za-z_]/.test(c);
  const isIdent = (c: string | undefined) => c !== undefined && /[A-Za-z0-9_$]/.test(c);
  const copyUntil = (end: number) => {
    out += body.slice(i, end);
    i = end;
  };
  while (i < n) {
    const c = body[i]!;
    const next = body[i + 1];
    if (c === '-' && next === '-') {
      const eol = body.indexOf('\n', i);
      copyUntil(eol < 0 ? n : eol);
    } else if (c === '/' && next === '*') {
      let depth = 0;
      let j = i;
      do {
        if (body.startsWith('/*', j)) (depth++, (j += 2));
        else if (body.startsWith('*/', j)) (depth--, (j += 2));
        else j++;
      } while (depth > 0 && j < n);
      copyUntil(j);
    } else if (c === "'") {
      const escapes = /[Ee]/.test(body[i - 1] ?? '') && !isIdent(body[i - 2]);
      let j = i + 1;
      while (j < n) {
        if (escapes && body[j] === '\\') j += 2;
        else if (body[j] === "'" && body[j + 1] === "'") j += 2;
        else if (body[j] === "'") break;
        else j++;
      }
      copyUntil(j + 1);
    } else if (c === '"') {
      let j = i + 1;
      while (j < n && !(body[j] === '"' && body[j + 1] !== '"')) j += body[j] === '"' ? 2 : 1;
      copyUntil(j + 1);
    } else if (c === '$' && !isIdent(body[i - 1])) {
      if (next !== undefined && /[0-9]/.test(next)) {
        throw new Error(`evora: ${file}: positional parameter $${next}...: name it (:name) instead`);
      }
      const tag = /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/.exec(body.slice(i))?.[0];
      if (!tag) {
        copyUntil(i + 1);
        continue;
      }
      const close = body.indexOf(tag, i + tag.length);
      copyUntil(close < 0 ? n : close + tag.length);
    } else if (c === ':' && next === ':') {
      copyUntil(i + 2);
    } else if (c === ':' && isIdentStart(next) && body[i - 1] !== ':') {
      let j = i + 1;
      while (j < n && /[A-Za-z0-9_]/.test(body[j]!)) j++;
      const param = body.slice(i + 1, j);
      let index = paramNames.indexOf(param);
      if (index < 0) index = paramNames.push(param) - 1;
      out += `$${index + 1}`;
      i = j;
    } else {
      copyUntil(i + 1);
    }
  }
  return { name, text: out, paramNames };
}

/** camelCase of a file's base name: job-claim.sql -> jobClaim. */
function nameOfFile(file: string): string {
  return file.replace(/\.sql$/, '').replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** jobClaim -> evora_job_claim */
function preparedNameOf(name: string): string {
  return `evora_${name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}`;
}

/** Every statement file, parsed, by file name (read once, when this module loads). */
const files = new Map<string, ParsedSql>();
for (const file of readdirSync(SQL_DIR).filter((f) => f.endsWith('.sql')).sort()) {
  const parsed = sqlParse(readFileSync(new URL(file, SQL_DIR), 'utf8'), file);
  if (parsed.name !== nameOfFile(file)) {
    throw new Error(`evora: ${file}: its header names "${parsed.name}"; a file is named after its statement (${nameOfFile(file)})`);
  }
  files.set(file, parsed);
}

const declared = new Map<string, Statement>();

/**
 * Declares the statement in ./sql/<file>.sql with the types of its parameters and result
 * columns (in the order the statement returns them). Throws when the file is missing,
 * already declared, or names other parameters than declared. `prepared`: run as a named
 * prepared statement (the hot path).
 */
export function statement<P, R>(
  file: string,
  paramTypes: PgTypes<P>,
  rowTypes: PgTypes<R>,
  opts: { prepared?: boolean; raw?: boolean } = {},
): Statement<P, R> {
  return declare(file, 'query', paramTypes, rowTypes, opts.prepared === true, opts.raw === true);
}

/** Declares utility SQL run as it is (simple protocol): no parameters, no rows. */
export function script(file: string): Statement<None, None> {
  return declare(file, 'script', {}, {}, false, false);
}

function declare<P, R>(
  file: string,
  kind: StatementKind,
  paramTypes: PgTypes<P>,
  rowTypes: PgTypes<R>,
  prepared: boolean,
  raw: boolean,
): Statement<P, R> {
  const fileName = `${file}.sql`;
  const parsed = files.get(fileName);
  if (!parsed) throw new Error(`evora: no statement file sql/${fileName}`);
  if (declared.has(fileName)) throw new Error(`evora: sql/${fileName} is declared twice`);
  const declaredNames = Object.keys(paramTypes).sort();
  const fileNames = [...parsed.paramNames].sort();
  if (declaredNames.join() !== fileNames.join()) {
    throw new Error(`evora: sql/${fileName} takes (${fileNames.join(', ')}) but is declared with (${declaredNames.join(', ')})`);
  }
  const s: Statement<P, R> = {
    name: parsed.name,
    file: fileName,
    kind,
    text: parsed.text,
    paramNames: parsed.paramNames,
    paramTypes,
    rowTypes,
    preparedName: prepared ? preparedNameOf(parsed.name) : null,
    rowForm: raw ? 'raw' : 'object',
  };
  declared.set(fileName, s as Statement);
  return s;
}

/** Every declared statement (those of the modules loaded so far). */
export function statementsDeclared(): Statement[] {
  return [...declared.values()];
}

/** Every statement file in ./sql/. */
export function statementFiles(): string[] {
  return [...files.keys()];
}

/**
 * In development a call checks its parameters (a missing one, undefined, or one the
 * statement does not take throws): cheap, and it catches a caller and a file drifting
 * apart. NODE_ENV=production skips it.
 */
const CHECK_PARAMS = process.env.NODE_ENV !== 'production';

/** The query config that runs `s` with `params`: values by index, prepared by name if so declared. */
export function queryConfig<P>(s: Statement<P, unknown>, params: P): pg.QueryConfig {
  const names = s.paramNames;
  const values: unknown[] = new Array(names.length);
  const byName = params as Record<string, unknown>;
  for (let i = 0; i < names.length; i++) values[i] = byName[names[i]!];
  if (CHECK_PARAMS) paramsCheck(s, byName);
  const config: pg.QueryConfig = s.preparedName === null ? { text: s.text, values } : { name: s.preparedName, text: s.text, values };
  if (s.rowForm === 'raw') Object.assign(config, RAW_ROWS);
  return config;
}

/**
 * Rows as arrays of text, every value as PostgreSQL sent it (no type parser runs): what a
 * `raw` statement's query asks node-postgres for.
 */
const RAW_ROWS = {
  rowMode: 'array',
  types: { getTypeParser: () => (value: string) => value } as unknown as pg.CustomTypesConfig,
} as const;

/** A row of a `raw` statement: each column's text as PostgreSQL sent it, null for NULL. */
export type RawRow = readonly (string | null)[];

/** Each result column's index in a `raw` statement's rows, by the declared column name. */
export function columnIndexes<R>(s: Statement<unknown, R>): { readonly [K in keyof R]-?: number } {
  return Object.fromEntries(Object.keys(s.rowTypes).map((name, i) => [name, i])) as { [K in keyof R]-?: number };
}

function paramsCheck(s: Statement, params: Record<string, unknown>): void {
  for (const name of s.paramNames) {
    if (params[name] === undefined) throw new Error(`evora: statement ${s.name}: parameter "${name}" is missing (pass null for none)`);
  }
  for (const key of Object.keys(params)) {
    if (!s.paramNames.includes(key)) throw new Error(`evora: statement ${s.name}: it takes no parameter "${key}"`);
  }
}

/** Runs a statement; returns its rows. */
export async function rowsOf<P, R>(db: Queryable, s: Statement<P, R>, params: P): Promise<R[]> {
  if (s.kind !== 'query' || s.rowForm !== 'object') throw new Error(`evora: ${s.name} is a ${s.rowForm === 'raw' ? 'raw statement: run it with rawRowsOf' : 'script: run it with scriptRun'}`);
  return (await db.query(queryConfig(s, params))).rows as R[];
}

/** Runs a `raw` statement; returns its rows as text (read them with columnIndexes). */
export async function rawRowsOf<P, R>(db: Queryable, s: Statement<P, R>, params: P): Promise<RawRow[]> {
  if (s.rowForm !== 'raw') throw new Error(`evora: ${s.name} is not a raw statement: run it with rowsOf`);
  return (await db.query(queryConfig(s, params))).rows as unknown as RawRow[];
}

/** Runs a statement that returns at most one row; returns it or undefined. */
export async function rowOf<P, R>(db: Queryable, s: Statement<P, R>, params: P): Promise<R | undefined> {
  return (await rowsOf(db, s, params))[0];
}

/** Runs a script (simple protocol). */
export async function scriptRun(db: Queryable, s: Statement<None, None>): Promise<void> {
  await db.query({ text: s.text });
}

/** A declared statement by its header name (for tools and tests: the store holds its own). */
export function statementNamed(name: string): Statement {
  const s = [...declared.values()].find((d) => d.name === name);
  if (!s) throw new Error(`evora: no declared statement "${name}"`);
  return s;
}

/**
 * Runs `fn` in one transaction on `client`: committed when `fn` returns, rolled back (and
 * the error rethrown) when it throws. The one place the store begins and ends transactions.
 */
export async function inTransaction<T>(client: pg.ClientBase, fn: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    const out = await fn();
    await client.query('COMMIT');
    return out;
  } catch (err) {
    // A connection the database dropped or stopped answering on is closed by the pool, which
    // ends the transaction; a ROLLBACK there would wait behind the unanswered statement.
    if (databaseUnavailableReason(err) === null) await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

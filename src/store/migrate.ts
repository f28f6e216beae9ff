import { readdir, readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';

/** One numbered SQL file from migrations/. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/**
 * Finds the project's migrations/ folder from this file's location, so the runner works
 * both from src/ (tests) and from dist/src/ (the built server).
 */
export function migrationsDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(dir, 'migrations');
    if (existsSync(join(candidate, '0001_jobs.sql'))) return candidate;
    if (dirname(dir) === dir) break;
    dir = dirname(dir);
  }
  throw new Error('evora: cannot find the migrations/ folder');
}

/** Reads migrations/NNNN_name.sql in version order. File names are the contract. */
export async function migrationsLoad(dir = migrationsDir()): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => /^\d+_[\w-]+\.sql$/.test(f)).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const match = /^(\d+)_([\w-]+)\.sql$/.exec(file);
    if (!match) continue;
    migrations.push({ version: Number(match[1]), name: match[2] ?? file, sql: await readFile(join(dir, file), 'utf8') });
  }
  return migrations;
}

/** Advisory lock key that serialises migration runs across every process on the database. */
const MIGRATION_LOCK_KEY = 7_301_846_001;

/**
 * Applies every migration not yet recorded in evora.schema_migrations, all in one
 * transaction under a transaction-level advisory lock: two servers starting at once
 * apply them exactly once (the second waits, then finds nothing to do), and a failure
 * leaves the schema as it was. Forward only. Returns the versions it applied.
 */
export async function migrate(pool: pg.Pool, migrations?: Migration[]): Promise<number[]> {
  const all = migrations ?? (await migrationsLoad());
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await client.query('CREATE SCHEMA IF NOT EXISTS evora');
    await client.query(`CREATE TABLE IF NOT EXISTS evora.schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const { rows } = await client.query<{ version: number }>('SELECT version FROM evora.schema_migrations');
    const done = new Set(rows.map((r) => r.version));
    const applied: number[] = [];
    for (const m of all) {
      if (done.has(m.version)) continue;
      await client.query(m.sql);
      await client.query('INSERT INTO evora.schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      applied.push(m.version);
    }
    await client.query('COMMIT');
    return applied;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw new Error(`evora: migration failed: ${(err as Error).message}`, { cause: err });
  } finally {
    client.release();
  }
}

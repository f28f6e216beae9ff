import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { withDatabase } from './global-setup.js';

/** A database of one test file's own, copied from the migrated template. */
export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/** The databases this test file created and has not dropped yet. */
const undropped = new Set<string>();

/**
 * The maintenance database of this worker's test cluster (global-setup.ts starts one per
 * vitest worker; VITEST_POOL_ID numbers the workers from 1).
 */
export function testClusterUrl(): string {
  const urls = inject('pgAdminUrls');
  const worker = Number(process.env.VITEST_POOL_ID ?? '1');
  return urls[(Math.max(1, worker) - 1) % urls.length]!;
}

/**
 * Creates a fresh, migrated database for one test file (empty: no schema at all, for migration
 * tests; encoding: an empty one in that character set, e.g. LATIN1).
 */
export async function testDatabaseCreate(opts: { empty?: boolean; encoding?: string } = {}): Promise<TestDatabase> {
  const adminUrl = testClusterUrl();
  const name = `evora_test_${randomBytes(6).toString('hex')}`;
  await adminQuery(
    adminUrl,
    opts.encoding
      ? `CREATE DATABASE ${name} ENCODING '${opts.encoding}' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`
      : opts.empty
        ? `CREATE DATABASE ${name}`
        : `CREATE DATABASE ${name} TEMPLATE ${inject('pgTemplate')}`,
  );
  undropped.add(name);
  return {
    url: withDatabase(adminUrl, name),
    drop: async () => {
      await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      undropped.delete(name);
    },
  };
}

/**
 * The databases this file made with testDatabaseCreate and did not drop: after the file's
 * teardowns this must be empty (test/helpers/teardown-hook.ts fails the file otherwise), since
 * a database left behind means its server or pool was left running too.
 */
export function testDatabasesUndropped(): string[] {
  return [...undropped];
}

async function adminQuery(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // CREATE DATABASE from a template fails while another session is copying it; retry briefly.
    for (let i = 0; ; i++) {
      try {
        await client.query(sql);
        return;
      } catch (err) {
        if (i >= 50 || !/being accessed by other users/.test((err as Error).message)) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    await client.end();
  }
}

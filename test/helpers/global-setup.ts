import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { embeddedPostgresStart, freePort, type EmbeddedPostgresHandle } from '../../src/server/embedded-postgres.js';
import { migrate } from '../../src/store/migrate.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Connection string of the test cluster's maintenance database. */
    pgAdminUrl: string;
    /** Name of the migrated template database each test file copies. */
    pgTemplate: string;
  }
}

const TEMPLATE = 'evora_test_template';

/**
 * Starts one PostgreSQL for the whole run (the embedded one, unless DATABASE_URL points
 * at a server), migrates a template database once, and hands its name to the test files,
 * which each copy it into a database of their own.
 */
export default async function setup(project: TestProject) {
  let embedded: EmbeddedPostgresHandle | null = null;
  let dataDir: string | null = null;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    // Under /tmp, not the project: as root the embedded server runs as the `postgres`
    // user, which must be able to reach its data folder.
    dataDir = await mkdtemp(join(tmpdir(), 'evora-test-pg-'));
    embedded = await embeddedPostgresStart({
      dataDir,
      port: await freePort(),
      // A throwaway cluster: durability buys the tests nothing.
      postgresFlags: ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=300'],
    });
    adminUrl = embedded.url;
  }
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${TEMPLATE}`);
  await admin.end();
  await migrate(withDatabase(adminUrl, TEMPLATE));

  project.provide('pgAdminUrl', adminUrl);
  project.provide('pgTemplate', TEMPLATE);

  return async () => {
    if (embedded) await embedded.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  };
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

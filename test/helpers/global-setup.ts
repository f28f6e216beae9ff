import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { embeddedPostgresStart, freePort, type EmbeddedPostgresHandle } from '../../src/server/embedded-postgres.js';
import { migrate } from '../../src/store/migrate.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /**
     * Connection strings of the test clusters' maintenance databases, one cluster per vitest
     * worker (testClusterUrl picks the worker's own).
     */
    pgAdminUrls: string[];
    /** Name of the migrated template database each test file copies. */
    pgTemplate: string;
  }
}

const TEMPLATE = 'evora_test_template';

/**
 * Starts the run's PostgreSQL (the embedded one, unless DATABASE_URL points at a server),
 * migrates a template database once per cluster, and hands the test files their cluster,
 * where each copies the template into a database of its own.
 *
 * Embedded, there is one cluster per vitest worker (files run two or more at a time): a
 * cluster's transaction ids are shared by all its databases, and the projector reads the
 * outbox only below the oldest transaction still open (sql/outbox-read.sql), so a file's
 * open transaction would hold back another file's projection in the same cluster. A file
 * runs alone in its worker, so in its own cluster it sees only its own transactions, as when
 * files ran one at a time. With DATABASE_URL every worker shares that one server (run with
 * --maxWorkers=1 if such a test then waits on another file).
 */
export default async function setup(project: TestProject) {
  const started: { embedded: EmbeddedPostgresHandle; dataDir: string }[] = [];
  const stopAll = async () => {
    await Promise.all(started.map(async ({ embedded, dataDir }) => {
      await embedded.stop();
      await rm(dataDir, { recursive: true, force: true });
    }));
  };
  let adminUrls: string[];
  if (process.env.DATABASE_URL) {
    adminUrls = [process.env.DATABASE_URL];
  } else {
    const workers = Math.max(1, Number(project.config.maxWorkers) || 1);
    try {
      adminUrls = await Promise.all(Array.from({ length: workers }, async () => {
        // Under /tmp, not the project: as root the embedded server runs as the `postgres`
        // user, which must be able to reach its data folder.
        const dataDir = await mkdtemp(join(tmpdir(), 'evora-test-pg-'));
        const embedded = await embeddedPostgresStart({
          dataDir,
          port: await freePort(),
          // A throwaway cluster: durability buys the tests nothing.
          postgresFlags: ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=300'],
        });
        started.push({ embedded, dataDir });
        return embedded.url;
      }));
    } catch (err) {
      await stopAll();
      throw err;
    }
  }
  try {
    await Promise.all(adminUrls.map(async (adminUrl) => {
      const admin = new pg.Client({ connectionString: adminUrl });
      await admin.connect();
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE} WITH (FORCE)`);
        await admin.query(`CREATE DATABASE ${TEMPLATE}`);
      } finally {
        await admin.end();
      }
      await migrate(withDatabase(adminUrl, TEMPLATE));
    }));
  } catch (err) {
    // A failed migration stops the clusters it started: none is left running after the run.
    await stopAll();
    throw err;
  }

  project.provide('pgAdminUrls', adminUrls);
  project.provide('pgTemplate', TEMPLATE);

  return stopAll;
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

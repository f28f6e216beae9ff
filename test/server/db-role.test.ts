import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { configLoad } from '../../src/server/config.js';
import { freePort } from '../../src/server/embedded-postgres.js';
import { serverStart } from '../../src/server/server.js';
import { silentLogger } from '../../src/logger.js';
import { cliSetup } from '../helpers/cli.js';
import { testDatabaseCreate, type TestDatabase } from '../helpers/db.js';
import { queueName } from '../helpers/factories.js';
import { jobInState } from '../helpers/wait.js';

/**
 * The least-privilege database role (docs/security.md, "Database role"): `evora db
 * create-role` on a database migrated by the superuser, then everything the application
 * role must not do, and a server that works end to end as it. Roles are cluster-wide, so
 * each run uses names of its own.
 */

const { evora } = cliSetup();
const suffix = randomBytes(4).toString('hex');
const APP = `evora_app_${suffix}`;
const OWNER = `evora_owner_${suffix}`;
/** A role that may log in and read the migrations' table, and nothing else (no grants). */
const BARE = `evora_bare_${suffix}`;
const PASSWORD = `pw-${suffix}`;
let db: TestDatabase;
let appUrl: string;

/** One statement on a connection of its own, as `url`'s role. */
async function sqlAs<R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  db = await testDatabaseCreate();
  const u = new URL(db.url);
  u.username = APP;
  u.password = PASSWORD;
  appUrl = u.toString();
});
afterAll(async () => {
  await db.drop();
  const admin = new URL(db.url);
  admin.pathname = '/postgres';
  await sqlAs(admin.toString(), `DROP ROLE IF EXISTS ${APP}`);
  await sqlAs(admin.toString(), `DROP ROLE IF EXISTS ${OWNER}`);
  await sqlAs(admin.toString(), `DROP ROLE IF EXISTS ${BARE}`);
});

describe('evora db create-role', () => {
  it('creates the roles and moves the schema to the owner; run again it changes nothing', async () => {
    const first = await evora('db', 'create-role', '--database-url', db.url, '--name', APP, '--owner', OWNER, '--password', PASSWORD, '--json');
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const r1 = JSON.parse(first.stdout) as Record<string, unknown>;
    expect(r1).toMatchObject({ role: APP, owner: OWNER, role_created: true, owner_created: true, password_set: true, migrations_applied: [] });
    expect(r1.objects_moved).toBeGreaterThan(10);

    const second = await evora('db', 'create-role', '--database-url', db.url, '--name', APP, '--owner', OWNER);
    expect(second).toMatchObject({ code: 0, stderr: '' });
    expect(second.stdout).toBe(`evora: role ${APP} updated (LOGIN, DML and EXECUTE on schema evora); ${OWNER} owns schema evora; schema up to date\n`);

    const [role] = await sqlAs<Record<string, boolean>>(
      db.url,
      'SELECT rolcanlogin, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolreplication, pg_has_role($1, $2, \'MEMBER\') AS member FROM pg_roles WHERE rolname = $1',
      [APP, OWNER],
    );
    expect(role).toEqual({ rolcanlogin: true, rolsuper: false, rolcreaterole: false, rolcreatedb: false, rolbypassrls: false, rolreplication: false, member: false });
    const owners = await sqlAs<{ owner: string }>(
      db.url,
      `SELECT DISTINCT pg_get_userbyid(relowner) AS owner FROM pg_class WHERE relnamespace = 'evora'::regnamespace
       UNION SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'evora'
       UNION SELECT DISTINCT pg_get_userbyid(proowner) FROM pg_proc WHERE pronamespace = 'evora'::regnamespace`,
    );
    expect(owners).toEqual([{ owner: OWNER }]);
  });

  it('refuses a bad role name with a usage error, changing nothing', async () => {
    const r = await evora('db', 'create-role', '--database-url', db.url, '--name', 'Bad-Name');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^evora: --name must be a lower-case identifier/);
  });
});

describe('the application role', () => {
  it('runs a server end to end (migrations up to date, submit, claim, complete), connected as itself', async () => {
    const server = await serverStart(configLoad({ databaseUrl: appUrl, host: '127.0.0.1', port: '0', httpPort: '0' }, {}), silentLogger());
    const client = new EvoraClient({ address: server.address });
    try {
      const users = await sqlAs<{ usename: string }>(
        db.url,
        "SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND usename IS NOT NULL AND pid <> pg_backend_pid()",
      );
      expect(users).toEqual([{ usename: APP }]);

      const queue = queueName();
      const { job } = await client.submit({ queue, type: 'echo', payload: { n: 2 } });
      const w = new EvoraWorker({ address: server.address, workerId: `w2-${suffix}`, queues: [queue] });
      w.handle<{ n: number }>('echo', async (j) => ({ n: j.payload.n }));
      w.start();
      try {
        const done = await jobInState(client, job.id, 'COMPLETED');
        expect(done.result).toEqual({ n: 2 });
      } finally {
        await w.stop({ timeoutMs: 0, graceMs: 1_000 });
      }

      // The trigger still refuses an illegal change made by the application role directly.
      await expect(sqlAs(appUrl, "UPDATE evora.jobs SET state = 'RUNNING' WHERE id = $1", [job.id])).rejects.toThrow(/illegal job state transition COMPLETED -> RUNNING/);
    } finally {
      client.close();
      await server.stop();
    }
  });

  it('a role without the grants ends the start with one line that says what to do, instead of waiting for ever', async () => {
    // The file's database is migrated (testDatabaseCreate), so the start reaches it, finds no
    // migration pending, and is refused at its first read of a table (the API tokens).
    await sqlAs(db.url, `CREATE ROLE ${BARE} LOGIN PASSWORD '${PASSWORD}'`);
    await sqlAs(db.url, `GRANT USAGE ON SCHEMA evora TO ${BARE}`);
    await sqlAs(db.url, `GRANT SELECT ON evora.schema_migrations TO ${BARE}`);
    const u = new URL(appUrl);
    u.username = BARE;
    const start = serverStart(configLoad({ databaseUrl: u.toString(), host: '127.0.0.1', port: '0', httpPort: '0' }, {}), silentLogger());
    await expect(start).rejects.toThrow(
      /^the database refuses this server's role: permission denied for table \w+ \(.*`evora db create-role --name <this role>`.*docs\/security\.md/,
    );
  });

  it('cannot switch the state-machine trigger off, nor change the rules it reads', async () => {
    await expect(sqlAs(appUrl, 'SET session_replication_role = replica')).rejects.toThrow(/permission denied to set parameter "session_replication_role"/);
    await expect(sqlAs(appUrl, 'ALTER TABLE evora.jobs DISABLE TRIGGER jobs_state_transition_update')).rejects.toThrow(/must be owner of table jobs/);
    await expect(sqlAs(appUrl, 'ALTER TABLE evora.jobs DISABLE TRIGGER ALL')).rejects.toThrow(/must be owner of table jobs/);
    await expect(sqlAs(appUrl, 'DROP TRIGGER jobs_state_transition_update ON evora.jobs')).rejects.toThrow(/must be owner of (table|relation) jobs/);
    await expect(sqlAs(appUrl, "CREATE OR REPLACE FUNCTION evora.job_state_transition_check() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'")).rejects.toThrow(
      /must be owner of function|permission denied for schema evora/,
    );
    await expect(sqlAs(appUrl, "INSERT INTO evora.job_state_transitions VALUES ('COMPLETED', 'RUNNING')")).rejects.toThrow(/permission denied for table job_state_transitions/);
    await expect(sqlAs(appUrl, `SET ROLE ${OWNER}`)).rejects.toThrow(/permission denied to set role/);
  });
});

it('the embedded PostgreSQL: the server connects as evora_app, not as the superuser', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'evora-db-role-'));
  // As root PostgreSQL runs as the postgres OS user, which must reach pgdata/ inside.
  await chmod(dir, 0o755);
  const port = await freePort();
  const server = await serverStart(configLoad({ host: '127.0.0.1', port: '0', httpPort: '0', dataDir: dir, embeddedPgPort: String(port) }, {}), silentLogger());
  try {
    const admin = `postgres://postgres:evora@127.0.0.1:${port}/postgres`;
    const users = await sqlAs<{ usename: string }>(
      admin,
      "SELECT DISTINCT usename FROM pg_stat_activity WHERE backend_type = 'client backend' AND usename IS NOT NULL AND pid <> pg_backend_pid()",
    );
    expect(users).toEqual([{ usename: 'evora_app' }]);
    const [owner] = await sqlAs<{ owner: string }>(admin, "SELECT pg_get_userbyid(relowner) AS owner FROM pg_class WHERE oid = 'evora.jobs'::regclass");
    expect(owner).toEqual({ owner: 'evora_owner' });
    const client = new EvoraClient({ address: server.address });
    try {
      const { job } = await client.submit({ queue: queueName(), type: 't' });
      expect(job.state).toBe('PENDING');
    } finally {
      client.close();
    }
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

import { beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { jobInput, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';
import pg from 'pg';
import { migrate, migrationsLoad, MigrationsUnknownError } from '../../src/store/migrate.js';
import { testDatabaseCreate } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

let store: Store;
let sql: pg.Pool;
let url: string;
beforeAll(async () => {
  ({ store, sql, url } = await storeSetup());
});

describe('the database enforces the state machine', () => {
  it('rejects an illegal transition made by raw SQL', async () => {
    const queue = queueName();
    const { job } = await store.jobSubmit({ job: jobInput({ queue }) });
    await expect(
      sql.query(`UPDATE evora.jobs SET state = 'COMPLETED' WHERE id = $1`, [job.id]),
    ).rejects.toThrow(/illegal job state transition PENDING -> COMPLETED/);
    await sql.query(`UPDATE evora.jobs SET state = 'CANCELLED' WHERE id = $1`, [job.id]);
    await expect(
      sql.query(`UPDATE evora.jobs SET state = 'RUNNING' WHERE id = $1`, [job.id]),
    ).rejects.toThrow(/CANCELLED -> RUNNING/);
    expect((await store.jobGet({ id: job.id })).state).toBe('CANCELLED');
  });

  it('rejects a job inserted in any state but PENDING, and a RUNNING job without a lease', async () => {
    await expect(
      sql.query(`INSERT INTO evora.jobs (queue, type, state, max_attempts) VALUES ('x', 't', 'COMPLETED', 1)`),
    ).rejects.toThrow(/must be created PENDING/);
    const { job } = await store.jobSubmit({ job: jobInput({ queue: queueName() }) });
    await expect(
      sql.query(`UPDATE evora.jobs SET state = 'RUNNING' WHERE id = $1`, [job.id]),
    ).rejects.toThrow(/jobs_running_has_lease/);
  });

  it('every listed transition is allowed and no other', async () => {
    const { rows } = await sql.query<{ from_state: string; to_state: string }>(
      'SELECT from_state::text, to_state::text FROM evora.job_state_transitions ORDER BY 1, 2',
    );
    expect(rows.map((r) => `${r.from_state}->${r.to_state}`).sort()).toEqual(
      [
        'PENDING->RUNNING', 'RUNNING->COMPLETED', 'RUNNING->PENDING', 'RUNNING->DLQ',
        'DLQ->PENDING', 'PENDING->CANCELLED', 'RUNNING->CANCELLED', 'CANCELLED->PENDING',
        // dependencies (0011_dependencies.sql)
        'WAITING->PENDING', 'WAITING->CANCELLED', 'CANCELLED->WAITING',
      ].sort(),
    );
  });

  it('the trigger is generated from the transitions table: a pair added there and regenerated becomes legal', async () => {
    const { job } = await store.jobSubmit({ job: jobInput({ queue: queueName() }) });
    const client = await sql.connect();
    try {
      await client.query('BEGIN');
      await client.query(`UPDATE evora.jobs SET state = 'CANCELLED', finished_at = now() WHERE id = $1`, [job.id]);
      await client.query('SAVEPOINT before');
      await expect(client.query(`UPDATE evora.jobs SET state = 'COMPLETED' WHERE id = $1`, [job.id])).rejects.toThrow(
        /CANCELLED -> COMPLETED/,
      );
      await client.query('ROLLBACK TO SAVEPOINT before');
      await client.query(`INSERT INTO evora.job_state_transitions VALUES ('CANCELLED', 'COMPLETED')`);
      await client.query('SELECT evora.job_state_transition_trigger_create()');
      await client.query(`UPDATE evora.jobs SET state = 'COMPLETED' WHERE id = $1`, [job.id]);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
    expect((await store.jobGet({ id: job.id })).state).toBe('PENDING');
  });
});

describe('migrations', () => {
  it('run again are a no-op, also when two runners start at once', async () => {
    expect(await Promise.all([migrate(url), migrate(url)])).toEqual([[], []]);
  });

  it('a run that waits for a lock says which session holds it, and goes on once that session ends', async () => {
    const holder = new pg.Client({ connectionString: url, application_name: 'dba-session' });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE evora.schema_migrations IN ACCESS EXCLUSIVE MODE');
      const pid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const lines: string[] = [];
      const run = migrate(url, undefined, { waiting: (line) => lines.push(line), waitNoticeMs: 100 });
      await waitFor(() => lines.length > 0, { what: 'the waiting line' });
      expect(lines[0]).toMatch(new RegExp(`^migrations are waiting for a lock held by another session: pid ${pid} \\(application "dba-session", role \\w+, idle in transaction, in a transaction since \\d{4}-`));
      expect(lines[0]).toContain(`SELECT pg_terminate_backend(${pid})`);
      await holder.query('COMMIT');
      expect(await run).toEqual([]);
    } finally {
      await holder.end();
    }
  });

  it('an empty database gets the baseline and what follows, each recorded under its number and name', async () => {
    const db = await testDatabaseCreate({ empty: true });
    const client = new pg.Client({ connectionString: db.url });
    try {
      expect(migrationsLoad().map((m) => `${m.version}_${m.name}`)).toEqual([
        '1_baseline',
        '2_projector_one_open_batch',
        '3_retention',
        '4_max_concurrency',
        '5_strict_idempotency',
        '7_job_policy',
        '8_rate_limit',
        '9_concurrency_keys',
        '10_schedules',
        '11_dependencies',
        '12_progress_attempts',
        '13_tokens_audit',
        '14_worker_sessions',
        '15_delete_on_complete',
        '16_rate_limit_job_types',
        '17_telemetry_minutes_by_time',
        '18_dependency_cascade_loop',
        '19_rate_limit_refund',
        '20_backoff_base_within_cap',
        '21_submit_job_checks',
        '22_audit_retention',
        '23_outbox_at_index',
        '24_audit_jobs_cancel',
        '25_queue_delete',
      ]);
      expect(await migrate(db.url)).toEqual([1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25]);
      await client.connect();
      const { rows } = await client.query('SELECT version, name FROM evora.schema_migrations ORDER BY version');
      expect(rows).toEqual([
        { version: 1, name: 'baseline' },
        { version: 2, name: 'projector_one_open_batch' },
        { version: 3, name: 'retention' },
        { version: 4, name: 'max_concurrency' },
        { version: 5, name: 'strict_idempotency' },
        { version: 7, name: 'job_policy' },
        { version: 8, name: 'rate_limit' },
        { version: 9, name: 'concurrency_keys' },
        { version: 10, name: 'schedules' },
        { version: 11, name: 'dependencies' },
        { version: 12, name: 'progress_attempts' },
        { version: 13, name: 'tokens_audit' },
        { version: 14, name: 'worker_sessions' },
        { version: 15, name: 'delete_on_complete' },
        { version: 16, name: 'rate_limit_job_types' },
        { version: 17, name: 'telemetry_minutes_by_time' },
        { version: 18, name: 'dependency_cascade_loop' },
        { version: 19, name: 'rate_limit_refund' },
        { version: 20, name: 'backoff_base_within_cap' },
        { version: 21, name: 'submit_job_checks' },
        { version: 22, name: 'audit_retention' },
        { version: 23, name: 'outbox_at_index' },
        { version: 24, name: 'audit_jobs_cancel' },
        { version: 25, name: 'queue_delete' },
      ]);
      expect(await migrate(db.url)).toEqual([]);
    } finally {
      await client.end();
      await db.drop();
    }
  });

  it('a migration with a commit marker applies over a committed schema: 0011 adds enum values, commits, then uses them', async () => {
    const db = await testDatabaseCreate({ empty: true });
    const client = new pg.Client({ connectionString: db.url });
    try {
      const all = migrationsLoad();
      expect(await migrate(db.url, all.filter((m) => m.version < 11))).toEqual([1, 2, 3, 4, 5, 7, 8, 9, 10]);
      expect(await migrate(db.url, all)).toEqual([11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25]);
      await client.connect();
      const { rows } = await client.query(
        `SELECT count(*)::int AS n FROM evora.job_state_transitions WHERE 'WAITING' IN (from_state::text, to_state::text)`,
      );
      expect(rows[0].n).toBe(3);
      expect(await migrate(db.url, all)).toEqual([]);
    } finally {
      await client.end();
      await db.drop();
    }
  });

  it('0020 gives a queue whose backoff base was longer than its cap base = cap (its delays were the cap), then refuses such a pair', async () => {
    const db = await testDatabaseCreate({ empty: true });
    const client = new pg.Client({ connectionString: db.url });
    try {
      const all = migrationsLoad();
      expect(await migrate(db.url, all.filter((m) => m.version < 20))).toEqual([1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
      await client.connect();
      await client.query(`INSERT INTO evora.queues (name, backoff_base_seconds, backoff_cap_seconds) VALUES ('long', 7200, 3600), ('fine', 5, 60)`);
      expect(await migrate(db.url, all)).toEqual([20, 21, 22, 23, 24, 25]);
      const { rows } = await client.query('SELECT name, backoff_base_seconds AS base, backoff_cap_seconds AS cap FROM evora.queues ORDER BY name');
      expect(rows).toEqual([
        { name: 'fine', base: 5, cap: 60 },
        { name: 'long', base: 3600, cap: 3600 },
      ]);
      await expect(client.query(`UPDATE evora.queues SET backoff_cap_seconds = 1 WHERE name = 'fine'`)).rejects.toMatchObject({
        code: '23514',
        constraint: 'queues_backoff_base_within_cap',
      });
    } finally {
      await client.end();
      await db.drop();
    }
  });

  it('a database migrated by the development chain that the baseline replaced is refused, unchanged, with what to do', async () => {
    const db = await testDatabaseCreate({ empty: true });
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      // What the old runner left: its bookkeeping (and a schema this version cannot vouch for).
      await client.query(`CREATE SCHEMA evora;
        CREATE TABLE evora.schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
        INSERT INTO evora.schema_migrations (version, name) VALUES
          (1, 'jobs'), (2, 'job_events'), (3, 'telemetry'), (4, 'transition_check_in_when'), (5, 'lean_outbox'),
          (6, 'packed_outbox'), (7, 'outbox_uncompressed'), (8, 'recent_events_uncompressed'), (9, 'submit_handoff');
        CREATE TABLE evora.jobs (id uuid PRIMARY KEY);`);
      const refused = migrate(db.url);
      await expect(refused).rejects.toBeInstanceOf(MigrationsUnknownError);
      await expect(refused).rejects.toThrow(/^the database records migrations this version does not know \(0001_jobs, .*0009_submit_handoff\): its schema predates the baseline.*DROP SCHEMA evora CASCADE.*\.evora\/pgdata/);
      expect(await refused.then(() => '', (err: Error) => err.message)).not.toContain('\n'); // one line
      const { rows } = await client.query(`SELECT count(*)::int AS n FROM evora.schema_migrations`);
      expect(rows[0].n).toBe(9);
      const tables = await client.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'evora'`);
      expect(tables.rows[0].n).toBe(2);
    } finally {
      await client.end();
      await db.drop();
    }
  });
});

/**
 * Migrations against traffic that holds locks: each migration is its own transaction, so a lock
 * one takes is gone before the next asks for another (a jump across releases otherwise held
 * evora.jobs while asking for evora.queues, which submits take in the other order); a migration
 * PostgreSQL aborts as a deadlock's victim is run again. Two tables of the test's own stand for
 * evora.jobs and evora.queues.
 */
describe('migrations and the locks of traffic', () => {
  /**
   * Two tables and a traffic connection: `race` has the traffic hold the second table (as a
   * submit holds evora.queues), runs the migrations with `extras` after the real ones, and
   * once a migration waits on the second table has the traffic take the first (as a submit
   * then takes evora.jobs) and commit. Returns what migrate applied. The traffic's
   * deadlock_timeout decides which side looks for a deadlock first, i.e. which is its victim.
   */
  async function setup() {
    const db = await testDatabaseCreate();
    const traffic = new pg.Client({ connectionString: db.url });
    const admin = new pg.Client({ connectionString: db.url });
    await traffic.connect();
    await admin.connect();
    await admin.query('CREATE TABLE public.first_t (a int); CREATE TABLE public.second_t (b int)');
    const all = migrationsLoad();
    const extra = (version: number, name: string, sql: string) => ({ version, name, sql });
    /** Until the migration's connection waits for a lock on `table`. */
    const migrationWaitsOn = (table: string) =>
      waitFor(
        async () =>
          (
            await admin.query(
              `SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
               WHERE a.application_name = 'evora-migrate' AND NOT l.granted AND l.relation = $1::regclass`,
              [table],
            )
          ).rowCount === 1,
        { what: `the migration waiting on ${table}` },
      );
    const race = async (trafficDeadlockTimeout: string, extras: ReturnType<typeof extra>[]): Promise<number[]> => {
      await traffic.query(`SET deadlock_timeout = '${trafficDeadlockTimeout}'`);
      await traffic.query('BEGIN');
      await traffic.query('LOCK TABLE public.second_t IN ROW EXCLUSIVE MODE');
      const migrated = migrate(db.url, [...all, ...extras]);
      await migrationWaitsOn('public.second_t');
      await traffic.query('LOCK TABLE public.first_t IN ROW EXCLUSIVE MODE');
      await traffic.query('COMMIT');
      return migrated;
    };
    const teardown = async () => {
      await traffic.end().catch(() => undefined);
      await admin.end();
      await db.drop();
    };
    return { admin, extra, race, teardown };
  }

  it('a lock taken by one pending migration is released before the next waits for another: traffic taking them the other way round is not deadlocked', async () => {
    const { admin, extra, race, teardown } = await setup();
    try {
      // The traffic's side looks for a deadlock first, so that with one transaction for all
      // migrations it would be the victim (its second LOCK would fail) rather than a migration
      // run again. 9001 has committed when 9002 waits, so the first table is free (in one
      // transaction for all, 9001 held it: a deadlock).
      const migrated = await race('100ms', [
        extra(9001, 'first', 'ALTER TABLE public.first_t ADD COLUMN x int'),
        extra(9002, 'second', 'ALTER TABLE public.second_t ADD COLUMN y int'),
      ]);
      expect(migrated).toEqual([9001, 9002]);
      const cols = await admin.query(`SELECT attname FROM pg_attribute WHERE attrelid IN ('public.first_t'::regclass, 'public.second_t'::regclass) AND attname IN ('x', 'y') ORDER BY 1`);
      expect(cols.rows.map((r) => r.attname)).toEqual(['x', 'y']);
    } finally {
      await teardown();
    }
  });

  it('a migration chosen as a deadlock\'s victim is run again and applied once', async () => {
    const { admin, extra, race, teardown } = await setup();
    try {
      // The traffic's side waits long before looking for a deadlock, so that the migration's
      // side (deadlock_timeout 1 s) finds the cycle (it holds the first table and waits on the
      // second; the traffic the other way round) and aborts its own transaction; the traffic
      // then gets the lock and commits, and the migration runs again.
      const migrated = await race('30s', [
        extra(9003, 'both', 'LOCK TABLE public.first_t IN ACCESS EXCLUSIVE MODE; LOCK TABLE public.second_t IN ACCESS EXCLUSIVE MODE; ALTER TABLE public.first_t ADD COLUMN z int'),
      ]);
      expect(migrated).toEqual([9003]);
      const { rows } = await admin.query('SELECT count(*)::int AS n FROM evora.schema_migrations WHERE version = 9003');
      expect(rows[0].n).toBe(1);
    } finally {
      await teardown();
    }
  });
});

describe('migrations: a database of a newer Evora, and 0002', () => {
  it('a database migrated by a newer Evora is refused, unchanged, with "run that version" (and no advice to drop data)', async () => {
    const db = await testDatabaseCreate({ empty: true });
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await migrate(db.url);
      await client.query(`INSERT INTO evora.schema_migrations (version, name) VALUES (9001, 'from_the_future'), (9002, 'more')`);
      const refused = migrate(db.url);
      await expect(refused).rejects.toBeInstanceOf(MigrationsUnknownError);
      const message = await refused.then(() => '', (err: Error) => err.message);
      const newest = migrationsLoad().at(-1)!;
      expect(message).toContain(
        `the database was migrated by a newer Evora (it records 9001_from_the_future, 9002_more; this version knows migrations up to ${String(newest.version).padStart(4, '0')}_${newest.name}); nothing was changed. Run that version`,
      );
      expect(message.startsWith('the database was migrated by a newer Evora')).toBe(true);
      // The advice, not the migrations' names (0015_delete_on_complete), must not speak of dropping data.
      expect(message.replace(/\(it records [^)]*\)/, '')).not.toMatch(/DROP|delete|evora:/);
      const { rows } = await client.query(`SELECT count(*)::int AS n FROM evora.schema_migrations`);
      expect(rows[0].n).toBe(migrationsLoad().length + 2);
    } finally {
      await client.end();
      await db.drop();
    }
  });

  it('a database in another character set than UTF8 (LATIN1) is refused, unchanged, with the encoding Evora needs', async () => {
    const db = await testDatabaseCreate({ encoding: 'LATIN1' });
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await expect(migrate(db.url)).rejects.toThrow(
        /^migration failed: the database's encoding is LATIN1, and Evora needs UTF8: create its database with ENCODING 'UTF8' .*; nothing was changed$/,
      );
      const { rows } = await client.query(`SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'evora'`);
      expect(rows[0].n).toBe(0);
    } finally {
      await client.end();
      await db.drop();
    }
  });

  it('0002 over a database where racing projectors left two batches open keeps the oldest; a second open batch is refused', async () => {
    const db = await testDatabaseCreate({ empty: true });
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      expect(await migrate(db.url, migrationsLoad().slice(0, 1))).toEqual([1]);
      const insert = `INSERT INTO evora.projector_batches (sink, events, hi_id, horizon) VALUES ('s', 1, 1, '1'::xid8) RETURNING id`;
      const first = (await client.query<{ id: string }>(insert)).rows[0]!.id;
      await client.query(insert);
      expect(await migrate(db.url, migrationsLoad().slice(0, 2))).toEqual([2]);
      const { rows } = await client.query<{ id: string }>('SELECT id FROM evora.projector_batches');
      expect(rows).toEqual([{ id: first }]);
      await expect(client.query(insert)).rejects.toThrow(/projector_batches_one_open_idx/);
    } finally {
      await client.end();
      await db.drop();
    }
  });
});

describe('backoff policies (evora.backoff_seconds)', () => {
  async function delays(kind: string, base: number, cap: number, jitter: number, r: number, attempts = 8) {
    const { rows } = await sql.query<{ d: number }>(
      `SELECT evora.backoff_seconds($1::evora.backoff_kind, $2, $3, $4, a, $5) AS d FROM generate_series(1, $6) a ORDER BY a`,
      [kind, base, cap, jitter, r, attempts],
    );
    return rows.map((row) => row.d);
  }

  it('exponential doubles from the base and stops at the cap', async () => {
    expect(await delays('exponential', 2, 60, 0, 0.5)).toEqual([2, 4, 8, 16, 32, 60, 60, 60]);
  });

  it('linear grows by the base per attempt, capped', async () => {
    expect(await delays('linear', 5, 22, 0, 0.5, 6)).toEqual([5, 10, 15, 20, 22, 22]);
  });

  it('fixed is the base every time, capped', async () => {
    expect(await delays('fixed', 7, 60, 0, 0.5, 3)).toEqual([7, 7, 7]);
    expect(await delays('fixed', 7, 5, 0, 0.5, 2)).toEqual([5, 5]);
  });

  it('jitter stays within d*(1-j) .. d*(1+j) and never above the cap', async () => {
    expect(await delays('fixed', 10, 100, 0.2, 0, 1)).toEqual([8]);
    expect((await delays('fixed', 10, 100, 0.2, 0.999999, 1))[0]).toBeCloseTo(12, 4);
    expect(await delays('fixed', 10, 11, 0.2, 0.999999, 1)).toEqual([11]);
    const { rows } = await sql.query<{ lo: number; hi: number; spread: number }>(
      `SELECT min(d) AS lo, max(d) AS hi, count(DISTINCT d)::int AS spread FROM (
         SELECT evora.backoff_seconds('exponential', 4, 3600, 0.25, 3, random()) AS d FROM generate_series(1, 2000)
       ) s`,
    );
    const { lo, hi, spread } = rows[0]!;
    expect(lo).toBeGreaterThanOrEqual(16 * 0.75);
    expect(hi).toBeLessThanOrEqual(16 * 1.25);
    expect(spread).toBeGreaterThan(100);
  });

  it('huge attempt numbers do not overflow', async () => {
    const { rows } = await sql.query<{ d: number }>(
      `SELECT evora.backoff_seconds('exponential', 1, 3600, 0, 100000, 0.5) AS d`,
    );
    expect(rows[0]?.d).toBe(3600);
  });
});

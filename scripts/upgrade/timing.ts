import { rmSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { migrate, migrationsLoad } from '../../src/store/migrate.js';
import { connectionLoop, lockWatchSay, lockWatchStart, postgresStart, sleep, type RunContext } from './common.js';
import type { UpgradeOptions } from './options.js';

/**
 * The migration-time run of scripts/upgrade-check.ts (--time): a database at version
 * `--from`, seeded, then this checkout's pending migrations applied by its runner while
 * loops submit and read, and the locks watched. Resolves 0, or 1 when the migrations failed.
 */

/** A statement run in a loop on a connection of its own: the longest call, and how many. */
function probeStart(url: string, name: string, text: string, values: unknown[]): { stop: () => Promise<{ longestMs: number; calls: number }> } {
  const seen = { longestMs: 0, calls: 0 };
  const loop = connectionLoop(url, `upgrade-${name}`, async (client) => {
    const t = performance.now();
    await client.query(text, values).catch(() => undefined);
    seen.longestMs = Math.max(seen.longestMs, performance.now() - t);
    seen.calls++;
  });
  return { stop: async () => (await loop.stop(), seen) };
}

/** Outbox rows as bench/experiments/outbox-lag.ts seeds them: mostly one event a row, every tenth a statement of ten. */
const OUTBOX_SEED = `
  INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
  SELECT now() - interval '1 hour' + g * interval '1 millisecond', k, array_fill(gen_random_uuid(), ARRAY[k]), array_fill('q'::text, ARRAY[k]),
         array_fill('t'::text, ARRAY[k]), array_fill('completed'::evora.job_event_kind, ARRAY[k]), array_fill('RUNNING'::evora.job_state, ARRAY[k]),
         array_fill('COMPLETED'::evora.job_state, ARRAY[k]), array_fill(1, ARRAY[k]), array_fill('w'::text, ARRAY[k]),
         array_fill(NULL::float8, ARRAY[k]), array_fill(12.5::float8, ARRAY[k])
  FROM generate_series(1, $1::int) g, LATERAL (SELECT CASE WHEN g % 10 = 0 THEN 10 ELSE 1 END AS k) n`;

/** Jobs with the baseline's columns only (any version has them): 90% COMPLETED, 5% DLQ, 4% PENDING, 1% RUNNING, in 10 queues. */
const JOBS_SEED = `
  INSERT INTO evora.jobs (queue, type, state, max_attempts, attempt, lease_token, locked_until, worker_id, started_at, finished_at,
                          last_error, idempotency_key, result, payload, created_at, run_at)
  SELECT 'q' || (i % 10), 'type' || (i % 7), s.state, 5, CASE WHEN s.state = 'PENDING' THEN 0 ELSE 1 END,
         CASE WHEN s.state = 'PENDING' THEN NULL ELSE gen_random_uuid() END,
         CASE WHEN s.state = 'RUNNING' THEN now() + interval '5 min' END,
         CASE WHEN s.state = 'PENDING' THEN NULL ELSE 'w' || (i % 50) END,
         CASE WHEN s.state = 'PENDING' THEN NULL ELSE now() - (i || ' ms')::interval END,
         CASE WHEN s.state IN ('COMPLETED', 'DLQ') THEN now() - (i || ' ms')::interval END,
         CASE WHEN s.state = 'DLQ' THEN 'boom at ' || i END,
         CASE WHEN i % 10 = 0 THEN 'key-' || i END,
         CASE WHEN s.state = 'COMPLETED' THEN '{"ok": true}'::jsonb END,
         jsonb_build_object('i', i, 'image', 'cat-' || i || '.png'),
         now() - (i || ' ms')::interval, now() - (i || ' ms')::interval
  FROM generate_series(1, $1::int) i,
       LATERAL (SELECT (CASE WHEN i % 100 < 90 THEN 'COMPLETED' WHEN i % 100 < 95 THEN 'DLQ' WHEN i % 100 < 99 THEN 'PENDING'
                             ELSE 'RUNNING' END)::evora.job_state AS state) s`;

/** Opens a transaction that writes one outbox row and stays open for `ms` (an operator's psql session, a stuck client); `done` resolves at its commit. */
async function outboxWriterHold(url: string, ms: number): Promise<{ done: Promise<void> }> {
  const client = new pg.Client({ connectionString: url, application_name: 'upgrade-blocker' });
  await client.connect();
  await client.query('BEGIN');
  await client.query(`INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
    VALUES (now(), 1, ARRAY[gen_random_uuid()], '{q}', '{t}', '{submitted}', ARRAY[NULL]::evora.job_state[], '{PENDING}', '{0}',
            ARRAY[NULL]::text[], ARRAY[NULL]::float8[], ARRAY[NULL]::float8[])`);
  const done = sleep(ms).then(async () => {
    await client.query('COMMIT');
    await client.end();
  });
  return { done };
}

export async function migrationTiming(ctx: RunContext, opts: UpgradeOptions): Promise<number> {
  const { say } = ctx;
  const { pg: postgres, dir: pgDir } = await postgresStart(ctx);
  const url = postgres.url;
  const sql = new pg.Client({ connectionString: url, application_name: 'upgrade-seed' });
  await sql.connect();
  try {
    await migrate(url, migrationsLoad().filter((m) => m.version <= opts.from));
    const started = performance.now();
    if (opts.outboxRows > 0) await sql.query(OUTBOX_SEED, [opts.outboxRows]);
    if (opts.jobsRows > 0) {
      // The transition trigger off (replica mode), as scripts/dashboard-plans.ts seeds.
      await sql.query('SET session_replication_role = replica');
      await sql.query(`INSERT INTO evora.queues (name) SELECT 'q' || i FROM generate_series(0, 9) i ON CONFLICT DO NOTHING`);
      await sql.query(JOBS_SEED, [opts.jobsRows]);
      await sql.query('SET session_replication_role = DEFAULT');
    }
    await sql.query('VACUUM ANALYZE');
    const s = (await sql.query<{ jobs: string; outbox: string; nj: number; ne: number; v: string }>(
      `SELECT pg_size_pretty(pg_total_relation_size('evora.jobs')) AS jobs, pg_size_pretty(pg_total_relation_size('evora.job_events')) AS outbox,
              (SELECT count(*)::int FROM evora.jobs) AS nj, (SELECT count(*)::int FROM evora.job_events) AS ne, current_setting('server_version') AS v`,
    )).rows[0]!;
    say(`PostgreSQL ${s.v}; schema at ${opts.from}; ${s.nj.toLocaleString('en')} jobs (${s.jobs}), ${s.ne.toLocaleString('en')} outbox rows ` +
      `(${s.outbox}); seeded in ${Math.round((performance.now() - started) / 1000)} s`);
    const someId = (await sql.query<{ id: string }>('SELECT id FROM evora.jobs LIMIT 1')).rows[0]?.id ?? '00000000-0000-0000-0000-000000000000';
    await sql.query(`INSERT INTO evora.queues (name) VALUES ('probe') ON CONFLICT DO NOTHING`);
    const submit = opts.quiet ? null : probeStart(url, 'submit', `SELECT * FROM evora.submit_job('probe', 'probe')`, []);
    const read = opts.quiet ? null : probeStart(url, 'read', 'SELECT id, state FROM evora.jobs WHERE id = $1', [someId]);
    await sleep(500);
    let held: Promise<void> = Promise.resolve();
    if (opts.blockerMs > 0) {
      held = (await outboxWriterHold(url, opts.blockerMs)).done;
      say(`a transaction that wrote to evora.job_events stays open for ${opts.blockerMs.toLocaleString('en')} ms from now`);
    }
    const migrateUrl = opts.lockTimeoutMs > 0 ? `${url}?options=${encodeURIComponent(`-c lock_timeout=${opts.lockTimeoutMs}`)}` : url;
    const watch = lockWatchStart(url, 'evora-migrate');
    const t = performance.now();
    const applied = await migrate(migrateUrl).catch((err: unknown) => {
      say(`the migrations failed after ${Math.round(performance.now() - t).toLocaleString('en')} ms: ${(err as Error).message}`);
      return null;
    });
    const ms = performance.now() - t;
    const seen = await watch.stop();
    await held;
    const [sub, rd] = [await submit?.stop(), await read?.stop()];
    const at = (await sql.query<{ v: number }>('SELECT max(version)::int AS v FROM evora.schema_migrations')).rows[0]!.v;
    if (applied) say(`applied ${applied.join(', ')} in ${Math.round(ms).toLocaleString('en')} ms (one runner call)`);
    say(`  the schema is now at ${at}`);
    lockWatchSay(ctx, seen);
    if (sub && rd) {
      say(`  the longest submit (evora.submit_job) meanwhile ${Math.round(sub.longestMs).toLocaleString('en')} ms over ${sub.calls} calls, ` +
        `the longest read of a job by id ${Math.round(rd.longestMs).toLocaleString('en')} ms over ${rd.calls} calls`);
    }
    return applied ? 0 : 1;
  } finally {
    await sql.end().catch(() => undefined);
    await postgres.stop();
    rmSync(pgDir, { recursive: true, force: true });
  }
}

/**
 * The plans of the dashboard's reads over a big database (docs/dashboard-queries.md is its
 * output): JOBS (default 1,000,000) jobs made with generate_series in 10 queues (mostly
 * COMPLETED, then DLQ with a few errors, PENDING, CANCELLED, RUNNING and WAITING children,
 * some with idempotency keys), a day of telemetry minutes, and 50 worker sessions; then
 * EXPLAIN (ANALYZE) of each read the dashboard makes, exactly as the store runs it (through
 * the statement loader), and a check that none scans evora.jobs sequentially.
 *
 *   npx tsx scripts/dashboard-plans.ts            (embedded PostgreSQL in a temp folder)
 *   DATABASE_URL=postgres://... npx tsx scripts/dashboard-plans.ts   (a scratch database on that server, dropped after)
 *
 * Exits 1 when a plan scans evora.jobs sequentially.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { embeddedPostgresStart, freePort } from '../src/server/embedded-postgres.js';
import { statementNamed } from '../src/store/catalog.js';
import { migrate } from '../src/store/migrate.js';
import { queryConfig, type Statement } from '../src/store/statements.js';

const JOBS = Number(process.env.JOBS ?? 1_000_000);

/** The seed, in SQL: jobs by generate_series (transition trigger off: replica mode), telemetry, sessions. */
async function seed(sql: pg.Pool): Promise<{ parentId: string; someId: string }> {
  const client = await sql.connect();
  try {
    await client.query('SET session_replication_role = replica');
    await client.query(`INSERT INTO evora.queues (name) SELECT 'q' || i FROM generate_series(0, 9) i UNION ALL SELECT 'q-none' ON CONFLICT DO NOTHING`);
    // State by position: 88% COMPLETED, 5% DLQ, 3% PENDING, 2% CANCELLED, 1% RUNNING, 1% WAITING.
    await client.query(
      `INSERT INTO evora.jobs (queue, type, state, max_attempts, attempt, lease_token, locked_until, worker_id, started_at,
                               finished_at, last_error, idempotency_key, result, created_at, run_at)
       SELECT 'q' || ((i / 100) % 10), 'type' || (i % 7), s.state, 5,
              CASE WHEN s.state IN ('PENDING', 'WAITING') THEN 0 ELSE 1 END,
              CASE WHEN s.state IN ('PENDING', 'WAITING') THEN NULL ELSE gen_random_uuid() END,
              CASE WHEN s.state = 'RUNNING' THEN now() + interval '30 s' END,
              CASE WHEN s.state IN ('PENDING', 'WAITING') THEN NULL ELSE 'w' || (i % 50) END,
              CASE WHEN s.state IN ('PENDING', 'WAITING') THEN NULL ELSE now() - (i || ' ms')::interval END,
              CASE WHEN s.state IN ('COMPLETED', 'DLQ', 'CANCELLED') THEN now() - (($1::int - i) || ' ms')::interval END,
              CASE WHEN s.state = 'DLQ' THEN (ARRAY['card declined', E'timeout talking to bank\\nat line ' || i, 'connection refused'])[1 + i % 3] END,
              CASE WHEN i % 10 = 0 THEN 'key-' || i END,
              CASE WHEN s.state = 'COMPLETED' THEN '{}'::jsonb END,
              now() - (($1::int - i) || ' ms')::interval, now()
       FROM generate_series(1, $1::int) i,
            LATERAL (SELECT (CASE WHEN i % 100 < 88 THEN 'COMPLETED' WHEN i % 100 < 93 THEN 'DLQ' WHEN i % 100 < 96 THEN 'PENDING'
                                  WHEN i % 100 < 98 THEN 'CANCELLED' WHEN i % 100 < 99 THEN 'RUNNING' ELSE 'WAITING' END)::evora.job_state AS state) s`,
      [JOBS],
    );
    // The WAITING jobs' parent: one PENDING job with every WAITING job as a child (dependents).
    const parent = await client.query<{ id: string }>(`SELECT id FROM evora.jobs WHERE state = 'PENDING' ORDER BY id LIMIT 1`);
    const parentId = parent.rows[0]!.id;
    await client.query(`UPDATE evora.jobs SET has_dependents = true WHERE id = $1`, [parentId]);
    await client.query(`UPDATE evora.jobs SET parent_ids = ARRAY[$1::uuid] WHERE state = 'WAITING' AND id IN (SELECT id FROM evora.jobs WHERE state = 'WAITING' LIMIT 500)`, [parentId]);
    await client.query(
      `INSERT INTO evora.telemetry_minutes (queue, minute, submitted, completed, failed, dead_lettered, wait_hist, run_hist)
       SELECT 'q' || q, date_trunc('minute', now()) - (m || ' min')::interval, 100, 90, 5, 1, '{"10": 50, "20": 40}', '{"12": 80, "30": 10}'
       FROM generate_series(0, 9) q, generate_series(0, 1439) m`,
    );
    await client.query(
      `INSERT INTO evora.worker_sessions (session_id, worker_id, server_id, server_address, queues, job_types, slots, held_jobs, free_slots, connected_at, last_seen_at)
       SELECT gen_random_uuid(), 'w' || i, gen_random_uuid(), '10.0.0.' || (i % 5) || ':50051', ARRAY['q' || (i % 10)], '{}', 10, 5, 5, now(), now()
       FROM generate_series(1, 50) i`,
    );
    const some = await client.query<{ id: string }>(`SELECT id FROM evora.jobs ORDER BY id DESC OFFSET 5000 LIMIT 1`);
    await client.query('VACUUM ANALYZE');
    return { parentId, someId: some.rows[0]!.id };
  } finally {
    client.release();
  }
}

/** The dashboard's reads: a title, the statement, its parameters. */
function reads(s: { parentId: string; someId: string }): [string, string, Record<string, unknown>][] {
  const list = (over: Record<string, unknown>) => ({ queue: null, states: null, type: null, idempotencyKey: null, errorGroup: null, afterId: null, limit: 51, ...over });
  const since = new Date(Date.now() - 61 * 60_000);
  return [
    ['ListJobs, no filter (first page)', 'jobList', list({})],
    ['ListJobs, no filter, a later page (page token)', 'jobList', list({ afterId: s.someId })],
    ['ListJobs by queue', 'jobList', list({ queue: 'q3' })],
    ['ListJobs by state (DLQ, every queue)', 'jobList', list({ states: ['DLQ'] })],
    ['ListJobs by queue and state (the dead letters of a queue)', 'jobList', list({ queue: 'q3', states: ['DLQ'] })],
    ['ListJobs by queue, state and error group ("Show jobs" of a dead-letter group)', 'jobList', list({ queue: 'q3', states: ['DLQ'], errorGroup: 'card declined' })],
    ['ListJobs by queue and state, a queue without dead letters', 'jobList', list({ queue: 'q-none', states: ['DLQ'] })],
    ['ListJobs by queue and a rare state (WAITING)', 'jobList', list({ queue: 'q3', states: ['WAITING'] })],
    ['ListJobs by type', 'jobList', list({ type: 'type2' })],
    ['ListJobs by idempotency key (no queue)', 'jobList', list({ idempotencyKey: 'key-500000' })],
    ['ListJobs by queue and idempotency key', 'jobList', list({ queue: 'q0', idempotencyKey: 'key-500000' })],
    ['GetJob', 'jobGet', { id: s.someId }],
    ['GetJob: its dependents', 'jobDependentsList', { id: s.parentId, limit: 1000 }],
    ['ListDeadLetterGroups of a queue', 'jobDeadLetterGroups', { queue: 'q3', scanLimit: 10_000, limit: 50 }],
    ['ListDeadLetterGroups of a queue without dead letters', 'jobDeadLetterGroups', { queue: 'q-none', scanLimit: 10_000, limit: 50 }],
    ['ListDeadLetterGroups of every queue', 'jobDeadLetterGroups', { queue: null, scanLimit: 10_000, limit: 50 }],
    [
      'RetryJobs dry run of one error group (the count before "retry all in this group")',
      'jobCountMany',
      { queue: 'q3', states: ['DLQ'], type: 'type1', errorGroup: 'card declined', finishedBefore: null, ids: null, projectedOnly: false, retryOnly: true },
    ],
    ['GetQueueSeries / stats: telemetry minutes (every queue, last hour)', 'telemetryMinutesRead', { queues: null, since }],
    ['GetQueueSeries of a queue: telemetry minutes', 'telemetryMinutesRead', { queues: ['q3'], since }],
    ['ListQueueStats: counts by state', 'telemetryCountsRead', { queues: null }],
    ['ListQueueStats: outbox lag', 'outboxLag', { exactRows: 1000, now: null }],
    ['ListWorkers / stats: live sessions', 'workerSessionList', { queues: null, staleSeconds: 30, now: null }],
    ['ListWorkers of a queue', 'workerSessionList', { queues: ['q3'], staleSeconds: 30, now: null }],
    ['ListQueues', 'queueList', {}],
  ];
}

async function explain(sql: pg.Pool, st: Statement, params: Record<string, unknown>): Promise<string[]> {
  const config = queryConfig(st as Statement<Record<string, unknown>>, params);
  const client = await sql.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ 'QUERY PLAN': string }>({
      text: `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ${st.text}`,
      values: config.values,
    });
    return rows.map((r) => r['QUERY PLAN']);
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

const dir = process.env.DATABASE_URL ? null : await mkdtemp(join(tmpdir(), 'evora-dashboard-plans-'));
const embedded = dir ? await embeddedPostgresStart({ dataDir: dir, port: await freePort() }) : null;
const serverUrl = process.env.DATABASE_URL ?? embedded!.url;
const database = `evora_plans_${randomBytes(4).toString('hex')}`;
const url = new URL(serverUrl);
url.pathname = `/${database}`;
const admin = new pg.Client({ connectionString: serverUrl });
await admin.connect();
await admin.query(`CREATE DATABASE ${database}`);
const sql = new pg.Pool({ connectionString: url.toString(), max: 2 });
sql.on('error', () => undefined);
let seqScans = 0;
try {
  await migrate(url.toString());
  const started = Date.now();
  const s = await seed(sql);
  const version = (await sql.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
  const counts = await sql.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM evora.jobs GROUP BY state ORDER BY n DESC');
  console.log(`PostgreSQL ${version}; ${JOBS.toLocaleString('en')} jobs in 10 queues (${counts.rows.map((r) => `${r.state} ${r.n}`).join(', ')}), seeded in ${Math.round((Date.now() - started) / 1000)} s\n`);
  for (const [title, name, params] of reads(s)) {
    const st = statementNamed(name);
    const plan = await explain(sql, st, params);
    const seq = plan.some((l) => /Seq Scan on jobs\b/.test(l));
    if (seq) seqScans++;
    const shown = Object.entries(params).filter(([, v]) => v !== null).map(([k, v]) => `${k}=${v instanceof Date ? 'now-61min' : JSON.stringify(v)}`);
    console.log(`### ${title}\n\n${name} (sql/${st.file})${shown.length > 0 ? ` with ${shown.join(', ')}` : ''}${seq ? '  ** SEQUENTIAL SCAN OF jobs **' : ''}\n\n\`\`\`\n${plan.join('\n')}\n\`\`\`\n`);
  }
  console.log(seqScans === 0 ? 'No plan scans evora.jobs sequentially.' : `${seqScans} plan(s) scan evora.jobs sequentially.`);
} finally {
  await sql.end();
  await admin.query(`DROP DATABASE IF EXISTS ${database}`);
  await admin.end();
  await embedded?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
}
process.exit(seqScans === 0 ? 0 : 1);

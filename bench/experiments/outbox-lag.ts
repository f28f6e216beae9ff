/**
 * What the outbox lag (sql/outbox-lag.sql, read by every /metrics scrape and stats call)
 * costs on a large outbox, the one a telemetry store that has been away leaves: N outbox
 * rows (10% of them with 10 events, the rest with 1), then the lag read the old way (the
 * sum of every row's events) and the store's (exact over the first OUTBOX_LAG_EXACT_ROWS
 * rows, an estimate beyond), each the median of 21 warm runs, as the client sees it (wall)
 * and as PostgreSQL does (EXPLAIN ANALYZE's execution time, which a loaded machine disturbs
 * less), and how far the estimate is from the exact count. Measurement only;
 * docs/telemetry.md quotes the results.
 *
 * Usage: npx tsx bench/experiments/outbox-lag.ts [rows=1000000]
 * Starts its own embedded PostgreSQL in a temp folder.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { migrate } from '../../src/store/migrate.js';
import { statementNamed } from '../../src/store/catalog.js';
import { queryConfig } from '../../src/store/statements.js';
import { OUTBOX_LAG_EXACT_ROWS, Store } from '../../src/store/store.js';

const ROWS = Number(process.argv[2] ?? 1_000_000);
/** sql/outbox-lag.sql before it counted at most OUTBOX_LAG_EXACT_ROWS rows. */
const SUM_ALL = `SELECT coalesce(sum(n), 0)::int AS n, extract(epoch FROM now() - min(at))::float8 AS age FROM evora.job_events`;

const median = async (f: () => Promise<unknown>): Promise<number> => {
  const times: number[] = [];
  for (let i = 0; i < 21; i++) {
    const t = performance.now();
    await f();
    times.push(performance.now() - t);
  }
  return times.sort((a, b) => a - b)[10]!;
};
/** The median of 21 runs' execution time as PostgreSQL reports it. */
const serverMedian = async (db: pg.Client, config: pg.QueryConfig): Promise<number> => {
  const times: number[] = [];
  for (let i = 0; i < 21; i++) {
    const plan = await db.query<{ 'QUERY PLAN': string }>({ text: `EXPLAIN (ANALYZE, TIMING OFF) ${config.text}`, values: config.values });
    times.push(Number(/Execution Time: ([\d.]+) ms/.exec(plan.rows.at(-1)!['QUERY PLAN'])![1]));
  }
  return times.sort((a, b) => a - b)[10]!;
};
const lagConfig = queryConfig(statementNamed('outboxLag'), { exactRows: OUTBOX_LAG_EXACT_ROWS, now: null });

const dir = await mkdtemp(join(tmpdir(), 'evora-outbox-lag-'));
const pgh = await embeddedPostgresStart({ dataDir: dir, port: await freePort() });
const db = new pg.Client({ connectionString: pgh.url });
let store: Store | null = null;
try {
  await migrate(pgh.url);
  await db.connect();
  store = new Store({ connectionString: pgh.url, maxConnections: 2 });
  const seed = async (rows: number) => {
    await db.query('TRUNCATE evora.job_events');
    await db.query(
      `INSERT INTO evora.job_events (at, n, job_ids, queues, types, kinds, from_states, to_states, attempts, worker_ids, wait_ms, run_ms)
       SELECT now() - interval '1 hour' + g * interval '1 millisecond', k, array_fill(gen_random_uuid(), ARRAY[k]), array_fill('q'::text, ARRAY[k]),
              array_fill('t'::text, ARRAY[k]), array_fill('completed'::evora.job_event_kind, ARRAY[k]), array_fill('RUNNING'::evora.job_state, ARRAY[k]),
              array_fill('COMPLETED'::evora.job_state, ARRAY[k]), array_fill(1, ARRAY[k]), array_fill('w'::text, ARRAY[k]),
              array_fill(NULL::float8, ARRAY[k]), array_fill(12.5::float8, ARRAY[k])
       FROM generate_series(1, $1) g, LATERAL (SELECT CASE WHEN g % 10 = 0 THEN 10 ELSE 1 END AS k) n`,
      [rows],
    );
    await db.query('VACUUM ANALYZE evora.job_events');
  };
  for (const rows of [ROWS, 800]) {
    await seed(rows);
    const size = (await db.query<{ s: string }>(`SELECT pg_size_pretty(pg_total_relation_size('evora.job_events')) AS s`)).rows[0]!.s;
    const exact = (await db.query<{ n: number }>(SUM_ALL)).rows[0]!.n;
    const lag = await store.outboxLag();
    const before = await median(() => db.query(SUM_ALL));
    const after = await median(() => store!.outboxLag());
    const beforeServer = await serverMedian(db, { text: SUM_ALL });
    const afterServer = await serverMedian(db, lagConfig);
    const error = ((lag.events - exact) / exact) * 100;
    console.log(
      `${rows.toLocaleString('en-US')} outbox rows (${size}), ${exact.toLocaleString('en-US')} events: sum of every row ${before.toFixed(2)} ms ` +
        `(${beforeServer.toFixed(2)} ms in PostgreSQL); outboxLag ${after.toFixed(2)} ms (${afterServer.toFixed(2)} ms), ${lag.events.toLocaleString('en-US')} events${lag.estimated ? ` (estimate, ${error >= 0 ? '+' : ''}${error.toFixed(2)}%)` : ' (exact)'}, ` +
        `oldest ${lag.oldestSeconds.toFixed(0)} s`,
    );
  }
} finally {
  await store?.close();
  await db.end().catch(() => undefined);
  await pgh.stop();
  await rm(dir, { recursive: true, force: true });
}

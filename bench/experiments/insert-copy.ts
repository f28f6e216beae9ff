/**
 * COPY against the store's batch insert: is a batch of 1,000 jobs cheaper when its rows come
 * in by COPY instead of as the `unnest` of array parameters? The COPY form can keep every
 * property of job-insert-many-ids.sql (idempotency keys with ON CONFLICT, the new-queue step,
 * the events, the NOTIFY) only by copying into a staging table and running the same INSERT …
 * SELECT from it, in one transaction: BEGIN, COPY, the statement, COMMIT. Both forms run
 * interleaved on one connection of an embedded PostgreSQL (durable commits); printed: the
 * median wall ms per batch (the client's encoding, the round trips, the statements, the
 * commit) and this process's CPU per job.
 *
 *   unnest   job-insert-many-ids.sql as the store runs it (named prepared statement)
 *   copy     COPY into a temporary staging table, then that statement reading the staging
 *            table instead of unnest (also prepared)
 *
 * Usage: npx tsx bench/experiments/insert-copy.ts [rounds=10]
 * Needs pg-copy-streams (a bench dependency only).
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { migrate } from '../../src/store/migrate.js';
import { sqlParse } from '../../src/store/statements.js';
import { uuidv7 } from '../../src/domain/ids.js';
import { insertBatchValues, insertPayloadOf } from './insert-batch.js';

const ROUNDS = Number(process.argv[2] ?? 10);
const SIZE = 1000;
const dir = await mkdtemp(join(tmpdir(), 'evora-insert-copy-'));
const pgh = await embeddedPostgresStart({ dataDir: dir, port: await freePort() });
const db = new pg.Client({ connectionString: pgh.url });
try {
  await migrate(pgh.url);
  await db.connect();
  await db.query("INSERT INTO evora.queues (name) VALUES ('enq') ON CONFLICT DO NOTHING");
  await db.query(`CREATE TEMPORARY TABLE staging (id uuid, queue text, type text, payload jsonb, priority int, run_at timestamptz,
                  idempotency_key text, max_attempts int, policy jsonb) ON COMMIT DELETE ROWS`);

  const current = sqlParse(readFileSync(new URL('../../src/store/sql/job-insert-many-ids.sql', import.meta.url), 'utf8'), 'ids.sql');
  const copyText = current.text.replace(/SELECT \*\n  FROM unnest\([\s\S]*?\)\n    AS i\([\s\S]*?\)\n\)/, 'SELECT * FROM staging\n)');
  if (copyText === current.text) throw new Error('the staging form did not apply');
  const copy = sqlParse(`-- name: copy\n${copyText.replace(/\$(\d+)/g, ':now')}`, 'copy.sql');

  /** COPY's text format: tab-separated, \N for NULL, backslashes doubled (JSON text has no raw tabs or newlines). */
  const copyLine = (id: string, i: number) => `${id}\tenq\tnoop\t${insertPayloadOf(i).replace(/\\/g, '\\\\')}\t0\t\\N\t\\N\t\\N\t\\N\n`;

  const unnestBatch = async () => {
    const values = insertBatchValues(SIZE);
    const r = await db.query({ name: 'unnest', text: current.text, values: current.paramNames.map((p) => values[p]) });
    if (r.rowCount !== SIZE) throw new Error(`unnest inserted ${r.rowCount}`);
  };
  const copyBatch = async () => {
    await db.query('BEGIN');
    try {
      const lines = Array.from({ length: SIZE }, (_, i) => copyLine(uuidv7(), i)).join('');
      await pipeline(Readable.from([lines]), db.query(copyFrom('COPY staging FROM STDIN')));
      const r = await db.query({ name: 'copy', text: copy.text, values: [null] });
      if (r.rowCount !== SIZE) throw new Error(`copy inserted ${r.rowCount}`);
      await db.query('COMMIT');
    } catch (err) {
      await db.query('ROLLBACK');
      throw err;
    }
  };
  const forms = { unnest: unnestBatch, copy: copyBatch } as const;
  const wall: Record<string, number[]> = { unnest: [], copy: [] };
  const cpu: Record<string, number[]> = { unnest: [], copy: [] };
  for (const f of Object.values(forms)) for (let k = 0; k < 3; k++) await f(); // prepare, warm up
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, f] of Object.entries(forms)) {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      await f();
      wall[name]!.push(performance.now() - t0);
      const c = process.cpuUsage(c0);
      cpu[name]!.push((c.user + c.system) / SIZE);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.table(
    Object.keys(forms).map((name) => ({
      form: name,
      'wall ms / 1000 (median)': +median(wall[name]!).toFixed(2),
      'range': `${Math.min(...wall[name]!).toFixed(1)}..${Math.max(...wall[name]!).toFixed(1)}`,
      'client CPU µs / job (median)': +median(cpu[name]!).toFixed(2),
    })),
  );
} finally {
  await db.end().catch(() => undefined);
  await pgh.stop();
  await rm(dir, { recursive: true, force: true });
}

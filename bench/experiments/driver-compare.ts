/**
 * node-postgres (what the store runs on) against `postgres` (porsager/postgres, the fastest
 * pure-JavaScript driver we know of) on Evora's hot path, side by side: the same claim
 * (job-claim.sql) and completion (job-complete-many.sql) statements, prepared, over one
 * connection each, burning down JOBS jobs BATCH at a time, rounds interleaved. Reports the
 * CPU time of this Node process per job (process.cpuUsage: PostgreSQL is another process),
 * which is the driver's cost: sending the parameters and turning the rows into values.
 *
 * Variants:
 * - `pg`: node-postgres as the store configures it (its type parsers, rows as objects);
 * - `pg-raw`: node-postgres with rows as arrays of text (no type parsing at all): the floor
 *   of what node-postgres can do without changing what it reads;
 * - `postgres`: porsager/postgres with its default type parsing (Dates, JSON, numbers),
 *   prepared statements, rows as objects.
 *
 * Usage: npx tsx bench/experiments/driver-compare.ts   (ROUNDS=7 JOBS=20000 BATCH=1000)
 * `postgres` is a bench dependency only (bench/package.json); the product does not install it.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import postgres from 'postgres';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { migrate } from '../../src/store/migrate.js';
import { sqlParse, SQL_DIR } from '../../src/store/statements.js';
import { storeTypes } from '../../src/store/types.js';

const ROUNDS = Number(process.env.ROUNDS ?? 7);
const JOBS = Number(process.env.JOBS ?? 20_000);
const BATCH = Number(process.env.BATCH ?? 1000);

const load = (file: string) => sqlParse(readFileSync(fileURLToPath(new URL(file, SQL_DIR)), 'utf8'), file);
const claim = load('job-claim.sql');
const complete = load('job-complete-many.sql');
const valuesOf = (s: { paramNames: string[] }, params: Record<string, unknown>) => s.paramNames.map((n) => params[n]);

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** One driver: runs a prepared statement, returns rows with `id` and `lease_token` readable. */
interface Driver {
  name: string;
  run(name: string, text: string, values: unknown[]): Promise<{ id: string; token: string }[]>;
  end(): Promise<void>;
}

const RAW = { getTypeParser: () => (value: string) => value } as unknown as pg.CustomTypesConfig;

async function pgDriver(url: string, raw: boolean): Promise<Driver> {
  const client = new pg.Client({ connectionString: url, types: raw ? RAW : storeTypes });
  await client.connect();
  await client.query("SET TimeZone = 'UTC'");
  return {
    name: raw ? 'pg-raw' : 'pg',
    async run(name, text, values) {
      if (raw) {
        const r = await client.query({ name, text, values, rowMode: 'array' });
        const idIndex = r.fields.findIndex((f) => f.name === 'id');
        const tokenIndex = r.fields.findIndex((f) => f.name === 'lease_token');
        return (r.rows as unknown as (string | null)[][]).filter((row) => row[idIndex] !== null).map((row) => ({ id: row[idIndex]!, token: row[tokenIndex]! }));
      }
      const r = await client.query({ name, text, values });
      return r.rows.filter((row: { id: string | null }) => row.id !== null).map((row: { id: string; lease_token: string }) => ({ id: row.id, token: row.lease_token }));
    },
    end: () => client.end(),
  };
}

async function postgresDriver(url: string): Promise<Driver> {
  const sql = postgres(url, { max: 1, prepare: true, connection: { TimeZone: 'UTC' }, onnotice: () => undefined });
  await sql`SELECT 1`;
  return {
    name: 'postgres',
    async run(_name, text, values) {
      const rows = await sql.unsafe(text, values as never[], { prepare: true });
      return rows.filter((row) => row.id !== null).map((row) => ({ id: row.id as string, token: row.lease_token as string }));
    },
    end: () => sql.end(),
  };
}

const dir = await mkdtemp(join(tmpdir(), 'evora-driver-'));
const pgh = await embeddedPostgresStart({ dataDir: dir, port: await freePort() });
const drivers: Driver[] = [];
try {
  await migrate(pgh.url);
  const admin = new pg.Client({ connectionString: pgh.url });
  await admin.connect();
  await admin.query(`INSERT INTO evora.queues (name, max_attempts) VALUES ('q', 25)`);
  drivers.push(await pgDriver(pgh.url, false), await pgDriver(pgh.url, true), await postgresDriver(pgh.url));
  const slotWorkers = Array.from({ length: BATCH }, () => 1);
  const cpu = new Map<string, { claim: number[]; complete: number[] }>(drivers.map((d) => [d.name, { claim: [], complete: [] }]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const d of drivers) {
      await admin.query(
        `INSERT INTO evora.jobs (queue, type, payload, max_attempts) SELECT 'q', 'noop', '{"n": 1, "s": "text"}'::jsonb, 25 FROM generate_series(1, $1::int)`,
        [JOBS],
      );
      let claimUs = 0;
      let completeUs = 0;
      for (let done = 0; done < JOBS; ) {
        let t = cpuUs();
        const rows = await d.run('claim', claim.text, valuesOf(claim, { queues: ['q'], limit: BATCH, workerIds: ['w'], slotWorkers, types: null, now: null }));
        claimUs += cpuUs() - t;
        if (rows.length === 0) throw new Error(`${d.name}: the claim took nothing after ${done} jobs`);
        t = cpuUs();
        const out = await d.run('complete', complete.text, valuesOf(complete, { ids: rows.map((r) => r.id), tokens: rows.map((r) => r.token), results: rows.map(() => null), now: null }));
        completeUs += cpuUs() - t;
        if (out.length !== rows.length) throw new Error(`${d.name}: completed ${out.length} of ${rows.length}`);
        done += rows.length;
      }
      cpu.get(d.name)!.claim.push(claimUs / JOBS);
      cpu.get(d.name)!.complete.push(completeUs / JOBS);
    }
  }
  await admin.end();
  console.log(`Node CPU µs per job (min / median of ${ROUNDS} rounds of ${JOBS} jobs, ${BATCH} per statement)`);
  for (const d of drivers) {
    const c = cpu.get(d.name)!;
    const f = (xs: number[]) => `${Math.min(...xs).toFixed(2)} / ${median(xs).toFixed(2)}`;
    console.log(`  ${d.name.padEnd(9)} claim ${f(c.claim)}   complete ${f(c.complete)}`);
  }
} finally {
  for (const d of drivers) await d.end().catch(() => undefined);
  await pgh.stop();
  await rm(dir, { recursive: true, force: true });
}

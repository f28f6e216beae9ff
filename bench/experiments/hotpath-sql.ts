/**
 * What the claim and the completion cost PostgreSQL, statement by statement: burns down
 * JOBS no-op jobs with the store's own claim (job-claim.sql) and completion
 * (job-complete-many.sql), BATCH jobs per statement, and reports each statement's wall time
 * and the CPU time of the backend that ran it (from /proc/<pid>/schedstat: nanoseconds, not
 * ticks), per job: the median over ROUNDS rounds. Measurement only; the schema is Evora's
 * (`evora migrate`), the jobs are made by one INSERT … generate_series (not Evora's submit:
 * only the claim and the completion are timed).
 *
 * Variants run side by side, each in a database of its own on one PostgreSQL, interleaved
 * round by round (single runs on this machine differ by ±10%; interleaving cancels drift).
 * Each argument is a variant: `name` alone is the store's statements on the migrated schema;
 * `name;key=value;…` changes it, with keys
 * - drop=a,b        drop those indexes first;
 * - fillfactor=n    the jobs table's fillfactor;
 * - setup=SQL       run after the migration (e.g. drop a trigger, add a column);
 * - session=SQL     run on the variant's connection (e.g. SET plan_cache_mode = …);
 * - edit=a,b       edits of the store's statements (EDITS below: compact, noattempts,
 *                   noevents, nodistinct, ordinality), each checked to apply;
 * - claim=FILE, complete=FILE   other statement files (named parameters, parsed by the
 *                   store's parser) in place of the store's.
 * PERF=file records the first variant's backend with `perf record --call-graph dwarf`
 * during the last round (perf must be on PATH).
 *
 * Usage: npx tsx bench/experiments/hotpath-sql.ts store 'noevents;edit=noevents' 'generic;session=SET plan_cache_mode = force_generic_plan'
 *        (ROUNDS=5 JOBS=20000 BATCH=1000)
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { migrate } from '../../src/store/migrate.js';
import { sqlParse, SQL_DIR } from '../../src/store/statements.js';

const ROUNDS = Number(process.env.ROUNDS ?? 5);
const JOBS = Number(process.env.JOBS ?? 20_000);
const BATCH = Number(process.env.BATCH ?? 1000);

interface Parsed {
  text: string;
  paramNames: string[];
}
const storeFile = (name: string) => fileURLToPath(new URL(name, SQL_DIR));
const valuesOf = (s: Parsed, params: Record<string, unknown>) =>
  s.paramNames.map((n) => {
    if (!(n in params)) throw new Error(`no value for parameter :${n}`);
    return params[n];
  });

/**
 * Edits of the store's statement texts, each a cheaper form to measure; `apply` must change
 * the text (a statement that drifted from what an edit expects fails the run).
 */
const withoutEvents = (t: string) => t.replace(/,\s*events AS \(\s*INSERT INTO evora\.job_events[\s\S]*?HAVING count\(\*\) > 0\s*\)/, '');
/**
 * An outbox column as one element standing for all of the row's events when they agree (a
 * format the readers do not know: measured only): constants as a one-element array, the
 * other uniform columns checked by count/min/max.
 */
const uniform = (x: string) => `CASE WHEN count(${x}) = count(*) AND min(${x}) = max(${x}) THEN ARRAY[min(${x})] ELSE array_agg(${x}) END`;
const compactEvents = (kind: string, from: string, to: string, nullMs: 'wait_ms' | 'run_ms') => (t: string) =>
  t
    .replace('array_agg(id), array_agg(queue), array_agg(type),', `array_agg(id), ${uniform('queue')}, ${uniform('type')},`)
    .replace(
      `array_agg('${kind}'::evora.job_event_kind), array_agg('${from}'::evora.job_state), array_agg(state),`,
      `ARRAY['${kind}'::evora.job_event_kind], ARRAY['${from}'::evora.job_state], ARRAY['${to}'::evora.job_state],`,
    )
    .replace('array_agg(attempt), array_agg(worker_id),', `${uniform('attempt')}, ${uniform('worker_id')},`)
    .replace(nullMs === 'run_ms' ? /, array_agg\(NULL::float8\)\n/ : /array_agg\(NULL::float8\), /, nullMs === 'run_ms' ? ', ARRAY[NULL::float8]\n' : 'ARRAY[NULL::float8], ');
const EDITS: Record<string, { claim?: (text: string) => string; complete?: (text: string) => string }> = {
  /** Uniform outbox columns stored as one element (compactEvents). */
  compact: { claim: compactEvents('claimed', 'PENDING', 'RUNNING', 'run_ms'), complete: compactEvents('completed', 'RUNNING', 'COMPLETED', 'wait_ms') },
  /** The completion without deleting the attempt history of the jobs it deletes. */
  noattempts: { complete: (t) => t.replace(/attempts_deleted AS \([\s\S]*?\n\),\n/, '') },
  /** Without the outbox events (a property Evora keeps: what they cost). */
  noevents: { claim: withoutEvents, complete: withoutEvents },
  /** The completion without DISTINCT ON over its input (an UPDATE … FROM updates a row once anyway). */
  nodistinct: { complete: (t) => t.replace('SELECT DISTINCT ON (id, token) * FROM unnest', 'SELECT * FROM unnest') },
  /** The claim's slots numbered WITH ORDINALITY over a sorted array instead of a window. */
  ordinality: {
    claim: (t) =>
      t.replace(
        'FROM (SELECT id, row_number() OVER (ORDER BY priority, run_at, id) AS slot FROM picked) p',
        'FROM unnest(ARRAY(SELECT id FROM picked ORDER BY priority, run_at, id)) WITH ORDINALITY AS p(id, slot)',
      ),
  },
};

/** The store's statement text with the named edits applied (each must change it). */
function edited(text: string, edits: string[], which: 'claim' | 'complete'): string {
  for (const name of edits) {
    const edit = EDITS[name];
    if (!edit) throw new Error(`unknown edit "${name}" (one of ${Object.keys(EDITS).join(', ')})`);
    const apply = edit[which];
    if (!apply) continue;
    const out = apply(text);
    if (out === text) throw new Error(`edit ${name} did not apply to the ${which}`);
    text = out;
  }
  return text;
}

interface Variant {
  name: string;
  drop: string[];
  fillfactor?: number;
  setup?: string;
  session?: string;
  claim: Parsed;
  complete: Parsed;
  db?: pg.Client;
  backend?: number;
  claimCpu: number[];
  completeCpu: number[];
  claimWall: number[];
  completeWall: number[];
  walBytes: number[];
}

const VARIANT_KEYS = ['drop', 'fillfactor', 'setup', 'session', 'claim', 'complete', 'edit'];

function variantOf(arg: string): Variant {
  // `;` separates pairs only before a key, so setup= may hold several statements.
  const [name, ...pairs] = arg.split(new RegExp(`;(?=(?:${VARIANT_KEYS.join('|')})=)`));
  const kv = new Map(pairs.map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)] as const));
  for (const k of kv.keys()) if (!VARIANT_KEYS.includes(k)) throw new Error(`unknown key "${k}" in ${arg}`);
  const edits = (kv.get('edit') ?? '').split(',').filter(Boolean);
  const statementOf = (which: 'claim' | 'complete', file: string): Parsed => {
    const path = kv.get(which) ?? storeFile(file);
    return sqlParse(edited(readFileSync(path, 'utf8'), edits, which), path);
  };
  return {
    name: name!,
    drop: (kv.get('drop') ?? '').split(',').filter(Boolean),
    ...(kv.has('fillfactor') ? { fillfactor: Number(kv.get('fillfactor')) } : {}),
    ...(kv.has('setup') ? { setup: kv.get('setup')! } : {}),
    ...(kv.has('session') ? { session: kv.get('session')! } : {}),
    claim: statementOf('claim', 'job-claim.sql'),
    complete: statementOf('complete', 'job-complete-many.sql'),
    claimCpu: [],
    completeCpu: [],
    claimWall: [],
    completeWall: [],
    walBytes: [],
  };
}

const variants = (process.argv.length > 2 ? process.argv.slice(2) : ['store']).map(variantOf);

/** CPU time of a process in nanoseconds (/proc/<pid>/schedstat's first field). */
const cpuNs = (pid: number) => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function burnDown(v: Variant, perfFile: string | null): Promise<void> {
  const db = v.db!;
  const backend = v.backend!;
  const slotWorkers = Array.from({ length: BATCH }, () => 1);
  await db.query(
    `INSERT INTO evora.jobs (queue, type, payload, max_attempts) SELECT 'q', 'noop', '{}'::jsonb, 25 FROM generate_series(1, $1::int)`,
    [JOBS],
  );
  await db.query('ANALYZE evora.jobs');
  await db.query('CHECKPOINT');
  const perf = perfFile
    ? spawn('perf', ['record', '-F', '4000', '--call-graph', 'dwarf,16384', '-p', String(backend), '-o', perfFile], { stdio: 'ignore' })
    : null;
  if (perf) await new Promise((r) => setTimeout(r, 500));
  const t = { claimCpu: 0, completeCpu: 0, claimWall: 0, completeWall: 0 };
  const lsn = async () => (await db.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn')).rows[0]!.lsn;
  const walBefore = await lsn();
  for (let done = 0; done < JOBS; ) {
    let cpu0 = cpuNs(backend);
    let t0 = performance.now();
    const { rows: all } = await db.query<{ id: string | null; lease_token: string }>({
      name: 'claim',
      text: v.claim.text,
      values: valuesOf(v.claim, { queues: ['q'], limit: BATCH, workerIds: ['w'], slotWorkers, types: null, now: null }),
    });
    t.claimWall += performance.now() - t0;
    t.claimCpu += cpuNs(backend) - cpu0;
    // The store's claim also returns a row without a job per queue (id null).
    const rows = all.filter((r): r is { id: string; lease_token: string } => r.id !== null);
    if (rows.length === 0) throw new Error(`${v.name}: the claim took nothing after ${done} jobs`);
    cpu0 = cpuNs(backend);
    t0 = performance.now();
    const c = await db.query({
      name: 'complete',
      text: v.complete.text,
      values: valuesOf(v.complete, { ids: rows.map((r) => r.id), tokens: rows.map((r) => r.lease_token), results: rows.map(() => null), now: null }),
    });
    t.completeWall += performance.now() - t0;
    t.completeCpu += cpuNs(backend) - cpu0;
    if (c.rowCount !== rows.length) throw new Error(`${v.name}: completed ${c.rowCount} of ${rows.length}`);
    done += rows.length;
  }
  const walAfter = await lsn();
  v.walBytes.push(Number((await db.query<{ b: string }>('SELECT pg_wal_lsn_diff($1, $2)::int8 AS b', [walAfter, walBefore])).rows[0]!.b) / JOBS);
  if (perf) {
    perf.kill('SIGINT');
    await new Promise((r) => perf.once('exit', r));
  }
  v.claimCpu.push(t.claimCpu / 1000 / JOBS);
  v.completeCpu.push(t.completeCpu / 1000 / JOBS);
  v.claimWall.push((t.claimWall * 1000) / JOBS);
  v.completeWall.push((t.completeWall * 1000) / JOBS);
}

const dir = await mkdtemp(join(tmpdir(), 'evora-hotpath-sql-'));
const pgh = await embeddedPostgresStart({ dataDir: dir, port: await freePort() });
const admin = new pg.Client({ connectionString: pgh.url });
try {
  await admin.connect();
  for (const [i, v] of variants.entries()) {
    const dbName = `variant_${i}`;
    await admin.query(`CREATE DATABASE ${dbName}`);
    const url = new URL(pgh.url);
    url.pathname = `/${dbName}`;
    await migrate(url.href);
    const db = new pg.Client({ connectionString: url.href });
    await db.connect();
    await db.query(`INSERT INTO evora.queues (name, max_attempts) VALUES ('q', 25)`);
    if (v.fillfactor) await db.query(`ALTER TABLE evora.jobs SET (fillfactor = ${v.fillfactor})`);
    for (const index of v.drop) await db.query(`DROP INDEX evora.${pg.escapeIdentifier(index)}`);
    if (v.setup) await db.query(v.setup);
    if (v.session) await db.query(v.session);
    v.db = db;
    v.backend = (await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, v] of variants.entries()) {
      await burnDown(v, process.env.PERF && i === 0 && round === ROUNDS - 1 ? process.env.PERF : null);
    }
  }
  const fmt = (xs: number[]) => `${median(xs).toFixed(1).padStart(5)} (${xs.map((x) => x.toFixed(1)).join(' ')})`;
  console.log(`µs per job, median of ${ROUNDS} rounds (each round's value in brackets); ${JOBS} jobs per round, ${BATCH} per statement`);
  for (const v of variants) {
    const both = v.claimCpu.map((c, i) => c + v.completeCpu[i]!);
    console.log(`${v.name}`);
    console.log(`  backend CPU: claim ${fmt(v.claimCpu)}  complete ${fmt(v.completeCpu)}  both ${fmt(both)}`);
    console.log(`  wall:        claim ${fmt(v.claimWall)}  complete ${fmt(v.completeWall)}`);
    console.log(`  WAL bytes per job (claim + complete): ${Math.round(median(v.walBytes))}`);
  }
} finally {
  for (const v of variants) await v.db?.end().catch(() => undefined);
  await admin.end().catch(() => undefined);
  await pgh.stop();
  await rm(dir, { recursive: true, force: true });
}

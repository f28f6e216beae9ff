import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { statementFiles, statementNamed, statementsDeclared } from '../../src/store/catalog.js';
import { CHANNEL_JOB_AVAILABLE, CHANNEL_JOB_CANCEL, CHANNEL_SCHEDULE_CHANGED, CHANNEL_TOKENS_CHANGED } from '../../src/store/store.js';
import { queryConfig, sqlParse, type Statement } from '../../src/store/statements.js';
import { storeSetup } from '../helpers/store-setup.js';

let sql: pg.Pool;
beforeAll(async () => {
  ({ sql } = await storeSetup());
});

/**
 * Parameters for the statements that cannot run with every parameter null (a NOT NULL
 * column gets one); the others run with nulls. Only to see them run and name their columns.
 */
const SAMPLE_PARAMS: Record<string, Record<string, unknown>> = {
  jobInsertHandoff: { id: '018f0000-0000-7000-8000-000000000001', queue: 'q', type: 't', payload: '{}', priority: 0, handoffWorkerId: 'w' },
  queueUpsert: { name: 'q', actorKind: 'anonymous', actorName: '', change: '{}' },
  tokenBootstrapEnsure: { id: '018f0000-0000-7000-8000-000000000002', secretHash: Buffer.alloc(32, 1) },
  telemetryBatchMarkApplied: { batchId: 1 },
  migrationRecord: { version: 999, name: 'test' },
  scheduleUpsert: {
    name: 's', cron: '* * * * *', timezone: 'UTC', queue: 'q', type: 't', payload: '{}', priority: 0,
    misfirePolicy: 'skip', misfireCap: 1, nextRunAt: new Date(0), actorKind: 'anonymous', actorName: '',
  },
  tokenCreate: {
    id: '018f0000-0000-7000-8000-000000000002', name: 't', role: 'viewer', queues: [], secretHashHex: '00'.repeat(32),
    createdBy: '', actorKind: 'anonymous', actorName: '',
  },
  auditInsert: { actorKind: 'anonymous', actorName: '', action: 'queue.pause', target: 'q', change: '{}' },
};

/** Canonical names of the given PostgreSQL type names (int4 -> integer, …), in order. */
async function canonical(client: pg.PoolClient, types: string[]): Promise<string[]> {
  const { rows } = await client.query<{ t: string[] }>(
    `SELECT coalesce(array_agg(u.t::regtype::text ORDER BY u.i), '{}') AS t FROM unnest($1::text[]) WITH ORDINALITY u(t, i)`,
    [types],
  );
  return rows[0]!.t;
}

describe('the statement files', () => {
  it('are each declared once, and every declaration has its file', () => {
    const declared = statementsDeclared().map((s) => s.file).sort();
    expect(declared).toEqual(statementFiles());
  });

  it('prepare against the migrated schema with the declared parameter and result types, and return the declared columns', async () => {
    const client = await sql.connect();
    const checked: string[] = [];
    try {
      const { rows: version } = await client.query<{ v: number }>(`SELECT current_setting('server_version_num')::int AS v`);
      const resultTypesKnown = version[0]!.v >= 160000; // pg_prepared_statements.result_types
      await client.query('BEGIN');
      for (const s of statementsDeclared()) {
        await client.query('SAVEPOINT statement');
        if (s.kind === 'script') {
          expect(s.paramNames, s.name).toEqual([]);
          await client.query(s.text);
        } else {
          await client.query(`PREPARE evora_statement_test AS ${s.text}`);
          const { rows } = await client.query<{ params: string[]; results: string[] | null }>(
            `SELECT parameter_types::text[] AS params, ${resultTypesKnown ? 'result_types::text[]' : 'NULL::text[]'} AS results
             FROM pg_prepared_statements WHERE name = 'evora_statement_test'`,
          );
          await client.query('DEALLOCATE evora_statement_test');
          const declaredParams = s.paramNames.map((p) => (s.paramTypes as Record<string, string>)[p]!);
          expect(rows[0]!.params, `${s.name}: parameter types ($1..$n = ${s.paramNames.join(', ')})`).toEqual(
            await canonical(client, declaredParams),
          );
          if (resultTypesKnown) {
            expect(rows[0]!.results ?? [], `${s.name}: result types`).toEqual(await canonical(client, Object.values(s.rowTypes)));
          }
          const params = Object.fromEntries(s.paramNames.map((p) => [p, SAMPLE_PARAMS[s.name]?.[p] ?? null]));
          const result = await client.query(queryConfig(s, params));
          expect(result.fields.map((f) => f.name), `${s.name}: result columns`).toEqual(Object.keys(s.rowTypes));
        }
        await client.query('ROLLBACK TO SAVEPOINT statement');
        checked.push(s.name);
      }
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
    expect(checked).toHaveLength(statementFiles().length);
  });

  it('notify only on the store\'s channels', () => {
    const channels = new Set<string>();
    for (const s of statementsDeclared()) for (const m of s.text.matchAll(/pg_notify\('([^']*)'/g)) channels.add(m[1]!);
    expect([...channels].sort()).toEqual([CHANNEL_JOB_AVAILABLE, CHANNEL_JOB_CANCEL, CHANNEL_SCHEDULE_CHANGED, CHANNEL_TOKENS_CHANGED].sort());
  });

  it('the hot path runs as named prepared statements, under the names it always had', () => {
    const prepared = statementsDeclared()
      .filter((s) => s.preparedName !== null)
      .map((s) => s.preparedName)
      .sort();
    expect(prepared).toEqual(
      [
        'evora_job_claim', 'evora_job_claim_limited', 'evora_job_complete_many', 'evora_job_fail_many', 'evora_job_heartbeat_many',
        'evora_job_insert_handoff', 'evora_job_insert_many', 'evora_job_insert_many_ids',
        'evora_job_progress_many', 'evora_job_snooze_many', 'evora_job_sweep_expired',
        'evora_outbox_read', 'evora_outbox_read_details',
      ].sort(),
    );
  });
});

describe('the loader', () => {
  it('turns named parameters into positional ones once each, and leaves casts, strings, identifiers and comments alone', () => {
    const parsed = sqlParse(
      [
        '-- name: example',
        '-- What it does. :notAParam',
        "SELECT :a::int, :b, ':c', E'\\':d', \":e\", $$ :f $$, $tag$ :g $tag$, a::text, arr[1:2] -- :h",
        '/* :i /* nested :j */ */ FROM t WHERE x = :a AND y = :now::timestamptz',
      ].join('\n'),
      'example.sql',
    );
    expect(parsed.name).toBe('example');
    expect(parsed.paramNames).toEqual(['a', 'b', 'now']);
    expect(parsed.text).toBe(
      [
        "SELECT $1::int, $2, ':c', E'\\':d', \":e\", $$ :f $$, $tag$ :g $tag$, a::text, arr[1:2] -- :h",
        '/* :i /* nested :j */ */ FROM t WHERE x = $1 AND y = $3::timestamptz',
      ].join('\n'),
    );
  });

  it('refuses positional parameters and a file without a name', () => {
    expect(() => sqlParse('-- name: x\nSELECT $1', 'x.sql')).toThrow(/positional parameter/);
    expect(() => sqlParse('SELECT 1', 'x.sql')).toThrow(/names no statement/);
  });

  it('in development, a call with a missing or an unknown parameter throws', () => {
    const jobGet = statementNamed('jobGet') as Statement<Record<string, unknown>>;
    expect(() => queryConfig(jobGet, {})).toThrow(/parameter "id" is missing/);
    expect(() => queryConfig(jobGet, { id: null, other: 1 })).toThrow(/takes no parameter "other"/);
    expect(queryConfig(jobGet, { id: null })).toEqual({ text: jobGet.text, values: [null] });
  });
});

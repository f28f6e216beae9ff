import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EvoraApiError, EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

// evora.submit_job (0005_strict_idempotency.sql, given the job's policy in 0007_job_policy.sql and its concurrency key in 0009): a submit inside the application's own
// transaction. The server's fallback poll is an hour here, so a job a worker receives was
// pushed by the NOTIFY that the function's COMMIT delivered.

let client: EvoraClient;
let address: string;
let db: pg.Client;
const workers: EvoraWorker[] = [];
beforeAll(async () => {
  let databaseUrl: string;
  ({ address, databaseUrl } = await serverSetup({ pollIntervalMs: '3600000' }));
  client = new EvoraClient({ address });
  db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  await db.query('CREATE TABLE app_orders (id serial PRIMARY KEY, note text NOT NULL)');
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0, graceMs: 1_000 })));
});
afterAll(async () => {
  client.close();
  await db.end();
});

/** The job ids in the outbox or (once the projector moved them) in the recent events. */
async function eventsOf(jobId: string): Promise<number> {
  const { rows } = await db.query(
    `SELECT (SELECT count(*) FROM evora.job_events WHERE $1::uuid = ANY(job_ids))
          + (SELECT count(*) FROM evora.telemetry_recent_events WHERE $1::uuid = ANY(job_ids)) AS n`,
    [jobId],
  );
  return Number(rows[0].n);
}

/** The SQL error a statement raises. */
async function sqlError(sql: string, params: unknown[]): Promise<{ code: string; message: string }> {
  const err = await db.query(sql, params).then(
    () => {
      throw new Error('expected an error, got success');
    },
    (e: unknown) => e as { code: string; message: string },
  );
  return { code: err.code, message: err.message };
}

describe('evora.submit_job', () => {
  it('rolled back leaves no job and no event; committed, an idle worker gets it pushed and completes it', async () => {
    const queue = queueName();
    const done: string[] = [];
    const w = new EvoraWorker({ address, workerId: `w-${queue}`, queues: [queue], slots: 1 });
    workers.push(w);
    w.handle<{ order: number }>('ship', (job) => {
      done.push(job.id);
      return { shipped: job.payload.order };
    });
    await w.start();
    // The worker is idle and its session is listening; give the server the queue row first.
    const warmup = await client.submit({ queue, type: 'ship', payload: { order: 0 } });
    await waitFor(async () => (await client.get(warmup.job.id)).state === 'COMPLETED', { what: 'the warm-up job to complete' });

    await db.query('BEGIN');
    const order = (await db.query(`INSERT INTO app_orders (note) VALUES ('rolled back') RETURNING id`)).rows[0].id as number;
    const rolled = (await db.query(`SELECT * FROM evora.submit_job($1, 'ship', jsonb_build_object('order', $2::int))`, [queue, order])).rows[0];
    expect(rolled.created).toBe(true);
    await db.query('ROLLBACK');
    expect((await db.query('SELECT count(*)::int AS n FROM evora.jobs WHERE id = $1', [rolled.job_id])).rows[0].n).toBe(0);
    expect(await eventsOf(rolled.job_id)).toBe(0);

    await db.query('BEGIN');
    const order2 = (await db.query(`INSERT INTO app_orders (note) VALUES ('committed') RETURNING id`)).rows[0].id as number;
    const { job_id: id } = (await db.query(`SELECT * FROM evora.submit_job(queue => $1, type => 'ship', payload => jsonb_build_object('order', $2::int))`, [queue, order2])).rows[0];
    await db.query('COMMIT');
    await waitFor(() => done.includes(id), { what: 'the committed job to be pushed to the idle worker and run' });
    await waitFor(async () => (await client.get(id)).state === 'COMPLETED', { what: 'the job to be COMPLETED' });
    expect((await client.get(id)).result).toEqual({ shipped: order2 });
    expect(done).not.toContain(rolled.job_id);
    expect(await eventsOf(id)).toBeGreaterThanOrEqual(1);
  });

  it('agrees with the API on idempotency: replays across the two are created=false, and a differing field is named the same', async () => {
    const queue = queueName();
    const viaApi = await client.submit({ queue, type: 't', idempotencyKey: 'api', payload: { v: 1 }, priority: 2 });
    const replay = (await db.query(`SELECT * FROM evora.submit_job($1, 't', '{"v":1}', 2, idempotency_key => 'api')`, [queue])).rows[0];
    expect(replay).toEqual({ job_id: viaApi.job.id, created: false });

    const viaSql = (await db.query(`SELECT * FROM evora.submit_job($1, 't', '{"v":1}', max_attempts => 4, idempotency_key => 'sql')`, [queue])).rows[0];
    expect(viaSql.created).toBe(true);
    expect(await client.submit({ queue, type: 't', idempotencyKey: 'sql', payload: { v: 1 }, maxAttempts: 4 })).toMatchObject({ created: false, job: { id: viaSql.job_id } });
    // The row the function wrote is the row the API writes for the same submit.
    const viaApi2 = await client.submit({ queue, type: 't', idempotencyKey: 'api2', payload: { v: 1 }, maxAttempts: 4 });
    const cols = 'queue, type, payload, state, priority, attempt, max_attempts, submitted';
    const { rows } = await db.query(`SELECT ${cols} FROM evora.jobs WHERE id = ANY($1::uuid[]) ORDER BY idempotency_key`, [[viaApi2.job.id, viaSql.job_id]]);
    expect(rows[0]).toEqual(rows[1]);

    const fromSql = await sqlError(`SELECT * FROM evora.submit_job($1, 't', '{"v":1}', 2, max_attempts => 9, idempotency_key => 'api')`, [queue]);
    expect(fromSql).toEqual({
      code: '23505',
      message: `evora: idempotency key "api" in queue "${queue}" already names job ${viaApi.job.id}, submitted with a different max_attempts`,
    });
    const fromApi = await client.submit({ queue, type: 't', idempotencyKey: 'sql', payload: { v: 1 } }).catch((e: unknown) => e as EvoraApiError);
    expect((fromApi as EvoraApiError).details).toMatch(/already names job .*, submitted with a different max_attempts$/);
    // Unset on both (run_at, and here max_attempts) is identical.
    await db.query(`SELECT evora.submit_job($1, 't', idempotency_key => 'bare')`, [queue]);
    expect((await db.query(`SELECT created FROM evora.submit_job($1, 't', idempotency_key => 'bare')`, [queue])).rows[0].created).toBe(false);
  });

  it("agrees with the API on a job's own backoff and timeout: the same row, replays across the two, the differing field named", async () => {
    const queue = queueName();
    const viaSql = (
      await db.query(
        `SELECT * FROM evora.submit_job($1, 't', idempotency_key => 'pol', backoff_kind => 'fixed', backoff_base => '1 second', timeout => '30 seconds')`,
        [queue],
      )
    ).rows[0];
    const policy = { backoff: { kind: 'fixed' as const, baseSeconds: 1 }, timeoutSeconds: 30 };
    expect(await client.submit({ queue, type: 't', idempotencyKey: 'pol', ...policy })).toMatchObject({ created: false, job: { id: viaSql.job_id } });
    const viaApi = await client.submit({ queue, type: 't', idempotencyKey: 'pol2', ...policy });
    const cols = 'submitted, backoff_kind, backoff_base_seconds, backoff_cap_seconds, backoff_jitter, timeout_seconds';
    const { rows } = await db.query(`SELECT ${cols} FROM evora.jobs WHERE id = ANY($1::uuid[])`, [[viaApi.job.id, viaSql.job_id]]);
    expect(rows[0]).toEqual(rows[1]);
    expect(rows[0]).toMatchObject({ backoff_kind: 'fixed', backoff_base_seconds: 1, backoff_cap_seconds: null, backoff_jitter: 0, timeout_seconds: 30 });
    const fromSql = await sqlError(`SELECT evora.submit_job($1, 't', idempotency_key => 'pol2', backoff_kind => 'fixed', backoff_base => '1 second')`, [queue]);
    expect(fromSql).toEqual({ code: '23505', message: `evora: idempotency key "pol2" in queue "${queue}" already names job ${viaApi.job.id}, submitted with a different timeout` });
    // Without a timeout of its own a job takes the queue's default, as through the API.
    await client.upsertQueue(queue, { attemptTimeoutSeconds: 90 });
    const plain = (await db.query(`SELECT * FROM evora.submit_job($1, 't')`, [queue])).rows[0];
    expect((await db.query('SELECT timeout_seconds FROM evora.jobs WHERE id = $1', [plain.job_id])).rows[0].timeout_seconds).toBe(90);
  });

  it('agrees with the API on the concurrency key: the same row, replays across the two, a differing key named', async () => {
    const queue = queueName();
    const viaSql = (await db.query(`SELECT * FROM evora.submit_job($1, 't', idempotency_key => 'ck', concurrency_key => 'tenant-1')`, [queue])).rows[0];
    expect(await client.submit({ queue, type: 't', idempotencyKey: 'ck', concurrencyKey: 'tenant-1' })).toMatchObject({
      created: false,
      job: { id: viaSql.job_id, concurrencyKey: 'tenant-1' },
    });
    const viaApi = await client.submit({ queue, type: 't', idempotencyKey: 'ck2', concurrencyKey: 'tenant-1' });
    const { rows } = await db.query(`SELECT submitted, concurrency_key FROM evora.jobs WHERE id = ANY($1::uuid[])`, [[viaApi.job.id, viaSql.job_id]]);
    expect(rows[0]).toEqual(rows[1]);
    expect(rows[0].concurrency_key).toBe('tenant-1');
    const fromSql = await sqlError(`SELECT evora.submit_job($1, 't', idempotency_key => 'ck2', concurrency_key => 'tenant-2')`, [queue]);
    expect(fromSql).toEqual({
      code: '23505',
      message: `evora: idempotency key "ck2" in queue "${queue}" already names job ${viaApi.job.id}, submitted with a different concurrency_key`,
    });
  });

  it('bad input is invalid_parameter_value with one line naming the field, and changes nothing', async () => {
    const queue = queueName();
    const cases: [string, unknown[], RegExp][] = [
      [`SELECT evora.submit_job('', 't')`, [], /^evora: queue is required$/],
      [`SELECT evora.submit_job($1, 'bad type')`, [queue], /^evora: type "bad type" may contain only/],
      [`SELECT evora.submit_job($1, 't', '[1]')`, [queue], /^evora: payload must be a JSON object, got array$/],
      [`SELECT evora.submit_job($1, 't', priority => 1001)`, [queue], /^evora: priority must be/],
      [`SELECT evora.submit_job($1, 't', max_attempts => -1)`, [queue], /^evora: max_attempts must be/],
      [`SELECT evora.submit_job($1, 't', idempotency_key => repeat('k', 256))`, [queue], /^evora: idempotency_key is longer/],
      [`SELECT evora.submit_job($1, 't', run_at => 'infinity')`, [queue], /^evora: run_at is not a valid time$/],
      [`SELECT evora.submit_job($1, 't', timeout => '0 seconds')`, [queue], /^evora: timeout must be positive, got 0 s$/],
      [`SELECT evora.submit_job($1, 't', backoff_jitter => 1.5)`, [queue], /^evora: backoff.jitter must be from 0 to 1$/],
      [`SELECT evora.submit_job($1, 't', backoff_base => '-1 second')`, [queue], /^evora: backoff durations must not be negative$/],
      [`SELECT evora.submit_job($1, 't', concurrency_key => repeat('é', 128))`, [queue], /^evora: concurrency_key is longer than 255 bytes \(got 256\)$/],
      // What no API read could return: Timestamp's range, 24 levels of nesting, 365-day backoffs.
      [`SELECT evora.submit_job($1, 't', run_at => '10000-01-01T00:00:00Z')`, [queue], /^evora: run_at must lie in 0001-01-01T00:00:00Z\.\.9999-12-31T23:59:59Z, got /],
      [`SELECT evora.submit_job($1, 't', run_at => '0044-03-15T00:00:00Z BC')`, [queue], /^evora: run_at must lie in/],
      [`SELECT evora.submit_job($1, 't', $2::jsonb)`, [queue, `${'{"a":'.repeat(25)}1${'}'.repeat(25)}`], /^evora: payload nests objects and arrays more than 24 levels deep$/],
      [`SELECT evora.submit_job($1, 't', $2::jsonb)`, [queue, `{"a":${'['.repeat(24)}${']'.repeat(24)}}`], /^evora: payload nests objects and arrays more than 24 levels deep$/],
      [`SELECT evora.submit_job($1, 't', backoff_base => '366 days')`, [queue], /^evora: backoff.base must be at most 365 days, got 31622400 s$/],
      [`SELECT evora.submit_job($1, 't', backoff_cap => '100000 years')`, [queue], /^evora: backoff.cap must be at most 365 days/],
      [`SELECT evora.submit_job($1, 't', backoff_base => '2 hours', backoff_cap => '1 hour')`, [queue], /^evora: backoff.base \(7200 s\) is longer than backoff.cap \(3600 s\): every delay would be the cap$/],
    ];
    for (const [sql, params, message] of cases) {
      const err = await sqlError(sql, params);
      expect(err.code).toBe('22023');
      expect(err.message).toMatch(message);
      expect(err.message).not.toMatch(/\n/);
    }
    expect((await db.query('SELECT count(*)::int AS n FROM evora.queues WHERE name = $1', [queue])).rows[0].n).toBe(0);
  });

  it('takes what the API takes at the edges: 24 levels of nesting (brackets in strings do not count), 9999-12-31, a base equal to its cap, a key of 255 emoji', async () => {
    const queue = queueName();
    const deepest = `${'{"a":'.repeat(23)}["[[[[{{"]${'}'.repeat(23)}`;
    const viaSql = await db.query(`SELECT job_id FROM evora.submit_job($1, 't', $2::jsonb, run_at => '9999-12-31T23:59:59Z', backoff_base => '1 hour', backoff_cap => '1 hour')`, [queue, deepest]);
    const job = await client.get(viaSql.rows[0].job_id);
    expect(job.runAt).toEqual(new Date('9999-12-31T23:59:59Z'));
    expect(job.payload).toEqual(JSON.parse(deepest));
    // The API takes the same payload.
    await client.submit({ queue, type: 't', payload: JSON.parse(deepest) });
    // A key of 255 characters outside the BMP (510 UTF-16 units): both doors count characters,
    // so the API replays the job the function made (it used to refuse the key as too long).
    const key = '\u{1F600}'.repeat(255);
    const keyed = await db.query(`SELECT job_id FROM evora.submit_job($1, 't', idempotency_key => $2)`, [queue, key]);
    expect(await client.submit({ queue, type: 't', idempotencyKey: key })).toMatchObject({ created: false, job: { id: keyed.rows[0].job_id } });
    await expect(client.submit({ queue, type: 't', idempotencyKey: `${key}x` })).rejects.toThrow(/idempotency_key is longer than 255 characters/);
  });
});

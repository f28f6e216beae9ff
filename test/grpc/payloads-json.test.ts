import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { AckResult, type LeasedJob } from '../../src/gen/evora/v1/worker.js';
import { EvoraWorker } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { rawWorkers } from '../helpers/raw-worker.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Payloads and results as JSON text on the Work stream (docs/api.md "Payloads as JSON text"):
 * a worker that says hello.payloads_as_json gets each pushed payload as the stored text in
 * LeasedJob.payload_json (job.payload unset); any other worker gets Structs; result_json is
 * stored as sent, and a bad one is refused alone.
 */

let clients: Clients;
let sql: pg.Pool;
let address: string;
beforeAll(async () => {
  let databaseUrl: string;
  ({ clients, address, databaseUrl } = await serverSetup({ maxPayloadBytes: '2000' }));
  sql = new pg.Pool({ connectionString: databaseUrl, max: 2 });
});
afterAll(async () => {
  await sql.end();
});
const worker = rawWorkers(() => clients);

/** A payload with text to escape, unicode, numbers and nesting. */
const PAYLOAD = { s: 'quote " back \\ zürich 日本 🙂', n: 1.5, big: 12345678901, list: [1, 'two', null, true], nested: { a: { b: [] } } };

async function submit(queue: string, payload: Record<string, unknown>, n = 1): Promise<string[]> {
  const res = await call(clients.jobs, 'submitJobs', {
    idsOnly: true,
    jobs: Array.from({ length: n }, () => ({ queue, type: 't', priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.from(JSON.stringify(payload)) })),
  });
  return res.ids;
}

/** The stored payload and result of a job, as PostgreSQL's jsonb text. */
async function stored(id: string): Promise<{ payload: string; result: string | null; state: string }> {
  const { rows } = await sql.query(`SELECT payload::text AS payload, result::text AS result, state FROM evora.jobs WHERE id = $1`, [id]);
  return rows[0];
}

const text = (j: LeasedJob) => Buffer.from(j.payloadJson ?? new Uint8Array()).toString('utf8');

describe('payloads as JSON text', () => {
  it('a worker that asks gets the stored text, and no Struct; one that does not gets the Struct; both of one queue', async () => {
    const queue = queueName('json');
    const ids = await submit(queue, PAYLOAD, 4);
    const json = worker();
    await json.hello('json', [queue], 2, { batches: true, payloadsAsJson: true });
    // The welcome also tells the server's limits (docs/api.md, "Size limits on the Work stream").
    expect(json.messages('welcome')[0]).toMatchObject({ payloadsAsJson: true, maxResultBytes: 2000, maxMessageBytes: 4 * 1024 * 1024 });
    const plain = worker();
    await plain.hello('plain', [queue], 2, { batches: true });
    expect(plain.messages('welcome')[0]).toMatchObject({ payloadsAsJson: false });
    await json.until(() => json.jobs.length === 2);
    await plain.until(() => plain.jobs.length === 2);
    for (const j of json.jobs) {
      expect(j.job!.payload).toBeUndefined();
      expect(text(j)).toBe((await stored(j.job!.id)).payload);
      expect(JSON.parse(text(j))).toEqual(PAYLOAD);
    }
    for (const j of plain.jobs) {
      expect(j.payloadJson).toBeUndefined();
      expect(j.job!.payload).toEqual(PAYLOAD);
    }
    expect([...json.jobs, ...plain.jobs].map((j) => j.job!.id).sort()).toEqual([...ids].sort());
  });

  it('a job handed to an idle worker by its submit comes as JSON text too', async () => {
    const queue = queueName('handoff');
    const w = worker();
    await w.hello('json', [queue], 1, { payloadsAsJson: true });
    const { job } = await call(clients.jobs, 'submitJob', { queue, type: 't', payload: PAYLOAD, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
    await w.until(() => w.jobs.length === 1);
    expect(w.jobs[0]!.job!.id).toBe(job!.id);
    expect(w.jobs[0]!.job!.payload).toBeUndefined();
    expect(JSON.parse(text(w.jobs[0]!))).toEqual(PAYLOAD);
  });

  it('stores result_json as sent; refuses a bad one (not JSON, not an object, too big, with result too) alone, changing nothing', async () => {
    const queue = queueName('results');
    await submit(queue, {}, 6);
    const w = worker();
    await w.hello('json', [queue], 6, { batches: true, payloadsAsJson: true });
    await w.until(() => w.jobs.length === 6);
    const [good, notJson, notObject, tooBig, both, other] = w.jobs as [LeasedJob, LeasedJob, LeasedJob, LeasedJob, LeasedJob, LeasedJob];
    const resultText = '{"b": [1, 2], "a": "zürich"}';
    const complete = (j: LeasedJob, extra: Record<string, unknown>) => ({ jobId: j.job!.id, leaseToken: j.leaseToken, ...extra });
    // One batch: the bad ones must not take the good ones down with them.
    w.send({
      msg: {
        $case: 'completes',
        value: {
          completes: [
            complete(good, { resultJson: Buffer.from(resultText) }),
            complete(notJson, { resultJson: Buffer.from('{"a": ') }),
            complete(notObject, { resultJson: Buffer.from('[1, 2]') }),
            complete(tooBig, { resultJson: Buffer.from(JSON.stringify({ s: 'x'.repeat(3000) })) }),
            complete(both, { result: { a: 1 }, resultJson: Buffer.from('{"a": 1}') }),
            complete(other, {}),
          ],
        },
      },
    });
    await w.until(() => w.allAcks().length === 6);
    const result = (j: LeasedJob) => w.acks(j.job!.id)[0]!.result;
    expect(result(good)).toBe(AckResult.ACK_RESULT_ACCEPTED);
    expect(result(other)).toBe(AckResult.ACK_RESULT_ACCEPTED);
    for (const bad of [notJson, notObject, tooBig, both]) {
      expect(result(bad)).toBe(AckResult.ACK_RESULT_INVALID);
      expect((await stored(bad.job!.id)).state).toBe('RUNNING');
    }
    const row = await stored(good.job!.id);
    expect(row.state).toBe('COMPLETED');
    expect(JSON.parse(row.result!)).toEqual(JSON.parse(resultText));
  });
});

describe('the SDK worker', () => {
  it('asks for JSON text, hands the handler the payload as submitted, and sends its result as JSON text', async () => {
    const queue = queueName('sdk');
    const [id] = await submit(queue, PAYLOAD);
    const seen: unknown[] = [];
    const sdk = new EvoraWorker({ address, queues: [queue], slots: 1 });
    sdk.handle('t', (job) => {
      seen.push(job.payload);
      return { echo: job.payload, when: 'now' };
    });
    await sdk.start({ timeoutMs: 10_000 });
    try {
      await waitFor(async () => (await stored(id!)).state === 'COMPLETED');
      expect(seen).toEqual([PAYLOAD]);
      expect(JSON.parse((await stored(id!)).result!)).toEqual({ echo: PAYLOAD, when: 'now' });
    } finally {
      await sdk.stop({ timeoutMs: 2_000 });
    }
  });
});

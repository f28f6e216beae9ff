import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import type { SubmitJobRequest } from '../../src/gen/evora/v1/job.js';
import { EvoraClient } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { expectStatus } from '../helpers/grpc-status.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';

/**
 * SubmitJobs ids_only (ids and created, no jobs) and SubmitJobRequest.payload_json (the
 * payload as JSON text, stored without a Struct round trip), on the wire and through the SDK.
 */

let clients: Clients;
let address: string;
let db: pg.Client;
beforeAll(async () => {
  let databaseUrl: string;
  ({ clients, address, databaseUrl } = await serverSetup({ maxPayloadBytes: '1000' }));
  db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
});
afterAll(async () => {
  await db.end();
});

const job = (queue: string, patch: Partial<SubmitJobRequest> = {}): SubmitJobRequest => ({
  queue, type: 't', payload: undefined, priority: 0, idempotencyKey: '', maxAttempts: 0,
  dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0), ...patch,
});
const json = (text: string) => Buffer.from(text);

async function jobCount(queue: string): Promise<number> {
  return Number((await db.query('SELECT count(*) AS n FROM evora.jobs WHERE queue = $1', [queue])).rows[0].n);
}

describe('SubmitJobs ids_only', () => {
  it('answers with ids and created in input order, no results; the jobs are written with their payloads', async () => {
    const queue = queueName();
    const res = await call(clients.jobs, 'submitJobs', {
      idsOnly: true,
      jobs: Array.from({ length: 5 }, (_, i) => job(queue, { payload: { i } })),
    });
    expect(res.results).toEqual([]);
    expect(res.ids).toHaveLength(5);
    expect(res.created).toEqual([true, true, true, true, true]);
    for (const [i, id] of res.ids.entries()) {
      expect((await call(clients.jobs, 'getJob', { id })).job).toMatchObject({ id, queue, payload: { i } });
    }
  });

  it('an idempotent replay reports created=false with the existing id; a replay that differs refuses the whole batch', async () => {
    const queue = queueName();
    const first = await call(clients.jobs, 'submitJobs', {
      idsOnly: true,
      jobs: [job(queue, { idempotencyKey: 'k1', payload: { a: 1 } }), job(queue, { idempotencyKey: 'k2' })],
    });
    expect(first.created).toEqual([true, true]);
    const again = await call(clients.jobs, 'submitJobs', {
      idsOnly: true,
      // The same payload, sent as text this time: compared as JSON, so still a replay.
      jobs: [job(queue), job(queue, { idempotencyKey: 'k1', payloadJson: json('{ "a": 1 }') }), job(queue, { idempotencyKey: 'k2' })],
    });
    expect(again.created).toEqual([true, false, false]);
    expect(again.ids.slice(1)).toEqual(first.ids);
    await expectStatus(
      call(clients.jobs, 'submitJobs', { idsOnly: true, jobs: [job(queue), job(queue, { idempotencyKey: 'k1', payload: { a: 2 } })] }),
      grpc.status.ALREADY_EXISTS,
      /idempotency key "k1".*different payload/,
    );
    expect(await jobCount(queue)).toBe(3);
  });

  it('a batch with dependencies answers with ids too', async () => {
    const queue = queueName();
    const res = await call(clients.jobs, 'submitJobs', {
      idsOnly: true,
      jobs: [job(queue, { ref: 'a' }), job(queue, { dependsOnRefs: ['a'] })],
    });
    expect(res.created).toEqual([true, true]);
    const child = (await call(clients.jobs, 'getJob', { id: res.ids[1]! })).job!;
    expect(child.dependsOn).toEqual([res.ids[0]]);
  });
});

describe('SubmitJobRequest.payload_json', () => {
  it('is stored as the payload, read back as a Struct', async () => {
    const queue = queueName();
    const { job: j } = await call(clients.jobs, 'submitJob', job(queue, { payloadJson: json(' {"to":"a@example.com","n":[1,2.5,null],"ok":true}') }));
    expect(j!.payload).toEqual({ to: 'a@example.com', n: [1, 2.5, null], ok: true });
    expect((await call(clients.jobs, 'getJob', { id: j!.id })).job!.payload).toEqual({ to: 'a@example.com', n: [1, 2.5, null], ok: true });
  });

  it('INVALID_ARGUMENT, nothing written: both set, not an object, not JSON, not UTF-8, over the size limit', async () => {
    const queue = queueName();
    const cases: [Partial<SubmitJobRequest>, RegExp][] = [
      [{ payload: { a: 1 }, payloadJson: json('{"a":1}') }, /^payload and payload_json are both set; send one$/],
      [{ payloadJson: json('[1,2]') }, /^payload_json must be a JSON object/],
      [{ payloadJson: json('"text"') }, /^payload_json must be a JSON object/],
      [{ payloadJson: json('{"a":') }, /^payload_json is not valid JSON/],
      [{ payloadJson: json('{"a":1} x') }, /^payload_json is not valid JSON/],
      [{ payloadJson: json('{"a":"\\u0000"}') }, /^payload_json contains a NUL character/],
      [{ payloadJson: Buffer.from([0x7b, 0xff, 0x7d]) }, /^payload_json is not UTF-8 text$/],
      [{ payloadJson: json(`{"blob":"${'x'.repeat(1000)}"}`) }, /^payload_json is 1011 bytes of JSON; the limit is 1000$/],
    ];
    for (const [patch, message] of cases) {
      await expectStatus(call(clients.jobs, 'submitJob', job(queue, patch)), grpc.status.INVALID_ARGUMENT, message);
    }
    // In a batch the job is named; the batch's valid jobs are not written either.
    await expectStatus(
      call(clients.jobs, 'submitJobs', { idsOnly: false, jobs: [job(queue), job(queue, { payloadJson: json('{"a":') })] }),
      grpc.status.INVALID_ARGUMENT,
      /^jobs\[1\]\.payload_json is not valid JSON/,
    );
    await expectStatus(
      call(clients.jobs, 'submitJobs', { idsOnly: true, jobs: [job(queue), job(queue, { payload: {}, payloadJson: json('{}') })] }),
      grpc.status.INVALID_ARGUMENT,
      /^jobs\[1\]: payload and payload_json are both set/,
    );
    expect(await jobCount(queue)).toBe(0);
  });
});

describe('the SDK', () => {
  it('submitMany({ idsOnly: true }) returns ids and created; payloads travel as JSON text', async () => {
    const client = new EvoraClient({ address });
    try {
      const queue = queueName();
      const inputs = [
        { queue, type: 't', payload: { n: 1, nested: { list: ['a'] } }, idempotencyKey: 'k' },
        { queue, type: 't' },
      ];
      const first = await client.submitMany(inputs, { idsOnly: true });
      expect(first.created).toEqual([true, true]);
      expect((await client.get(first.ids[0]!)).payload).toEqual({ n: 1, nested: { list: ['a'] } });
      expect((await client.get(first.ids[1]!)).payload).toEqual({});
      const replay = await client.submitMany([inputs[0]!], { idsOnly: true });
      expect(replay).toEqual({ ids: [first.ids[0]], created: [false] });
      const whole = await client.submitMany([inputs[0]!]);
      expect(whole[0]).toMatchObject({ created: false, job: { id: first.ids[0], payload: { n: 1, nested: { list: ['a'] } } } });
      await expect(client.submit({ queue, type: 't', payload: [1] as never })).rejects.toThrow(/payload must be a JSON object/);
    } finally {
      client.close();
    }
  });
});

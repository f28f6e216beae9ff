import { beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { tokenSecretGenerate } from '../../src/domain/auth.js';
import { queueName } from '../helpers/factories.js';
import { tokenInsert } from '../helpers/tokens.js';
import { waitFor } from '../helpers/wait.js';
import { httpCall, httpSetup } from './http-setup.js';

/**
 * Every error status of the HTTP API, as `{ code, message }` with the gRPC code's name:
 * 400 (malformed JSON, an unknown field, an unknown query parameter, a bad enum, a
 * handler's validation), 401 (no or a bad token), 403 (a viewer on a write), 404, 409
 * ALREADY_EXISTS and FAILED_PRECONDITION, 413 for an oversized body; nothing changed by
 * a refused request. No handler answers RESOURCE_EXHAUSTED, so 429 has no route to test.
 */

const ADMIN = tokenSecretGenerate();
let api: Awaited<ReturnType<typeof httpSetup>>['api'];
let base: string;
let databaseUrl: string;
beforeAll(async () => {
  ({ api, base, databaseUrl } = await httpSetup({ bootstrapAdminToken: ADMIN, maxMessageBytes: '65536' }, ADMIN));
});

/** How many jobs the queue holds (read with SQL: nothing refused may have written). */
async function jobCount(queue: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>('SELECT count(*) AS n FROM evora.jobs WHERE queue = $1', [queue]);
    return Number(rows[0]!.n);
  } finally {
    await client.end();
  }
}

describe('400 INVALID_ARGUMENT', () => {
  it('malformed JSON, an unknown field, a wrong type, an unknown query parameter, a bad enum, a handler check', async () => {
    const queue = queueName('e');
    const cases = [
      await api('POST', '/v1/jobs', { body: '{"queue": ' }),
      await api('POST', '/v1/jobs', { body: { queue, type: 't', colour: 'red' } }),
      await api('POST', '/v1/jobs', { body: { queue, type: 't', priority: 'high' } }),
      await api('POST', '/v1/jobs', { body: [] }),
      await api('GET', '/v1/jobs', { query: { queue, colour: 'red' } }),
      await api('GET', '/v1/jobs', { query: { queue, states: 'SLEEPING' } }),
      await api('POST', '/v1/jobs', { body: { queue: 'bad name!', type: 't' } }),
      await api('GET', '/v1/jobs/not-a-uuid'),
      // Values that decode but the server cannot hold: as over gRPC, never 500.
      await api('POST', '/v1/jobs', { body: { queue, type: 't', payload: { a: 'x\u0000' } } }),
      await api('POST', '/v1/jobs/00000000-0000-4000-8000-000000000000/progress', {
        body: { leaseToken: '00000000-0000-4000-8000-000000000000', done: '9007199254740993', total: '9007199254740993' },
      }),
    ];
    for (const res of cases) {
      expect(res.status, res.text).toBe(400);
      expect(res.body.code).toBe('INVALID_ARGUMENT');
      expect(res.body.message).toMatch(/^[^\n]+$/);
    }
    expect(await jobCount(queue)).toBe(0);
  });

  it('a body over the message limit is 413 RESOURCE_EXHAUSTED', async () => {
    const res = await api('POST', '/v1/jobs', { body: { queue: queueName('e'), type: 't', payload: { big: 'x'.repeat(70_000) } } });
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('RESOURCE_EXHAUSTED');
  });
});

describe('401 and 403', () => {
  it('no token, a bad token: 401; a viewer on a write: 403, nothing changed; a viewer reads', async () => {
    const queue = queueName('e');
    const none = await httpCall(base, 'GET', '/v1/queues');
    expect(none.status).toBe(401);
    expect(none.body.code).toBe('UNAUTHENTICATED');
    expect((await httpCall(base, 'GET', '/v1/queues', { token: 'evora_nope' })).status).toBe(401);

    const viewer = await tokenInsert(databaseUrl, { role: 'viewer' });
    await waitFor(async () => (await httpCall(base, 'GET', '/v1/queues', { token: viewer.secret })).status === 200, { what: 'the viewer token' });
    const write = await httpCall(base, 'POST', '/v1/jobs', { token: viewer.secret, body: { queue, type: 't' } });
    expect(write.status).toBe(403);
    expect(write.body.code).toBe('PERMISSION_DENIED');
    expect(await jobCount(queue)).toBe(0);
  });
});

describe('404 and 409', () => {
  it('an unknown job and an unknown route: 404', async () => {
    const res = await api('GET', '/v1/jobs/00000000-0000-4000-8000-000000000000');
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('NOT_FOUND');
    const route = await api('GET', '/v1/nothing-here');
    expect(route.status).toBe(404);
    expect(route.body.code).toBe('NOT_FOUND');
  });

  it('an idempotency key reused with another job: 409 ALREADY_EXISTS; a pending job retried: 409 FAILED_PRECONDITION', async () => {
    const queue = queueName('e');
    expect((await api('POST', '/v1/jobs', { body: { queue, type: 't', payload: { n: 1 } }, headers: { 'Idempotency-Key': 'same' } })).status).toBe(201);
    const conflict = await api('POST', '/v1/jobs', { body: { queue, type: 't', payload: { n: 2 } }, headers: { 'Idempotency-Key': 'same' } });
    expect(conflict.status).toBe(409);
    expect(conflict.body.code).toBe('ALREADY_EXISTS');
    expect(await jobCount(queue)).toBe(1);

    const job = await api('POST', '/v1/jobs', { body: { queue, type: 't' } });
    const again = await api('POST', `/v1/jobs/${job.body.job.id}/retry`);
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('FAILED_PRECONDITION');
  });
});

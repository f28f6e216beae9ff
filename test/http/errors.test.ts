import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { tokenSecretGenerate } from '../../src/domain/auth.js';
import { queueName } from '../helpers/factories.js';
import { tokenInsert } from '../helpers/tokens.js';
import { waitFor } from '../helpers/wait.js';
import { serverSetup } from '../helpers/server-setup.js';
import { freePort } from '../../src/server/embedded-postgres.js';
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
/** The separate metrics port of the server (it never asks for a token). */
let metricsPort: number;
beforeAll(async () => {
  metricsPort = await freePort();
  ({ api, base, databaseUrl } = await httpSetup({ bootstrapAdminToken: ADMIN, maxMessageBytes: '65536', metricsPort: String(metricsPort) }, ADMIN));
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

/** A job of type 't' in `queue`, depending on `dependsOn`, submitted by the test's admin; its id. */
async function submitJob(queue: string, dependsOn: string[] = []): Promise<string> {
  return (await api('POST', '/v1/jobs', { body: { queue, type: 't', dependsOn } })).body.job.id as string;
}

/** A token of `role` limited to `queue`, once the server takes it (it reads new tokens within seconds). */
async function scopedToken(role: 'admin' | 'viewer', queue: string) {
  const token = await tokenInsert(databaseUrl, { role, queues: [queue] });
  await waitFor(async () => (await httpCall(base, 'GET', `/v1/queues/${queue}`, { token: token.secret })).status !== 401, { what: 'the scoped token' });
  return token;
}

/** The states of the jobs of `ids`, in that order (read with SQL). */
async function jobStates(ids: string[]): Promise<string[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string; state: string }>('SELECT id, state FROM evora.jobs WHERE id = ANY ($1::uuid[])', [ids]);
    return ids.map((id) => rows.find((r) => r.id === id)?.state ?? 'missing');
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
      // A refused name is shown escaped: U+202E would turn the rest of the line around, a newline end it.
      await api('POST', '/v1/jobs', { body: { queue: 'q\u202Eevil\nline', type: 't' } }),
      await api('GET', '/v1/jobs/not-a-uuid'),
      // A header key that is not ASCII: its bytes have no agreed encoding (curl's UTF-8 was read as Latin-1).
      await api('POST', '/v1/jobs', { body: { queue, type: 't' }, headers: { 'idempotency-key': 'k\u00fc' } }),
      // A compressed body: refused by its header, not with its bytes read as text in the line.
      await api('POST', '/v1/jobs', { body: gzipSync(JSON.stringify({ queue, type: 't' })), headers: { 'content-encoding': 'gzip' } }),
      // Values that decode but the server cannot hold: as over gRPC, never 500.
      await api('POST', '/v1/jobs', { body: { queue, type: 't', payload: { a: 'x\u0000' } } }),
      // A key twice in one object: JSON.parse keeps the last, and the job went to that queue.
      await api('POST', '/v1/jobs', { body: `{"queue": "elsewhere", "type": "t", "queue": "${queue}"}` }),
      await api('POST', '/v1/jobs', { body: `{"queue": "${queue}", "type": "t", "payload": {"k": 1, "\\u006b": 2}}` }),
      // A number past a double's range parses as Infinity, which JSON has no text for (it was stored as null).
      await api('POST', '/v1/jobs', { body: `{"queue": "${queue}", "type": "t", "payload": {"n": [1, 1e400]}}` }),
      await api('POST', '/v1/jobs/00000000-0000-4000-8000-000000000000/progress', {
        body: { leaseToken: '00000000-0000-4000-8000-000000000000', done: '9007199254740993', total: '9007199254740993' },
      }),
    ];
    for (const res of cases) {
      expect(res.status, res.text).toBe(400);
      expect(res.body.code).toBe('INVALID_ARGUMENT');
      expect(res.body.message).toMatch(/^[ -~]+$/);
    }
    expect(await jobCount(queue)).toBe(0);
  });

  it('a body over the message limit is 413 RESOURCE_EXHAUSTED', async () => {
    const res = await api('POST', '/v1/jobs', { body: { queue: queueName('e'), type: 't', payload: { big: 'x'.repeat(70_000) } } });
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('RESOURCE_EXHAUSTED');
  });
});

/** Sends `request` as is over a new connection to the HTTP port; the whole answer as text. */
async function rawHttp(request: string): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => socket.end(request));
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
}

/** A GET with a body, which fetch will not send: node:http's request. */
async function getWithBody(path: string, body: string): Promise<{ status: number; body: { code: string; message: string } }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { method: 'GET', headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), authorization: `Bearer ${ADMIN}` } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as { code: string; message: string } }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('what the router or the HTTP parser refuses has the same shape', () => {
  it('a malformed URL, a path parameter past any name, a request that is not HTTP: 400 INVALID_ARGUMENT as { code, message }', async () => {
    const badUrl = await api('GET', '/v1/jobs/%E0%A4%A');
    expect(badUrl.status).toBe(400);
    expect(badUrl.body).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^[^\n]+$/) });
    // Longer than any name can be escaped: refused by the router, in our shape, whatever the
    // method and whether the dashboard (whose wildcard route would take a GET) is built.
    const tooLong = await api('PUT', `/v1/queues/${'q'.repeat(500)}`, { body: {} });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.code).toBe('INVALID_ARGUMENT');
    // One short line naming the limit, not the 500 characters sent echoed back.
    expect(tooLong.body.message).toBe('a path segment is over 384 characters (a name is at most 128, each character escaped at most 3)');
    expect(badUrl.body.message.length).toBeLessThan(120);
    expect((await api('GET', `/v1/queues/${'q'.repeat(500)}`)).body).toEqual(tooLong.body);

    const answer = await rawHttp('POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}');
    expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^the request is not valid HTTP/) });
  });

  it('names of up to 128 characters work in paths', async () => {
    const name = `q${'x'.repeat(127)}`;
    expect((await api('PUT', `/v1/queues/${name}`, { body: {} })).status).toBe(201);
    expect((await api('GET', `/v1/queues/${name}`)).body.queue.name).toBe(name);
    expect((await api('GET', `/v1/queues/${name}/stats`)).status).toBe(200);
    expect((await api('POST', `/v1/queues/${name}/pause`)).status).toBe(200);
  });

  it('a GET with a body is refused (its fields would be dropped unread), and changes nothing', async () => {
    const res = await getWithBody('/v1/jobs', JSON.stringify({ queue: 'no-such-queue' }));
    expect(res).toEqual({ status: 400, body: { code: 'INVALID_ARGUMENT', message: 'GET /v1/jobs takes no body: send its fields as query parameters' } });
  });

  it('a body is read as UTF-8: other bytes are refused, not stored as U+FFFD; a byte order mark is dropped', async () => {
    const queue = queueName('e');
    const latin1 = await api('POST', '/v1/jobs', {
      body: Buffer.from(`{"queue": "${queue}", "type": "t", "payload": {"name": "caf\u00e9"}}`, 'latin1'),
      headers: { 'content-type': 'application/json; charset=iso-8859-1' },
    });
    expect(latin1.status).toBe(400);
    expect(latin1.body).toEqual({ code: 'INVALID_ARGUMENT', message: 'the request body is not UTF-8 (its Content-Type says charset=iso-8859-1): send JSON as UTF-8 text' });
    expect(await jobCount(queue)).toBe(0);
    const bom = await api('POST', '/v1/jobs', { body: `\uFEFF{"queue": "${queue}", "type": "t", "payload": {"name": "caf\u00e9"}}` });
    expect(bom.status, bom.text).toBe(201);
    expect(bom.body.job.payload).toEqual({ name: 'caf\u00e9' });
  });

  it('a query value that differs from the path is refused, and says which two disagree', async () => {
    const res = await api('GET', '/v1/queues/one', { query: { name: 'two' } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ code: 'INVALID_ARGUMENT', message: 'name elsewhere in the request ("two") differs from the path ("one")' });
  });

  it('a refusal that quotes what was sent shows it escaped and cut: one short line, whatever its length and characters', async () => {
    const queue = queueName('e');
    const long = `\u202Eevil\nline${'y'.repeat(5000)}`;
    const body = `\u202Eevil\nline${'y'.repeat(60_000)}`;
    const cases = [
      await api('GET', '/v1/jobs', { query: { queue, states: long } }),
      await api('GET', '/v1/jobs', { query: { queue, [long]: '1' } }),
      await api('GET', '/v1/tokens', { query: { include_revoked: long } }),
      await api('PUT', `/v1/queues/${queue}`, { body: { name: body } }),
      await api('POST', '/v1/jobs', { body: { queue, type: 't', [body]: 1 } }),
      await api('POST', '/v1/jobs', { body: `{"queue": "${queue}", "type": "t", "payload": {"k": \u202E1}}` }),
    ];
    for (const res of cases) {
      expect(res.status, res.text.slice(0, 300)).toBe(400);
      expect(res.body.message).toMatch(/^[ -~…]{1,400}$/);
    }
    expect(cases[0]!.body.message).toMatch(/^"\\u202eevil\\nlineyyy+…" is not a JobState/);
    expect(await jobCount(queue)).toBe(0);
  });
});

describe('401 and 403', () => {
  it('no token, a bad token: 401; a viewer on a write: 403, nothing changed; a viewer reads', async () => {
    const queue = queueName('e');
    const none = await httpCall(base, 'GET', '/v1/queues');
    expect(none.status).toBe(401);
    expect(none.body.code).toBe('UNAUTHENTICATED');
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="evora"');
    expect((await httpCall(base, 'GET', '/v1/queues', { token: 'evora_nope' })).status).toBe(401);

    const viewer = await tokenInsert(databaseUrl, { role: 'viewer' });
    await waitFor(async () => (await httpCall(base, 'GET', '/v1/queues', { token: viewer.secret })).status === 200, { what: 'the viewer token' });
    const write = await httpCall(base, 'POST', '/v1/jobs', { token: viewer.secret, body: { queue, type: 't' } });
    expect(write.status).toBe(403);
    expect(write.body.code).toBe('PERMISSION_DENIED');
    expect(await jobCount(queue)).toBe(0);
  });

  it('a token limited to queues may not depend on a job of another queue: 403, nothing written; on its own queues it may', async () => {
    const [mine, other] = [queueName('mine'), queueName('other')];
    const scoped = await tokenInsert(databaseUrl, { role: 'producer', queues: [mine] });
    await waitFor(async () => (await httpCall(base, 'GET', `/v1/queues/${mine}`, { token: scoped.secret })).status !== 401, { what: 'the scoped token' });
    const outside = (await api('POST', '/v1/jobs', { body: { queue: other, type: 't' } })).body.job.id as string;
    const inside = (await httpCall(base, 'POST', '/v1/jobs', { token: scoped.secret, body: { queue: mine, type: 't' } })).body.job.id as string;

    const single = await httpCall(base, 'POST', '/v1/jobs', { token: scoped.secret, body: { queue: mine, type: 'child', dependsOn: [inside, outside] } });
    expect(single.status).toBe(403);
    expect(single.body).toEqual({ code: 'PERMISSION_DENIED', message: `token "${scoped.name}" (producer) may not depend on job ${outside}: its queue is outside the token's queues (${mine})` });
    const batch = await httpCall(base, 'POST', '/v1/jobs/batch', { token: scoped.secret, body: { jobs: [{ queue: mine, type: 'child' }, { queue: mine, type: 'child', dependsOn: [outside] }] } });
    expect(batch.status).toBe(403);
    expect(await jobCount(mine)).toBe(1);

    const allowed = await httpCall(base, 'POST', '/v1/jobs', { token: scoped.secret, body: { queue: mine, type: 'child', dependsOn: [inside] } });
    expect(allowed.status).toBe(201);
    expect(allowed.body.job.state).toBe('JOB_STATE_WAITING');
  });

  it("a job or schedule of another queue, named by id or name, is refused without naming that queue, and is left as it was", async () => {
    const [mine, other] = [queueName('mine'), queueName('secret-payroll')];
    const job = await submitJob(other);
    const name = `nightly-${other}`;
    expect((await api('PUT', `/v1/schedules/${name}`, { body: { cron: '0 3 * * *', queue: other, type: 't' } })).status).toBe(201);
    const admin = await scopedToken('admin', mine);
    const as = (method: string, path: string, body?: unknown) => httpCall(base, method, path, { token: admin.secret, body });
    const refusals: [string, Awaited<ReturnType<typeof as>>][] = [
      [`GetJob job ${job}`, await as('GET', `/v1/jobs/${job}`)],
      [`ListJobAttempts job ${job}`, await as('GET', `/v1/jobs/${job}/attempts`)],
      [`CancelJob job ${job}`, await as('POST', `/v1/jobs/${job}/cancel`)],
      [`GetSchedule schedule "${name}"`, await as('GET', `/v1/schedules/${name}`)],
      [`ResumeSchedule schedule "${name}"`, await as('POST', `/v1/schedules/${name}/resume`)],
      [`PauseSchedule schedule "${name}"`, await as('POST', `/v1/schedules/${name}/pause`)],
      [`TriggerSchedule schedule "${name}"`, await as('POST', `/v1/schedules/${name}/trigger`)],
      [`DeleteSchedule schedule "${name}"`, await as('DELETE', `/v1/schedules/${name}`)],
      // Its own queue, but the name is another queue's schedule's.
      [`UpsertSchedule schedule "${name}"`, await as('PUT', `/v1/schedules/${name}`, { cron: '0 3 * * *', queue: mine, type: 't' })],
    ];
    for (const [what, res] of refusals) {
      expect(res.status, res.text).toBe(403);
      expect(res.body).toEqual({ code: 'PERMISSION_DENIED', message: `token "${admin.name}" (admin) may not ${what}: its queue is outside the token's queues (${mine})` });
    }
    expect(await jobStates([job])).toEqual(['PENDING']);
    const schedule = (await api('GET', `/v1/schedules/${name}`)).body.schedule;
    expect([schedule.queue, schedule.paused ?? false, schedule.lastJobId ?? '']).toEqual([other, false, '']);
  });
});

describe('queue scopes reach no other queue through dependents', () => {
  it('a queue-scoped admin may not cancel or retry (one job, or in bulk) a job whose dependents reach other queues: 403 naming them, nothing changed; within its queues it may; GetJob lists only its queues\' dependents', async () => {
    const [mine, other] = [queueName('mine'), queueName('other')];
    // p (mine) -> c (mine) -> g (other, a grandchild), and p -> o (other); q (mine) -> r (mine).
    const p = await submitJob(mine);
    const c = await submitJob(mine, [p]);
    const g = await submitJob(other, [c]);
    const o = await submitJob(other, [p]);
    const q = await submitJob(mine);
    const r = await submitJob(mine, [q]);
    const admin = await scopedToken('admin', mine);
    const viewer = await scopedToken('viewer', mine);
    const as = (t: { secret: string }, method: string, path: string, body?: unknown) => httpCall(base, method, path, { token: t.secret, body });

    expect((await as(viewer, 'GET', `/v1/jobs/${p}`)).body.dependents).toEqual([c]);
    expect((await api('GET', `/v1/jobs/${p}`)).body.dependents).toEqual([c, o]);

    const cancel = await as(admin, 'POST', `/v1/jobs/${p}/cancel`);
    expect(cancel.status).toBe(403);
    expect(cancel.body).toEqual({
      code: 'PERMISSION_DENIED',
      message: `token "${admin.name}" (admin) may not cancel job ${p}: that would also cancel 2 dependent jobs in queue "${other}", outside the token's queues (${mine})`,
    });
    expect(await jobStates([p, c, g, o])).toEqual(['PENDING', 'WAITING', 'WAITING', 'WAITING']);
    for (const dryRun of [true, false]) {
      const bulk = await as(admin, 'POST', '/v1/jobs/cancel', { filter: { queue: mine }, dryRun });
      expect(bulk.status, bulk.text).toBe(403);
      expect(bulk.body.message).toMatch(/^token "[^"]+" \(admin\) may not cancel these jobs: that would also cancel 2 dependent jobs in queue "[^"]+", outside/);
    }
    expect(await jobStates([p, c, g, o, q, r])).toEqual(['PENDING', 'WAITING', 'WAITING', 'WAITING', 'PENDING', 'WAITING']);
    // Inside its queues the cascade is its own.
    expect((await as(admin, 'POST', `/v1/jobs/${q}/cancel`)).status).toBe(200);
    expect(await jobStates([q, r])).toEqual(['CANCELLED', 'CANCELLED']);
    expect((await as(admin, 'POST', `/v1/jobs/${q}/retry`)).status).toBe(200);
    expect(await jobStates([q, r])).toEqual(['PENDING', 'WAITING']);

    // An admin of every queue cancels the graph; the scoped one may not restore it, one job or in bulk.
    expect((await api('POST', `/v1/jobs/${p}/cancel`)).status).toBe(200);
    expect(await jobStates([p, c, g, o])).toEqual(['CANCELLED', 'CANCELLED', 'CANCELLED', 'CANCELLED']);
    const retry = await as(admin, 'POST', `/v1/jobs/${p}/retry`);
    expect(retry.status).toBe(403);
    expect(retry.body.message).toBe(`token "${admin.name}" (admin) may not retry job ${p}: that would also restore 2 dependent jobs in queue "${other}", outside the token's queues (${mine})`);
    for (const dryRun of [true, false]) {
      const bulk = await as(admin, 'POST', '/v1/jobs/retry', { filter: { queue: mine }, dryRun });
      expect(bulk.status, bulk.text).toBe(403);
      expect(bulk.body.message).toMatch(/^token "[^"]+" \(admin\) may not retry these jobs: that would also restore 2 dependent jobs in queue "[^"]+", outside/);
    }
    expect(await jobStates([p, c, g, o])).toEqual(['CANCELLED', 'CANCELLED', 'CANCELLED', 'CANCELLED']);
    expect((await api('POST', `/v1/jobs/${p}/retry`)).status).toBe(200);
    expect(await jobStates([p, c, g, o])).toEqual(['PENDING', 'WAITING', 'WAITING', 'WAITING']);
  });
});

describe('queue scopes reach no other queue through dependents, batch after batch', () => {
  it('a bulk retry whose first batch lifts a parent out of CANCELLED may not then retry that parent\'s operator-cancelled child and restore its grandchild in another queue: 403, nothing changed', async () => {
    const [mine, other] = [queueName('mine'), queueName('other')];
    // p (mine) -> c (mine) -> g (other). c cancelled by an operator (g then names c), then p.
    // At the check c is held back by p (not retryable) and p's retry restores nothing; once
    // p is retried, c is retryable, and c's retry restores g.
    const p = await submitJob(mine);
    const c = await submitJob(mine, [p]);
    const g = await submitJob(other, [c]);
    expect((await api('POST', `/v1/jobs/${c}/cancel`)).status).toBe(200);
    expect((await api('POST', `/v1/jobs/${p}/cancel`)).status).toBe(200);
    // A full first batch (p and 499 more), so that the run goes on to a second one.
    const batch = await api('POST', '/v1/jobs/batch', { body: { jobs: Array.from({ length: 499 }, () => ({ queue: mine, type: 'filler' })) } });
    expect(batch.status, batch.text).toBe(200);
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      await db.query(`UPDATE evora.jobs SET state = 'CANCELLED', finished_at = now() WHERE queue = $1 AND type = 'filler'`, [mine]);
    } finally {
      await db.end();
    }
    expect(await jobStates([p, c, g])).toEqual(['CANCELLED', 'CANCELLED', 'CANCELLED']);
    const admin = await scopedToken('admin', mine);

    const bulk = await httpCall(base, 'POST', '/v1/jobs/retry', { token: admin.secret, body: { filter: { queue: mine } } });
    expect(bulk.status, bulk.text).toBe(403);
    expect(bulk.body.message).toMatch(/^token "[^"]+" \(admin\) may not retry these jobs: that would also restore 1 dependent job in queue "[^"]+", outside/);
    expect(await jobStates([p, c, g])).toEqual(['CANCELLED', 'CANCELLED', 'CANCELLED']);
  });
});

describe('/metrics while auth is on', () => {
  it('the HTTP port asks a valid token of any role (401 as the API); EVORA_METRICS_OPEN=1 opens it; the metrics port never asks', async () => {
    const none = await httpCall(base, 'GET', '/metrics');
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ code: 'UNAUTHENTICATED', message: expect.stringMatching(/^a token is required/) });
    expect((await httpCall(base, 'GET', '/metrics', { token: tokenSecretGenerate() })).status).toBe(401);
    const scoped = await tokenInsert(databaseUrl, { role: 'producer', queues: ['metrics-only'] });
    await waitFor(async () => (await httpCall(base, 'GET', '/metrics', { token: scoped.secret })).status === 200, { what: 'the scoped token' });
    expect((await httpCall(base, 'GET', '/metrics', { token: scoped.secret })).text).toMatch(/^# HELP evora_/m);
    const port = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(port.status).toBe(200);
    expect(await port.text()).toMatch(/^# HELP evora_/m);

    const open = await serverSetup({ databaseUrl, http: true, metricsOpen: '1' });
    expect((await httpCall(open.httpUrl, 'GET', '/metrics')).status).toBe(200);
    expect((await httpCall(open.httpUrl, 'GET', '/v1/queues')).status).toBe(401);
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

  it('a known path with a method it does not take: 405 with Allow, nothing changed; OPTIONS: 204 with Allow', async () => {
    const queue = queueName('e');
    const job = await api('POST', '/v1/jobs', { body: { queue, type: 't' } });
    const cases: [string, string, string][] = [
      ['PATCH', '/v1/jobs', 'GET, HEAD, POST, OPTIONS'],
      ['DELETE', `/v1/jobs/${job.body.job.id}`, 'GET, HEAD, OPTIONS'],
      ['GET', `/v1/jobs/${job.body.job.id}/cancel`, 'POST, OPTIONS'],
      ['POST', `/v1/queues/${queue}`, 'DELETE, GET, HEAD, PUT, OPTIONS'],
      // A literal path beside a parameter one: POST's only, not GetJob of a job "claim" (400 "not a UUID").
      ['GET', '/v1/jobs/claim', 'POST, OPTIONS'],
      ['DELETE', '/v1/jobs/batch/', 'POST, OPTIONS'],
    ];
    for (const [method, path, allow] of cases) {
      const res = await api(method, path, method === 'GET' ? {} : { body: {} });
      expect(res.status, `${method} ${path}: ${res.text}`).toBe(405);
      expect(res.headers.get('allow')).toBe(allow);
      expect(res.body.code).toBe('UNIMPLEMENTED');
      expect(res.body.message).toMatch(/^[^\n]+$/);
      const options = await api('OPTIONS', path);
      expect(options.status).toBe(204);
      expect(options.headers.get('allow')).toBe(allow);
    }
    expect((await api('GET', `/v1/jobs/${job.body.job.id}`)).body.job.state).toBe('JOB_STATE_PENDING');
    expect(await jobCount(queue)).toBe(1);
    // A path no route has stays 404, whatever the method.
    expect((await api('PATCH', '/v1/nothing-here')).status).toBe(404);
    // A trailing slash names the same route (curl …/v1/jobs/?queue=…), not GetJob of id "".
    const listed = await api('GET', '/v1/jobs/', { query: { queue } });
    expect({ status: listed.status, jobs: listed.body.jobs?.length }, listed.text).toEqual({ status: 200, jobs: 1 });
    expect((await api('GET', `/v1/queues/${queue}/`)).status).toBe(200);
    expect((await api('PATCH', '/v1/jobs/')).headers.get('allow')).toBe('GET, HEAD, POST, OPTIONS');
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

import { describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { SubmitJobRequest } from '../../src/gen/evora/v1/job.js';
import { EvoraApiError, EvoraClient } from '../../src/sdk/index.js';
import { deadLettersInsert } from '../helpers/dead-letters.js';
import { queueName } from '../helpers/factories.js';
import { submitStreamOpen, workOpen } from '../helpers/open-streams.js';
import { serverSetup } from '../helpers/server-setup.js';
import { tokenInsert, type TestToken } from '../helpers/tokens.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Nothing keeps serving a caller that a new call would refuse: a ClaimJobs long-poll whose
 * token is revoked while it waits ends UNAUTHENTICATED and leases nothing, a RetryJobs whose
 * token is revoked while it runs stops before its next batch (UNAUTHENTICATED), and when auth
 * turns on (the first token is made) the anonymous callers' open Work streams,
 * SubmitJobStreams and long-polls end UNAUTHENTICATED. Once on, auth stays on while the
 * server runs, even when every row of the token table is deleted.
 */

/** A long-poll claim over HTTP, settled with its status and body. */
function longPoll(httpUrl: string, queue: string, token: TestToken | null) {
  return fetch(`${httpUrl}/v1/jobs/claim`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token.secret}` } : {}) },
    body: JSON.stringify({ workerId: 'long-poll', queues: [queue], wait: '20s' }),
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> }));
}

/** Submits one job over HTTP as `token` and returns its id. */
async function submitAs(httpUrl: string, queue: string, token: TestToken): Promise<string> {
  const res = await fetch(`${httpUrl}/v1/jobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token.secret}` },
    body: JSON.stringify({ queue, type: 't' }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { job: { id: string } }).job.id;
}

/** A job's state, read straight from the database. */
async function stateOf(databaseUrl: string, id: string): Promise<string> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query<{ state: string }>('SELECT state FROM evora.jobs WHERE id = $1', [id])).rows[0]!.state;
  } finally {
    await client.end();
  }
}

describe('a caller no longer accepted', () => {
  it('a RetryJobs whose token is revoked while it runs stops before its next batch: UNAUTHENTICATED, saying how many it retried; the rest stay DLQ', async () => {
    const { address, databaseUrl } = await serverSetup();
    const admin = await tokenInsert(databaseUrl, { role: 'admin' });
    const queue = queueName('bulkrevoke');
    const sql = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    const client = new EvoraClient({ address, token: admin.secret });
    const holder = await sql.connect();
    try {
      // 600 dead letters: a batch of 500, then one of 100.
      await deadLettersInsert(sql, queue, Array<string>(600).fill('2020-01-01 00:00:00+00'));
      // The first batch waits for this lock (its audit event's insert) until the token is revoked.
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE evora.audit_events IN SHARE MODE');
      const retry = client.retryJobs({ queue, states: 'DLQ' }).then(
        (count) => ({ count }),
        (err: unknown) => err,
      );
      // (The statement's text as pg_stat_activity keeps it: its first 1 kB, the retry's opening CTE.)
      const waiting = `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                       WHERE NOT l.granted AND l.relation = 'evora.audit_events'::regclass AND a.query LIKE 'WITH previous AS%'`;
      await waitFor(async () => (await sql.query<{ n: number }>(waiting)).rows[0]!.n === 1, { what: 'the first batch to wait for the lock' });
      await sql.query('UPDATE evora.api_tokens SET revoked_at = now() WHERE id = $1', [admin.id]);
      await sql.query(`SELECT pg_notify('evora_tokens_changed', $1)`, [admin.id]);
      // The server has read the revocation once a new call with the token is refused.
      await waitFor(async () => (await client.listQueues().then(() => null, (e: EvoraApiError) => e.codeName)) === 'UNAUTHENTICATED', {
        what: 'the server to see the revocation',
      });
      await holder.query('ROLLBACK');

      const err = await retry;
      expect(err).toBeInstanceOf(EvoraApiError);
      expect({ code: (err as EvoraApiError).codeName, details: (err as EvoraApiError).details }).toEqual({
        code: 'UNAUTHENTICATED',
        details: `token "${admin.name}" was revoked or has expired; RetryJobs stopped after retrying 500 jobs (they stay retried): call it again with a valid token to go on`,
      });
      const { rows } = await sql.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM evora.jobs WHERE queue = $1 GROUP BY state ORDER BY state', [queue]);
      expect(rows).toEqual([
        { state: 'PENDING', n: 500 },
        { state: 'DLQ', n: 100 },
      ]);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
      client.close();
      await sql.end();
    }
  });

  it('a long-poll whose token is revoked while it waits ends UNAUTHENTICATED, and a job submitted after is not leased', async () => {
    const { httpUrl, databaseUrl } = await serverSetup({ http: true });
    const admin = await tokenInsert(databaseUrl, { role: 'admin' });
    const worker = await tokenInsert(databaseUrl, { role: 'worker' });
    const queue = queueName('lp');
    // The worker's token works (a call without a wait answers at once, with nothing).
    const warm = await fetch(`${httpUrl}/v1/jobs/claim`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${worker.secret}` },
      body: JSON.stringify({ workerId: 'warm', queues: [queue] }),
    });
    expect(warm.status).toBe(200);
    const poll = longPoll(httpUrl, queue, worker);

    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query('UPDATE evora.api_tokens SET revoked_at = now() WHERE id = $1', [worker.id]);
    await client.query(`SELECT pg_notify('evora_tokens_changed', $1)`, [worker.id]);
    await client.end();

    const ended = await poll;
    expect(ended).toEqual({ status: 401, body: { code: 'UNAUTHENTICATED', message: `token "${worker.name}" was revoked or has expired` } });
    const id = await submitAs(httpUrl, queue, admin);
    expect(await stateOf(databaseUrl, id)).toBe('PENDING');
  });

  it("when auth turns on, an anonymous caller's Work stream, SubmitJobStream and long-poll end UNAUTHENTICATED", async () => {
    const { address, httpUrl, databaseUrl } = await serverSetup({ http: true });
    const queue = queueName('anon');
    const channel = new grpc.Client(address, grpc.credentials.createInsecure());
    try {
      const w = workOpen(channel, new grpc.Metadata(), [queue]);
      expect(await w.first).toBe(grpc.status.OK);
      const submits = submitStreamOpen(channel, new grpc.Metadata(), { requestId: 1, job: SubmitJobRequest.fromPartial({ queue: 'other', type: 't' }) });
      expect(await submits.first).toBe(grpc.status.OK);
      const poll = longPoll(httpUrl, queue, null);

      const admin = await tokenInsert(databaseUrl, { role: 'admin' }); // the first token: auth is on
      const reason = 'a token is now required: auth was turned on';
      const workEnded = await waitFor(() => w.error, { what: 'the Work stream to end' });
      expect({ code: workEnded!.code, details: workEnded!.details }).toEqual({ code: grpc.status.UNAUTHENTICATED, details: reason });
      const submitsEnded = await waitFor(() => submits.error, { what: 'the SubmitJobStream to end' });
      expect({ code: submitsEnded!.code, details: submitsEnded!.details }).toEqual({ code: grpc.status.UNAUTHENTICATED, details: reason });
      expect(await poll).toEqual({ status: 401, body: { code: 'UNAUTHENTICATED', message: reason } });

      // Nothing anonymous holds the queue any more: a job submitted now waits.
      const id = await submitAs(httpUrl, queue, admin);
      expect(await stateOf(databaseUrl, id)).toBe('PENDING');
    } finally {
      channel.close();
    }
  });

  it('auth stays on when every token row is deleted: a call without a token is refused, not served as an anonymous admin', async () => {
    const { httpUrl, databaseUrl } = await serverSetup({ http: true });
    const admin = await tokenInsert(databaseUrl, { role: 'admin' });
    const caller = (token: TestToken | null) =>
      fetch(`${httpUrl}/v1/caller`, { headers: token ? { authorization: `Bearer ${token.secret}` } : {} }).then(async (r) => ({
        status: r.status,
        body: (await r.json()) as { name?: string },
      }));
    await waitFor(async () => (await caller(admin)).body.name === admin.name, { what: 'the admin token to work' });

    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query('DELETE FROM evora.api_tokens');
    await client.query(`SELECT pg_notify('evora_tokens_changed', $1)`, [admin.id]);
    await client.end();

    // The cache has read the emptied table once the admin token no longer says who it is.
    await waitFor(async () => (await caller(admin)).body.name !== admin.name, { what: 'the server to read the emptied table' });
    expect((await caller(admin)).status).toBe(401);
    expect(await caller(null)).toEqual({ status: 401, body: { code: 'UNAUTHENTICATED', message: 'a token is required: send "authorization: Bearer <token>"' } });
  });
});

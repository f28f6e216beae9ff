import { Duplex } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANONYMOUS, type Principal } from '../../src/domain/auth.js';
import { EvoraError } from '../../src/domain/errors.js';
import {
  JobServiceClient,
  SubmitJobRequest,
  type SubmitJobResponse,
  type SubmitJobStreamRequest,
  type SubmitJobStreamResponse,
} from '../../src/gen/evora/v1/job.js';
import { MAX_SUBMITS_IN_FLIGHT, SubmitStream } from '../../src/grpc/submit-stream.js';
import { silentLogger } from '../../src/logger.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * SubmitJobStream (job.proto): each request one SubmitJob, answered once with its
 * request_id; failures answered in band; the in-flight bound; ends (half-close, shutdown,
 * token) only after what was read is answered.
 */

const job = (queue: string, patch: Partial<SubmitJobRequest> = {}) => SubmitJobRequest.fromPartial({ queue, type: 't', ...patch });

/** A SubmitJobStream on a real server: send requests, read responses and the final status. */
function streamOpen(client: JobServiceClient) {
  const stream = client.submitJobStream();
  const responses: SubmitJobStreamResponse[] = [];
  stream.on('data', (r: SubmitJobStreamResponse) => responses.push(r));
  const status = new Promise<grpc.StatusObject>((resolve) => stream.on('status', resolve));
  stream.on('error', () => undefined);
  return {
    stream,
    responses,
    status,
    send: (requestId: number, req: SubmitJobRequest | undefined) => stream.write({ requestId, job: req }),
    /** Waits until `n` responses arrived; returns them by request id. */
    answers: async (n: number) => {
      await waitFor(() => responses.length >= n, { what: `${n} responses` });
      return new Map(responses.map((r) => [r.requestId, r]));
    },
  };
}

const resultOf = (r: SubmitJobStreamResponse | undefined): SubmitJobResponse => {
  if (r?.outcome?.$case !== 'result') throw new Error(`expected a result, got ${JSON.stringify(r)}`);
  return r.outcome.value;
};
const errorOf = (r: SubmitJobStreamResponse | undefined) => {
  if (r?.outcome?.$case !== 'error') throw new Error(`expected an error, got ${JSON.stringify(r)}`);
  return r.outcome.value;
};

describe('SubmitJobStream on a server', () => {
  let clients: Clients;
  let databaseUrl: string;
  let db: pg.Client;
  beforeAll(async () => {
    ({ clients, databaseUrl } = await serverSetup());
    db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
  });
  afterAll(async () => {
    await db.end();
  });

  it('answers every request once with its request_id: jobs created, an idempotent replay not created again', async () => {
    const queue = queueName();
    const s = streamOpen(clients.jobs);
    for (let i = 1; i <= 50; i++) s.send(i, job(queue, { payload: { i } }));
    s.send(51, job(queue, { idempotencyKey: 'k' }));
    s.send(52, job(queue, { idempotencyKey: 'k' }));
    const answers = await s.answers(52);
    expect(s.responses).toHaveLength(52);
    for (let i = 1; i <= 50; i++) {
      const { job: j, created } = resultOf(answers.get(i));
      expect(created).toBe(true);
      expect(j).toMatchObject({ queue, payload: { i } });
    }
    const replays = [resultOf(answers.get(51)), resultOf(answers.get(52))];
    expect(replays.map((r) => r.created).sort()).toEqual([false, true]);
    expect(replays[0]!.job!.id).toBe(replays[1]!.job!.id);
    expect(Number((await db.query('SELECT count(*) AS n FROM evora.jobs WHERE queue = $1', [queue])).rows[0].n)).toBe(51);
    s.stream.end();
    expect((await s.status).code).toBe(grpc.status.OK);
  });

  it('a bad request gets its status in its response, one line, writes nothing, and the stream goes on', async () => {
    const queue = queueName();
    const s = streamOpen(clients.jobs);
    s.send(1, job('bad queue name!'));
    s.send(2, undefined);
    s.send(3, job(queue, { dependsOnRefs: ['a'] }));
    s.send(4, job(queue, { idempotencyKey: 'same', priority: 1 }));
    const first = await s.answers(4);
    s.send(5, job(queue, { idempotencyKey: 'same', priority: 2 }));
    s.send(6, job(queue));
    const answers = await s.answers(6);
    for (const id of [1, 2, 3]) {
      const e = errorOf(first.get(id));
      expect(grpc.status[e.code]).toBe('INVALID_ARGUMENT');
      expect(e.message).not.toMatch(/\n/);
    }
    expect(errorOf(first.get(2)).message).toMatch(/job is required/);
    expect(resultOf(answers.get(4)).created).toBe(true);
    expect(grpc.status[errorOf(answers.get(5)).code]).toBe('ALREADY_EXISTS');
    expect(resultOf(answers.get(6)).created).toBe(true);
    expect(Number((await db.query('SELECT count(*) AS n FROM evora.jobs WHERE queue = $1', [queue])).rows[0].n)).toBe(2);
    s.stream.end();
    expect((await s.status).code).toBe(grpc.status.OK);
  });

  it('a half-close is answered with every response first, then OK', async () => {
    const queue = queueName();
    const s = streamOpen(clients.jobs);
    for (let i = 1; i <= 20; i++) s.send(i, job(queue));
    s.stream.end();
    const st = await s.status;
    expect(st.code).toBe(grpc.status.OK);
    expect(s.responses.map((r) => r.requestId).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });
});

describe('SubmitJobStream at shutdown', () => {
  it('ends with OK only after answering the submits it read (held up by another transaction); one without an answer was not applied', async () => {
    const { server, address, databaseUrl } = await serverSetup();
    const client = new JobServiceClient(address, grpc.credentials.createInsecure());
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      const queue = queueName();
      const s = streamOpen(client);
      s.send(1, job(queue, { idempotencyKey: 'k1' }));
      await s.answers(1);
      // Another transaction submits jobs with the keys the next submits use and holds them
      // uncommitted: the submits' inserts wait on it until it rolls back.
      await db.query('BEGIN');
      for (let n = 2; n <= 6; n++) await db.query(`SELECT evora.submit_job(queue => $1, type => 't', idempotency_key => $2)`, [queue, `k${n}`]);
      for (let n = 2; n <= 6; n++) s.send(n, job(queue, { idempotencyKey: `k${n}` }));
      // Something waits on this transaction: a submit (its text in pg_stat_activity can be a
      // pooled connection's previous statement while it is still being parsed).
      await waitFor(
        async () => (await db.query(`SELECT 1 FROM pg_stat_activity WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))`)).rowCount! > 0,
        { what: 'a submit to wait on the uncommitted keys' },
      );
      const stopped = server.stop();
      await db.query('ROLLBACK');
      await stopped;
      const st = await s.status;
      expect(st.code).toBe(grpc.status.OK);
      const answered = s.responses.map((r) => r.requestId).sort((a, b) => a - b);
      expect(new Set(answered).size).toBe(answered.length);
      expect(answered[0]).toBe(1);
      for (const r of s.responses) expect(resultOf(r).created).toBe(true);
      // After an OK end a request without a response was never read, so never applied.
      const stored = (await db.query('SELECT idempotency_key AS k FROM evora.jobs WHERE queue = $1', [queue])).rows.map((r) => Number(String(r.k).slice(1)));
      expect(stored.sort((a, b) => a - b)).toEqual(answered);
    } finally {
      client.close();
      await db.end();
    }
  });
});

/**
 * The stream's rules on a Node Duplex standing in for the grpc-js call (requests pushed
 * in, responses collected), with submits the test resolves by hand.
 */
function fakeSetup(principal: Principal = ANONYMOUS) {
  const responses: SubmitJobStreamResponse[] = [];
  const call = new Duplex({
    objectMode: true,
    read() {},
    write(chunk: SubmitJobStreamResponse, _enc, cb) {
      responses.push(chunk);
      cb();
    },
  });
  let endStatus: unknown = null;
  call.on('error', (e) => (endStatus = e));
  let finished = false;
  call.on('finish', () => (finished = true));
  const submits: { req: SubmitJobRequest; resolve: (r: SubmitJobResponse) => void; reject: (e: unknown) => void }[] = [];
  const invalidate: (() => void)[] = [];
  const streams = new Set<{ end(): void }>();
  const stream = SubmitStream.start(call as unknown as grpc.ServerDuplexStream<SubmitJobStreamRequest, SubmitJobStreamResponse>, {
    submit: (req) => new Promise((resolve, reject) => submits.push({ req, resolve, reject })),
    logger: silentLogger(),
    streams,
    // The reason as the Authenticator words it for a token (test/auth/authenticator.test.ts).
    auth: { onPrincipalInvalidated: (p, fn) => (invalidate.push(() => fn(`token "${p.name}" was revoked or has expired`)), () => undefined) },
  }, principal);
  const send = (n: number, from = 1) => {
    for (let i = from; i < from + n; i++) call.push({ requestId: i, job: job('q') });
  };
  const tick = () => new Promise((r) => setImmediate(r));
  return { call, stream, responses, submits, streams, invalidate, send, tick, get endStatus() { return endStatus; }, get finished() { return finished; } };
}

describe('SubmitStream (the class)', () => {
  it(`runs at most ${MAX_SUBMITS_IN_FLIGHT} submits at once and reads on as they are answered`, async () => {
    const f = fakeSetup();
    f.send(MAX_SUBMITS_IN_FLIGHT + 50);
    await f.tick();
    expect(f.submits).toHaveLength(MAX_SUBMITS_IN_FLIGHT);
    expect(f.call.isPaused()).toBe(true);
    for (const s of f.submits.slice(0, 10)) s.resolve({ job: undefined, created: true });
    await waitFor(() => f.submits.length === MAX_SUBMITS_IN_FLIGHT + 10, { what: 'ten more submits read' });
    expect(f.responses.map((r) => r.requestId)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    f.call.destroy();
  });

  it('answers a failed submit in band (a domain error keeps its code; anything else is INTERNAL) and goes on', async () => {
    const f = fakeSetup();
    f.send(3);
    await waitFor(() => f.submits.length === 3);
    f.submits[0]!.reject(new EvoraError('NOT_FOUND', 'no such parent'));
    f.submits[1]!.reject(new Error('boom with detail'));
    f.submits[2]!.resolve({ job: undefined, created: false });
    await waitFor(() => f.responses.length === 3);
    expect(f.responses[0]).toEqual({ requestId: 1, outcome: { $case: 'error', value: { code: grpc.status.NOT_FOUND, message: 'no such parent' } } });
    expect(f.responses[1]!.outcome).toEqual({ $case: 'error', value: { code: grpc.status.INTERNAL, message: 'internal error (logged by the server)' } });
    expect(f.responses[2]!.outcome?.$case).toBe('result');
    expect(f.stream.state).toBe('open');
    f.call.destroy();
  });

  it('end() reads no more, waits for the submits running, then ends with OK and leaves the set', async () => {
    const f = fakeSetup();
    f.send(2);
    await waitFor(() => f.submits.length === 2);
    expect(f.streams.size).toBe(1);
    f.stream.end();
    f.send(1, 3);
    await f.tick();
    expect(f.stream.state).toBe('ending');
    expect(f.finished).toBe(false);
    expect(f.submits).toHaveLength(2);
    f.submits[0]!.resolve({ job: undefined, created: true });
    await f.tick();
    expect(f.finished).toBe(false);
    f.submits[1]!.resolve({ job: undefined, created: true });
    await waitFor(() => f.finished, { what: 'the stream to end' });
    expect(f.responses.map((r) => r.requestId)).toEqual([1, 2]);
    expect(f.endStatus).toBeNull();
    expect(f.stream.state).toBe('closed');
    expect(f.streams.size).toBe(0);
  });

  it('a token that stops working ends the stream UNAUTHENTICATED once its running submits are answered', async () => {
    const f = fakeSetup({ ...ANONYMOUS, kind: 'token', tokenId: 't1', name: 'ci', role: 'producer' });
    f.send(1);
    await waitFor(() => f.submits.length === 1);
    f.invalidate[0]!();
    expect(f.stream.state).toBe('ending');
    expect(f.endStatus).toBeNull();
    f.submits[0]!.resolve({ job: undefined, created: true });
    await waitFor(() => f.endStatus !== null, { what: 'the end status' });
    expect(f.responses).toHaveLength(1);
    expect(f.endStatus).toMatchObject({ code: grpc.status.UNAUTHENTICATED, details: 'token "ci" was revoked or has expired' });
  });
});


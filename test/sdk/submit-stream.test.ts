import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Job,
  JobServiceService,
  JobState,
  type JobServiceServer,
  type SubmitJobRequest,
  type SubmitJobResponse,
  type SubmitJobStreamRequest,
  type SubmitJobStreamResponse,
} from '../../src/gen/evora/v1/job.js';
import { EvoraApiError, EvoraClient } from '../../src/sdk/index.js';
import { SUBMIT_STREAM_WINDOW } from '../../src/sdk/submit-stream.js';
import { queueName } from '../helpers/factories.js';
import { serverSetup } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * EvoraClient.submit over a SubmitJobStream: against a real server, and against scripted
 * JobService servers for what a real one does not do on cue (end a stream before reading,
 * break it, never answer, lack the method).
 */

describe('EvoraClient.submit against a server', () => {
  let address: string;
  beforeAll(async () => {
    ({ address } = await serverSetup());
  });

  it('many submits at once each get their own job; a replay and a conflict keep their meaning', async () => {
    const client = new EvoraClient({ address });
    try {
      const queue = queueName();
      const results = await Promise.all(Array.from({ length: 100 }, (_, i) => client.submit({ queue, type: 't', payload: { i } })));
      expect(new Set(results.map((r) => r.job.id)).size).toBe(100);
      results.forEach((r, i) => expect(r).toMatchObject({ created: true, job: { queue, payload: { i } } }));
      const first = await client.submit({ queue, type: 't', idempotencyKey: 'k', priority: 1 });
      const again = await client.submit({ queue, type: 't', idempotencyKey: 'k', priority: 1 });
      expect(again).toMatchObject({ created: false, job: { id: first.job.id } });
      const conflict = await client.submit({ queue, type: 't', idempotencyKey: 'k', priority: 2 }).catch((e: unknown) => e);
      expect(conflict).toBeInstanceOf(EvoraApiError);
      expect((conflict as EvoraApiError).code).toBe(grpc.status.ALREADY_EXISTS);
      // The server's own refusal of that one request: the CLI says "answered", not "lost the connection".
      expect((conflict as EvoraApiError).answered).toBe(true);
      const bad = await client.submit({ queue: 'not a queue!', type: 't' }).catch((e: unknown) => e);
      expect((bad as EvoraApiError).code).toBe(grpc.status.INVALID_ARGUMENT);
    } finally {
      client.close();
    }
  });

  it("a submit over the server's largest message fails alone (RESOURCE_EXHAUSTED); the submits beside it are answered", async () => {
    const client = new EvoraClient({ address });
    try {
      const queue = queueName();
      const some = (from: number) => Array.from({ length: 20 }, (_, i) => client.submit({ queue, type: 't', payload: { i: from + i } }));
      const before = some(0);
      // Over the server's 4 MiB: gRPC refuses it before Evora reads it.
      const huge = client.submit({ queue, type: 't', payload: { s: 'x'.repeat(5 * 1024 * 1024) } }).catch((e: unknown) => e);
      // Over 64 KiB, within the server's limits: a submit like any other.
      const large = client.submit({ queue, type: 't', payload: { s: 'y'.repeat(100_000) } });
      const after = some(20);
      expect(((await huge) as EvoraApiError).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect((await large).job.payload).toEqual({ s: 'y'.repeat(100_000) });
      const results = await Promise.all([...before, ...after]);
      results.forEach((r, i) => expect(r).toMatchObject({ created: true, job: { payload: { i } } }));
    } finally {
      client.close();
    }
  });

  it('close() with more submits in flight than the window: every one is sent and answered', async () => {
    const client = new EvoraClient({ address });
    const queue = queueName();
    await client.submit({ queue, type: 'first' }); // connected: close() fails calls still waiting for a connection
    const n = SUBMIT_STREAM_WINDOW * 2 + 10;
    const all = Promise.all(Array.from({ length: n }, (_, i) => client.submit({ queue, type: 't', payload: { i } })));
    client.close();
    expect((await all).filter((r) => r.created)).toHaveLength(n);
  });

  it('submitOverStream: false submits by unary calls with the same results', async () => {
    const client = new EvoraClient({ address, submitOverStream: false });
    try {
      const queue = queueName();
      expect(await client.submit({ queue, type: 't', payload: { a: 1 } })).toMatchObject({ created: true, job: { queue, payload: { a: 1 } } });
    } finally {
      client.close();
    }
  });
});

/** What a scripted server does with each stream's requests. */
type StreamScript = (call: grpc.ServerDuplexStream<SubmitJobStreamRequest, SubmitJobStreamResponse>, req: SubmitJobStreamRequest, nth: number) => void;

/** A JobService with only SubmitJobStream (scripted) and SubmitJob (counted), or only SubmitJob. */
async function fakeJobServer(script: StreamScript | null) {
  const server = new grpc.Server();
  const seen = { streams: 0, requests: 0, unary: 0, halfClosed: 0 };
  const answer = (req: SubmitJobRequest): SubmitJobResponse => ({ job: Job.fromPartial({ id: `job-${req.type}`, queue: req.queue, type: req.type, state: JobState.JOB_STATE_PENDING }), created: true });
  const impl: Partial<JobServiceServer> = {
    submitJob: (call, cb) => {
      seen.unary++;
      cb(null, answer(call.request));
    },
  };
  if (script) {
    impl.submitJobStream = (call) => {
      seen.streams++;
      call.on('data', (req: SubmitJobStreamRequest) => script(call, req, ++seen.requests));
      call.on('end', () => {
        seen.halfClosed++;
        call.end();
      });
    };
  }
  server.addService(JobServiceService, impl as JobServiceServer);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const client = new EvoraClient({ address: `127.0.0.1:${port}`, deadlineMs: 5000 });
  return {
    client,
    seen,
    answer,
    stop: async () => {
      client.close();
      server.forceShutdown();
    },
  };
}

describe('EvoraClient.submit against scripted servers', () => {
  const fakes: { stop(): Promise<void> }[] = [];
  const setup = async (script: StreamScript | null) => {
    const f = await fakeJobServer(script);
    fakes.push(f);
    return f;
  };
  afterAll(async () => {
    for (const f of fakes) await f.stop();
  });
  const ok = (call: grpc.ServerDuplexStream<SubmitJobStreamRequest, SubmitJobStreamResponse>, req: SubmitJobStreamRequest, answer: (r: SubmitJobRequest) => SubmitJobResponse) =>
    call.write({ requestId: req.requestId, outcome: { $case: 'result', value: answer(req.job!) } });

  it('a server without SubmitJobStream (UNIMPLEMENTED) is asked by SubmitJob, then and from then on', async () => {
    const f = await setup(null);
    expect((await f.client.submit({ queue: 'q', type: 'a' })).job.id).toBe('job-a');
    expect((await f.client.submit({ queue: 'q', type: 'b' })).job.id).toBe('job-b');
    expect(f.seen.unary).toBe(2);
  });

  it('submits the server ended the stream on without reading (OK) are sent again on a new stream', async () => {
    let f!: Awaited<ReturnType<typeof fakeJobServer>>;
    // The first stream answers its first request and ends on its second, reading no more.
    f = await setup((call, req, nth) => {
      if (nth === 1 || f.seen.streams > 1) ok(call, req, f.answer);
      else if (nth === 2) call.end();
    });
    const first = await f.client.submit({ queue: 'q', type: 'a' });
    expect(first.job.id).toBe('job-a');
    const [b, c] = await Promise.all([f.client.submit({ queue: 'q', type: 'b' }), f.client.submit({ queue: 'q', type: 'c' })]);
    expect([b.job.id, c.job.id]).toEqual(['job-b', 'job-c']);
    expect(f.seen.streams).toBe(2);
  });

  it('a stream that breaks fails its submits in flight with its status; the next submit opens a new stream', async () => {
    let f!: Awaited<ReturnType<typeof fakeJobServer>>;
    f = await setup((call, req) => {
      if (f.seen.streams === 1) call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'database unavailable' });
      else ok(call, req, f.answer);
    });
    const err = await f.client.submit({ queue: 'q', type: 'a' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EvoraApiError);
    expect((err as EvoraApiError).code).toBe(grpc.status.UNAVAILABLE);
    expect((await f.client.submit({ queue: 'q', type: 'b' })).job.id).toBe('job-b');
  });

  it("a submit's own deadline and signal fail it (DEADLINE_EXCEEDED, CANCELLED) while the stream goes on", async () => {
    let f!: Awaited<ReturnType<typeof fakeJobServer>>;
    f = await setup((call, req) => {
      if (req.job!.type !== 'never') ok(call, req, f.answer);
    });
    const late = await f.client.submit({ queue: 'q', type: 'never' }, { deadlineMs: 100 }).catch((e: unknown) => e);
    expect((late as EvoraApiError).code).toBe(grpc.status.DEADLINE_EXCEEDED);
    const ac = new AbortController();
    const cancelled = f.client.submit({ queue: 'q', type: 'never' }, { signal: ac.signal }).catch((e: unknown) => e);
    ac.abort();
    expect(((await cancelled) as EvoraApiError).code).toBe(grpc.status.CANCELLED);
    expect((await f.client.submit({ queue: 'q', type: 'fine' })).job.id).toBe('job-fine');
    expect(f.seen.streams).toBe(1);
  });

  it(`at most ${SUBMIT_STREAM_WINDOW} requests are written unanswered; a submit given up before its turn is never sent`, async () => {
    const held: { call: grpc.ServerDuplexStream<SubmitJobStreamRequest, SubmitJobStreamResponse>; req: SubmitJobStreamRequest }[] = [];
    const f = await setup((call, req) => held.push({ call, req }));
    const n = SUBMIT_STREAM_WINDOW * 4;
    const errors = await Promise.all(Array.from({ length: n }, (_, i) => f.client.submit({ queue: 'q', type: `t${i}` }, { deadlineMs: 300 }).then((): EvoraApiError => {
      throw new Error('answered');
    }, (e: unknown) => e as EvoraApiError)));
    expect(errors.every((e) => e.code === grpc.status.DEADLINE_EXCEEDED)).toBe(true);
    const notSent = errors.filter((e) => e.notSent);
    expect(notSent.every((e) => /the job was not submitted/.test(e.details))).toBe(true);
    expect(errors.filter((e) => !e.notSent).every((e) => /the job may have been submitted/.test(e.details))).toBe(true);
    expect(notSent.length).toBeGreaterThanOrEqual(n - SUBMIT_STREAM_WINDOW);
    // The server answers what it got at last; then the client half-closes (idle): what it
    // had written by then is all the server ever gets.
    for (const h of held) ok(h.call, h.req, f.answer);
    await waitFor(() => f.seen.halfClosed === 1, { timeoutMs: 5000, what: 'the half-close' });
    expect(f.seen.requests).toBe(n - notSent.length);
    expect(f.seen.requests).toBeLessThanOrEqual(SUBMIT_STREAM_WINDOW);
  });

  it('submits not yet written when a stream breaks are sent on a new stream; those written fail with its status', async () => {
    let f!: Awaited<ReturnType<typeof fakeJobServer>>;
    f = await setup((call, req) => {
      if (f.seen.streams === 1) call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'connection reset' });
      else ok(call, req, f.answer);
    });
    const n = SUBMIT_STREAM_WINDOW + 10;
    const outcomes = await Promise.all(Array.from({ length: n }, (_, i) => f.client.submit({ queue: 'q', type: `t${i}` }).then((r) => r.job.id, (e: unknown) => (e as EvoraApiError).code)));
    expect(outcomes.slice(0, SUBMIT_STREAM_WINDOW).every((o) => o === grpc.status.UNAVAILABLE)).toBe(true);
    expect(outcomes.slice(SUBMIT_STREAM_WINDOW)).toEqual(Array.from({ length: 10 }, (_, i) => `job-t${SUBMIT_STREAM_WINDOW + i}`));
    expect(f.seen.streams).toBe(2);
  });

  it('an idle stream is half-closed about a second after its last answer', async () => {
    let f!: Awaited<ReturnType<typeof fakeJobServer>>;
    f = await setup((call, req) => ok(call, req, f.answer));
    await f.client.submit({ queue: 'q', type: 'a' });
    expect(f.seen.halfClosed).toBe(0);
    await waitFor(() => f.seen.halfClosed === 1, { timeoutMs: 5000, what: 'the half-close' });
    await f.client.submit({ queue: 'q', type: 'b' });
    expect(f.seen.streams).toBe(2);
  });
});

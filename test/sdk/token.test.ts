import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { JobServiceService } from '../../src/gen/evora/v1/job.js';
import { WorkerServiceService, type WorkRequest, type WorkResponse } from '../../src/gen/evora/v1/worker.js';
import { EvoraApiError, EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The SDK's `token` option: every unary call and the Work stream carry
 * `authorization: Bearer <token>`, and a worker refused UNAUTHENTICATED or
 * PERMISSION_DENIED stops with the error instead of reconnecting. A small scripted server
 * records each call's header and refuses on cue (what a real server with auth answers is
 * in test/interop/ and the server's own auth tests).
 */

let cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

interface Recorder {
  address: string;
  /** The authorization header of each call, in order ('' when absent), and its method. */
  calls: { method: string; authorization: string }[];
  /** What the next Work streams answer: 'welcome', or a status that ends them at once. */
  workScript: ('welcome' | grpc.status)[];
  /** Ends every open Work stream with `code`. */
  endStreams(code: grpc.status): void;
}

async function recorder(): Promise<Recorder> {
  const server = new grpc.Server();
  const streams = new Set<grpc.ServerDuplexStream<WorkRequest, WorkResponse>>();
  const rec: Recorder = {
    address: '',
    calls: [],
    workScript: [],
    endStreams: (code) => {
      for (const s of streams) s.emit('error', { code, details: 'token revoked' });
      streams.clear();
    },
  };
  const note = (method: string, md: grpc.Metadata) => rec.calls.push({ method, authorization: String(md.get('authorization')[0] ?? '') });
  const unimplemented = (_call: unknown, cb: grpc.sendUnaryData<never>) => cb({ code: grpc.status.UNIMPLEMENTED });
  server.addService(JobServiceService, {
    submitJob: unimplemented,
    submitJobs: unimplemented,
    getJob: (call: grpc.ServerUnaryCall<{ id: string }, never>, cb: grpc.sendUnaryData<never>) => {
      note('GetJob', call.metadata);
      const refuse = call.metadata.get('authorization').length === 0;
      cb({ code: refuse ? grpc.status.UNAUTHENTICATED : grpc.status.NOT_FOUND, details: refuse ? 'missing token' : 'no such job' });
    },
    listJobs: (call: grpc.ServerUnaryCall<unknown, never>, cb: grpc.sendUnaryData<never>) => {
      note('ListJobs', call.metadata);
      cb({ code: grpc.status.PERMISSION_DENIED, details: 'role viewer may not' });
    },
    cancelJob: unimplemented,
    retryJob: unimplemented,
    retryJobs: unimplemented,
    purgeJobs: unimplemented,
    listJobAttempts: unimplemented,
  });
  server.addService(WorkerServiceService, {
    work: (call: grpc.ServerDuplexStream<WorkRequest, WorkResponse>) => {
      note('Work', call.metadata);
      const step = rec.workScript.shift() ?? 'welcome';
      call.on('error', () => undefined);
      if (step !== 'welcome') {
        call.emit('error', { code: step, details: 'refused' });
        return;
      }
      streams.add(call);
      call.on('data', (req: WorkRequest) => {
        if (req.msg?.$case === 'hello') {
          call.write({ msg: { $case: 'welcome', value: { sessionId: 's', leaseSeconds: 30, heartbeatIntervalSeconds: 10, heartbeatIntervalMs: 10_000, acceptsBatches: true, payloadsAsJson: false, maxResultBytes: 0, maxMessageBytes: 0 } } });
        }
      });
      call.on('end', () => call.end());
    },
    claimJobs: unimplemented,
    extendLease: unimplemented,
    completeJob: unimplemented,
    failJob: unimplemented,
    snoozeJob: unimplemented,
    reportProgress: unimplemented,
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  rec.address = `127.0.0.1:${port}`;
  cleanup.push(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())).then(() => server.forceShutdown()));
  return rec;
}

function client(address: string, token?: string): EvoraClient {
  const c = new EvoraClient({ address, token });
  cleanup.push(async () => c.close());
  return c;
}

function worker(address: string, token?: string): EvoraWorker {
  const w = new EvoraWorker({ address, token, queues: ['q'], reconnect: { initialDelayMs: 10, maxDelayMs: 20 }, logger: { debug() {}, info() {}, warn() {}, error() {} } });
  w.handle('x', () => undefined);
  cleanup.push(() => w.stop({ timeoutMs: 0, graceMs: 0 }));
  return w;
}

describe('the token option', () => {
  it('every unary call carries authorization: Bearer <token>', async () => {
    const rec = await recorder();
    const c = client(rec.address, 'evora_s3cret');
    await expect(c.get('j1')).rejects.toMatchObject({ codeName: 'NOT_FOUND' });
    await expect(c.list({ queue: 'q' })).rejects.toMatchObject({ codeName: 'PERMISSION_DENIED' });
    expect(rec.calls).toEqual([
      { method: 'GetJob', authorization: 'Bearer evora_s3cret' },
      { method: 'ListJobs', authorization: 'Bearer evora_s3cret' },
    ]);
  });

  it('without a token no header is sent, and UNAUTHENTICATED surfaces as a typed error', async () => {
    const rec = await recorder();
    const err = await client(rec.address).get('j1').catch((e: unknown) => e);
    expect(rec.calls).toEqual([{ method: 'GetJob', authorization: '' }]);
    expect(err).toBeInstanceOf(EvoraApiError);
    const e = err as EvoraApiError;
    expect(e).toMatchObject({ code: grpc.status.UNAUTHENTICATED, codeName: 'UNAUTHENTICATED', method: 'GetJob' });
    expect(e.isUnauthenticated).toBe(true);
    expect(e.isPermissionDenied).toBe(false);
  });

  it('PERMISSION_DENIED surfaces as a typed error', async () => {
    const rec = await recorder();
    const e = (await client(rec.address, 'tok').list({ queue: 'q' }).catch((x: unknown) => x)) as EvoraApiError;
    expect(e).toBeInstanceOf(EvoraApiError);
    expect(e.isPermissionDenied).toBe(true);
    expect(e.isUnauthenticated).toBe(false);
  });

  it('without the option: the first line of $EVORA_TOKEN_FILE, else $EVORA_TOKEN; the option wins, and "" sends none', async () => {
    const rec = await recorder();
    const dir = await mkdtemp(join(tmpdir(), 'evora-token-env-'));
    const saved = { file: process.env.EVORA_TOKEN_FILE, token: process.env.EVORA_TOKEN };
    const restore = (name: 'EVORA_TOKEN_FILE' | 'EVORA_TOKEN', value: string | undefined) => {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    };
    try {
      await writeFile(join(dir, 'token'), 'from_file\r\nsecond line\n');
      delete process.env.EVORA_TOKEN_FILE;
      process.env.EVORA_TOKEN = ' from_env ';
      await expect(client(rec.address).get('j1')).rejects.toMatchObject({ codeName: 'NOT_FOUND' });
      process.env.EVORA_TOKEN_FILE = join(dir, 'token');
      await expect(client(rec.address).get('j1')).rejects.toMatchObject({ codeName: 'NOT_FOUND' });
      await expect(client(rec.address, 'given').get('j1')).rejects.toMatchObject({ codeName: 'NOT_FOUND' });
      await expect(client(rec.address, '').get('j1')).rejects.toMatchObject({ codeName: 'UNAUTHENTICATED' });
      expect(rec.calls.map((c) => c.authorization)).toEqual(['Bearer from_env', 'Bearer from_file', 'Bearer given', '']);
      // A file that cannot be read is refused at construction in one line naming its path, never a token.
      process.env.EVORA_TOKEN_FILE = join(dir, 'missing');
      expect(() => new EvoraClient({ address: rec.address })).toThrow(`EVORA_TOKEN_FILE: cannot read ${join(dir, 'missing')} (ENOENT)`);
      await writeFile(join(dir, 'empty'), '\n');
      process.env.EVORA_TOKEN_FILE = join(dir, 'empty');
      expect(() => new EvoraWorker({ address: rec.address, queues: ['q'] })).toThrow(/the first line of .*empty is empty/);
      // A token from the environment that cannot be a header value (a header pasted whole) is
      // refused naming where it came from: the program gave none. Never the token itself.
      await writeFile(join(dir, 'header'), 'Bearer s3cr3t_in_file\n');
      process.env.EVORA_TOKEN_FILE = join(dir, 'header');
      expect(() => new EvoraClient({ address: rec.address })).toThrow(`the token in EVORA_TOKEN_FILE (${join(dir, 'header')}) must be printable ASCII without spaces`);
      expect(() => new EvoraClient({ address: rec.address })).not.toThrow(/s3cr3t/);
      delete process.env.EVORA_TOKEN_FILE;
      process.env.EVORA_TOKEN = 'Bearer s3cr3t_in_env';
      expect(() => new EvoraWorker({ address: rec.address, queues: ['q'] })).toThrow(/^EVORA_TOKEN must be printable ASCII without spaces/);
      expect(() => new EvoraWorker({ address: rec.address, queues: ['q'] })).not.toThrow(/s3cr3t/);
    } finally {
      restore('EVORA_TOKEN_FILE', saved.file);
      restore('EVORA_TOKEN', saved.token);
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a token that cannot be a header value is refused at construction, without echoing it', () => {
    expect(() => new EvoraClient({ address: '127.0.0.1:1', token: 'has space' })).toThrow(TypeError);
    expect(() => new EvoraClient({ address: '127.0.0.1:1', token: 'has space' })).not.toThrow(/has space/);
  });

  it('the Work stream carries the token on every (re)connect', async () => {
    const rec = await recorder();
    const w = worker(rec.address, 'wtok');
    await w.start();
    rec.endStreams(grpc.status.UNAVAILABLE);
    await waitFor(() => rec.calls.filter((c) => c.method === 'Work').length === 2, { what: 'the reconnect' });
    expect(rec.calls.map((c) => c.authorization)).toEqual(['Bearer wtok', 'Bearer wtok']);
  });

  it('a worker refused UNAUTHENTICATED at hello: start() rejects, no reconnect', async () => {
    const rec = await recorder();
    rec.workScript.push(grpc.status.UNAUTHENTICATED);
    const w = worker(rec.address);
    await expect(w.start()).rejects.toMatchObject({ codeName: 'UNAUTHENTICATED', isUnauthenticated: true });
    await w.stop();
    expect(rec.calls.filter((c) => c.method === 'Work')).toHaveLength(1);
  });

  for (const code of [grpc.status.UNAUTHENTICATED, grpc.status.PERMISSION_DENIED]) {
    it(`an open Work stream ended ${grpc.status[code]} (token revoked): the worker stops with an 'error', no reconnect`, async () => {
      const rec = await recorder();
      const w = worker(rec.address, 'wtok');
      const errors: Error[] = [];
      w.on('error', (e) => errors.push(e));
      await w.start();
      rec.endStreams(code);
      await waitFor(() => errors.length === 1, { what: 'the error event' });
      expect(errors[0]).toMatchObject({ codeName: grpc.status[code] });
      await w.stop();
      expect(rec.calls.filter((c) => c.method === 'Work')).toHaveLength(1);
    });
  }
});

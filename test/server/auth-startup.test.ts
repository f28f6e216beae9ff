import { afterAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { pino } from 'pino';
import { JobServiceService, ListJobsRequest } from '../../src/gen/evora/v1/job.js';
import { configLoad, type ServerConfig } from '../../src/server/config.js';
import { serverStart, type EvoraServer } from '../../src/server/server.js';
import { hostIsLoopback } from '../../src/domain/auth.js';
import { testDatabaseCreate } from '../helpers/db.js';
import { bearer } from '../helpers/tokens.js';

/**
 * When auth applies at startup (docs/security.md "When auth applies"): open on loopback
 * with no token (and says so), refused on another address unless --insecure-no-auth, on
 * with EVORA_BOOTSTRAP_ADMIN_TOKEN (one token across restarts), and health and reflection
 * answering without a token (reflection can be turned off).
 */

interface LogLine {
  raw: string;
  level: number;
  msg: string;
}

const running = new Set<EvoraServer>();
const drops: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const s of running) await s.stop();
  for (const d of drops) await d();
});

async function database(): Promise<string> {
  const db = await testDatabaseCreate();
  drops.push(db.drop);
  return db.url;
}

/** Starts a server over `databaseUrl` with these settings; its log lines go to `lines`. */
async function start(databaseUrl: string, overrides: Partial<Record<keyof ServerConfig, string>>, lines: LogLine[]): Promise<EvoraServer> {
  const config = configLoad({ host: '127.0.0.1', port: '0', httpPort: '0', electionIntervalMs: '200', ...overrides, databaseUrl }, {});
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push({ ...(JSON.parse(s) as LogLine), raw: s }) });
  const server = await serverStart(config, logger);
  running.add(server);
  return server;
}

async function stop(server: EvoraServer): Promise<void> {
  running.delete(server);
  await server.stop();
}

/** The status of a ListJobs call with this metadata (OK when it succeeds). */
function listJobsCode(address: string, md: grpc.Metadata): Promise<grpc.status> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const def = JobServiceService.listJobs;
  return new Promise<grpc.status>((resolve) =>
    client.makeUnaryRequest(def.path, def.requestSerialize, def.responseDeserialize, ListJobsRequest.fromPartial({}), md, (err) => resolve(err ? err.code : grpc.status.OK)),
  ).finally(() => client.close());
}

/** A raw call of a method we do not serve the types of: bytes in, bytes out. */
function rawUnary(address: string, path: string, request: Buffer): Promise<grpc.status> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const id = (b: Buffer) => b;
  return new Promise<grpc.status>((resolve) =>
    client.makeUnaryRequest(path, id, id, request, new grpc.Metadata(), (err) => resolve(err ? err.code : grpc.status.OK)),
  ).finally(() => client.close());
}

/** ServerReflectionInfo (v1) asked to list services: OK once an answer arrives, else the status. */
function reflectionCode(address: string): Promise<grpc.status> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const id = (b: Buffer) => b;
  const stream = client.makeBidiStreamRequest('/grpc.reflection.v1.ServerReflection/ServerReflectionInfo', id, id, new grpc.Metadata());
  return new Promise<grpc.status>((resolve) => {
    stream.on('data', () => {
      resolve(grpc.status.OK);
      stream.cancel();
    });
    stream.on('error', (e: grpc.ServiceError) => resolve(e.code));
    // ServerReflectionRequest { list_services: "" } (field 7).
    stream.write(Buffer.from([0x3a, 0x00]));
  }).finally(() => client.close());
}

/** grpc.health.v1.Health/Check for the whole server (an empty HealthCheckRequest). */
const healthCode = (address: string) => rawUnary(address, '/grpc.health.v1.Health/Check', Buffer.alloc(0));

describe('auth at startup', () => {
  it('loopback is 127.0.0.0/8, ::1 and localhost', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', 'LOCALHOST']) expect(hostIsLoopback(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', '128.0.0.1', 'example.com', '']) expect(hostIsLoopback(h), h).toBe(false);
  });

  it('no token on loopback: the server runs open and says so in one info line', async () => {
    const lines: LogLine[] = [];
    const server = await start(await database(), {}, lines);
    expect(await listJobsCode(server.address, new grpc.Metadata())).toBe(grpc.status.OK);
    expect(lines.filter((l) => l.level === 30 && /^auth off: no API token exists/.test(l.msg))).toHaveLength(1);
    await stop(server);
  });

  it('no token on 0.0.0.0: the start is refused with one line; with --insecure-no-auth it starts with a warn line', async () => {
    const url = await database();
    const lines: LogLine[] = [];
    await expect(start(url, { host: '0.0.0.0' }, lines)).rejects.toThrow(
      'the server listens on 0.0.0.0 with no API tokens: create one (evora token create, or EVORA_BOOTSTRAP_ADMIN_TOKEN) or pass --insecure-no-auth (EVORA_INSECURE_NO_AUTH=1)',
    );
    const insecure: LogLine[] = [];
    const server = await start(url, { host: '0.0.0.0', insecureNoAuth: '1' }, insecure);
    expect(insecure.filter((l) => l.level === 40 && /^auth off: the server listens on 0\.0\.0\.0 with no API tokens/.test(l.msg))).toHaveLength(1);
    expect(await listJobsCode(`127.0.0.1:${server.port}`, new grpc.Metadata())).toBe(grpc.status.OK);
    await stop(server);
  });

  it('EVORA_BOOTSTRAP_ADMIN_TOKEN: auth on, the token works, a restart keeps one token; the secret is never logged', async () => {
    const url = await database();
    const secret = `boot_${'k'.repeat(40)}`;
    const lines: LogLine[] = [];
    let server = await start(url, { host: '0.0.0.0', bootstrapAdminToken: secret }, lines);
    const address = `127.0.0.1:${server.port}`;
    expect(await listJobsCode(address, new grpc.Metadata())).toBe(grpc.status.UNAUTHENTICATED);
    expect(await listJobsCode(address, bearer(secret))).toBe(grpc.status.OK);
    await stop(server);
    server = await start(url, { bootstrapAdminToken: secret }, lines);
    expect(await listJobsCode(server.address, bearer(secret))).toBe(grpc.status.OK);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query(`SELECT name, role, created_by FROM evora.api_tokens`);
      expect(rows).toEqual([{ name: 'bootstrap', role: 'admin', created_by: '' }]);
    } finally {
      await client.end();
    }
    expect(lines.filter((l) => /bootstrap admin token "bootstrap" (created|kept)/.test(l.msg)).map((l) => l.msg)).toEqual([
      'bootstrap admin token "bootstrap" created',
      'bootstrap admin token "bootstrap" kept',
    ]);
    for (const l of lines) expect(l.raw).not.toContain(secret);
    await stop(server);
  });

  it('a short bootstrap secret is refused with one line that does not repeat it', () => {
    const short = 'too-short-a-secret';
    let message = '';
    try {
      configLoad({}, { EVORA_BOOTSTRAP_ADMIN_TOKEN: short });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toBe(`EVORA_BOOTSTRAP_ADMIN_TOKEN must be at least 32 characters (it has ${short.length})`);
  });

  it('health and reflection answer without a token while auth is on; reflection off refuses reflection, health still answers', async () => {
    const url = await database();
    const secret = 'r'.repeat(40);
    const lines: LogLine[] = [];
    const on = await start(url, { bootstrapAdminToken: secret }, lines);
    expect(await listJobsCode(on.address, new grpc.Metadata())).toBe(grpc.status.UNAUTHENTICATED);
    expect(await healthCode(on.address)).toBe(grpc.status.OK);
    expect(await reflectionCode(on.address)).toBe(grpc.status.OK);
    await stop(on);
    const off = await start(url, { bootstrapAdminToken: secret, reflection: '0' }, lines);
    expect(await reflectionCode(off.address)).toBe(grpc.status.UNIMPLEMENTED);
    expect(await healthCode(off.address)).toBe(grpc.status.OK);
    await stop(off);
  });
});

import { connect as http2Connect } from 'node:http2';
import { request as httpRequest } from 'node:http';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { pino } from 'pino';
import { tokenSecretGenerate } from '../../src/domain/auth.js';
import { QueueServiceService } from '../../src/gen/evora/v1/queue.js';
import { configLoad } from '../../src/server/config.js';
import { freePort } from '../../src/server/embedded-postgres.js';
import { serverStart, type EvoraServer } from '../../src/server/server.js';
import { testDatabaseCreate } from '../helpers/db.js';
import { teardownAdd } from '../helpers/teardown.js';

/**
 * A token sent with a character that is not printable ASCII (a secret pasted with a
 * non-breaking space) is refused UNAUTHENTICATED, over HTTP and over gRPC, and no line
 * the server writes holds it: neither Evora's log nor grpc-js's own stderr lines.
 */

const SECRET = tokenSecretGenerate();
/** The header as a client writes it in UTF-8 and Node reads it (latin1): "Bearer <secret>Â\u00a0". */
const HEADER = Buffer.from(`Bearer ${SECRET}\u00a0`, 'utf8').toString('latin1');
const lines: string[] = [];
let server: EvoraServer;
let httpPort: number;

beforeAll(async () => {
  const db = await testDatabaseCreate();
  httpPort = await freePort();
  const config = configLoad(
    { host: '127.0.0.1', port: '0', httpPort: String(httpPort), databaseUrl: db.url, bootstrapAdminToken: SECRET },
    {},
  );
  server = await serverStart(config, pino({ level: 'debug' }, { write: (s: string) => void lines.push(s) }));
  teardownAdd(async () => {
    await server.stop();
    await db.drop();
  });
});

afterEach(() => {
  vi.restoreAllMocks();
});

/** A raw HTTP/1.1 GET with `authorization` as given (fetch refuses such a header). */
function httpGet(path: string, authorization: string): Promise<{ status: number; body: { code?: string; message?: string } }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: httpPort, path, headers: { authorization } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as { code?: string } }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A raw gRPC call over HTTP/2 with `authorization` as given (grpc-js clients refuse such a header); resolves with grpc-status. */
function grpcCall(path: string, authorization: string): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const session = http2Connect(`http://${server.address}`);
    session.on('error', reject);
    const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', authorization });
    let code: string | undefined;
    req.on('response', (h) => (code ??= h['grpc-status'] as string | undefined));
    req.on('trailers', (h) => (code ??= h['grpc-status'] as string | undefined));
    req.on('error', reject);
    req.on('close', () => {
      session.close();
      resolve(code);
    });
    req.resume();
    req.end(Buffer.alloc(5)); // one empty message: no compression flag, length 0
  });
}

describe('a token that is not printable ASCII', () => {
  it('over HTTP: 401 UNAUTHENTICATED (malformed), and no log line holds it', async () => {
    const res = await httpGet('/v1/queues', HEADER);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ code: 'UNAUTHENTICATED', message: 'the authorization header is malformed: expected "Bearer <token>"' });
    expect(lines.filter((l) => l.includes(SECRET))).toEqual([]);
  });

  it("over gRPC: UNAUTHENTICATED, and grpc-js's stderr line about the header does not hold it", async () => {
    const stderr: string[] = [];
    vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => void stderr.push(args.map(String).join(' ')));
    expect(await grpcCall(QueueServiceService.listQueues.path, HEADER)).toBe('16');
    expect(stderr.some((l) => l.includes('Failed to add metadata entry authorization'))).toBe(true);
    expect(stderr.filter((l) => l.includes(SECRET))).toEqual([]);
    expect(lines.filter((l) => l.includes(SECRET))).toEqual([]);
  });
});

import { copyFileSync } from 'node:fs';
import { request } from 'node:https';
import { connect, createServer } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { HttpServer } from '../../src/http/http-server.js';
import { configLoad } from '../../src/server/config.js';
import { freePort } from '../../src/server/embedded-postgres.js';
import { SERVICE_DEFINITIONS, serverStart, ServerStartAbortedError } from '../../src/server/server.js';
import { silentLogger } from '../../src/logger.js';
import { testDatabaseCreate } from '../helpers/db.js';
import { serverSetup } from '../helpers/server-setup.js';
import { tlsCertsGenerate, type TlsCerts } from '../helpers/tls-certs.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The HTTP port's binding and TLS: a taken port fails the start in one line before
 * anything else starts; with EVORA_TLS_CERT/KEY the port is HTTPS with the gRPC port's
 * certificate, reloaded from its files; with EVORA_TLS_CLIENT_CA it requires a client
 * certificate signed by that CA.
 */

const certs: TlsCerts = tlsCertsGenerate('evora-http-a');
const other: TlsCerts = tlsCertsGenerate('evora-http-b');
afterAll(() => {
  certs.remove();
  other.remove();
});

/** GET over HTTPS on a fresh connection: the status, or the TLS error's message. */
function httpsGet(url: string, tls: { ca: Buffer; cert?: Buffer; key?: Buffer }): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request(url, { ...tls, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', (err) => resolve(err.message));
    req.end();
  });
}

describe('the HTTP port', () => {
  it('a taken port is refused in one line', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as { port: number }).port;
    const db = await testDatabaseCreate();
    try {
      const config = configLoad({ host: '127.0.0.1', port: '0', httpPort: String(port), databaseUrl: db.url }, {});
      await expect(serverStart(config, silentLogger())).rejects.toThrow(`cannot listen on HTTP 127.0.0.1:${port}: the address is already in use`);
    } finally {
      await new Promise<void>((r) => blocker.close(() => r()));
      await db.drop();
    }
  });

  it('while the database is unreachable: /healthz 200, /readyz and /v1 503 UNAVAILABLE', async () => {
    const [pgPort, httpPort] = [await freePort(), await freePort()];
    const config = configLoad({ host: '127.0.0.1', port: '0', httpPort: String(httpPort), databaseUrl: `postgres://nobody@127.0.0.1:${pgPort}/none` }, {});
    const abort = new AbortController();
    const starting = serverStart(config, silentLogger(), { signal: abort.signal });
    starting.catch(() => undefined);
    try {
      const base = `http://127.0.0.1:${httpPort}`;
      await waitFor(async () => (await fetch(`${base}/healthz`).catch(() => null))?.status === 200, { what: 'the HTTP port' });
      expect((await fetch(`${base}/readyz`)).status).toBe(503);
      const res = await fetch(`${base}/v1/queues`);
      expect(res.status).toBe(503);
      // The same line as gRPC's (test/server/db-outage.test.ts).
      expect(await res.json()).toEqual({ code: 'UNAVAILABLE', message: 'the server is starting: waiting for the database' });
    } finally {
      abort.abort();
      await expect(starting).rejects.toBeInstanceOf(ServerStartAbortedError);
    }
  });

  it('/v1 says whether the server is starting or stopping', async () => {
    const http = await HttpServer.start({ host: '127.0.0.1', port: 0, logger: silentLogger(), definitions: SERVICE_DEFINITIONS, bodyLimit: 1 << 20, tls: null, version: '1', dashboardDir: null });
    try {
      const get = async () => (await fetch(`http://127.0.0.1:${http.port}/v1/jobs/0b7e0c54-0000-4000-8000-000000000000`)).json();
      expect(await get()).toEqual({ code: 'UNAVAILABLE', message: 'the server is starting: waiting for the database' });
      http.notReady();
      expect(await get()).toEqual({ code: 'UNAVAILABLE', message: 'the server is stopping' });
    } finally {
      await http.close();
    }
  });

  it('a request whose body does not arrive in time is answered 408 and its connection closed', async () => {
    const http = await HttpServer.start({ host: '127.0.0.1', port: 0, logger: silentLogger(), definitions: SERVICE_DEFINITIONS, bodyLimit: 1 << 20, tls: null, version: '1', dashboardDir: null, requestTimeoutMs: 500 });
    try {
      // One byte of a 100-byte body, then nothing: it held the connection for ever.
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port: http.port }, () => socket.write('POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{'));
        let text = '';
        socket.setEncoding('utf8');
        socket.on('data', (chunk: string) => (text += chunk));
        socket.on('error', reject);
        socket.on('close', () => resolve(text));
      });
      expect(answer).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({ code: 'DEADLINE_EXCEEDED', message: 'the request was not received in time' });
    } finally {
      await http.close();
    }
  });

  it('HTTPS with the gRPC certificate, reloaded when the files change', async () => {
    const live = tlsCertsGenerate('evora-http-live');
    copyFileSync(certs.serverCert, live.serverCert);
    copyFileSync(certs.serverKey, live.serverKey);
    try {
      const { httpUrl } = await serverSetup({ http: true, tlsCert: live.serverCert, tlsKey: live.serverKey, tlsReloadIntervalMs: '100' });
      expect(httpUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      expect(await httpsGet(`${httpUrl}/v1/queues`, { ca: certs.read(certs.caCert) })).toBe(200);
      expect(await httpsGet(`${httpUrl}/v1/queues`, { ca: other.read(other.caCert) })).toEqual(expect.any(String));
      copyFileSync(other.serverKey, live.serverKey);
      copyFileSync(other.serverCert, live.serverCert);
      await waitFor(async () => (await httpsGet(`${httpUrl}/v1/queues`, { ca: other.read(other.caCert) })) === 200, { what: 'the new certificate on HTTP' });
    } finally {
      live.remove();
    }
  });

  it('mTLS: no client certificate is refused in the handshake; a signed one gets through', async () => {
    const { httpUrl } = await serverSetup({ http: true, tlsCert: certs.serverCert, tlsKey: certs.serverKey, tlsClientCa: certs.caCert });
    const ca = certs.read(certs.caCert);
    expect(await httpsGet(`${httpUrl}/healthz`, { ca })).toEqual(expect.any(String));
    expect(await httpsGet(`${httpUrl}/healthz`, { ca, cert: certs.read(certs.clientCert), key: certs.read(certs.clientKey) })).toBe(200);
  });
});

import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import { queueName } from '../helpers/factories.js';
import { tokenInsert } from '../helpers/tokens.js';
import { waitFor } from '../helpers/wait.js';
import { httpSetup } from './http-setup.js';

/**
 * What the HTTP API refuses of web pages (src/http/browser-guard.ts): a request that may
 * change something, sent by a page of another origin (cross-site request forgery: a form or
 * a no-cors fetch with a text/plain body needs no preflight), and, while the server runs
 * without auth on loopback, a request addressed to a name that is not loopback (a page
 * whose name was rebound to 127.0.0.1). Clients that are not browsers, and the dashboard
 * (the API's own origin), are served as before. No answer may be framed by another page.
 */

/** A raw HTTP/1.1 request: fetch may not set Host, and sends no Origin of a page. */
function raw(base: string, method: string, path: string, headers: Record<string, string>, body?: string) {
  const url = new URL(base);
  return new Promise<{ status: number; headers: IncomingHttpHeaders; body: { code?: string; message?: string; [k: string]: unknown } }>((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      const json = res.headers['content-type']?.startsWith('application/json') ?? false;
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text && json ? JSON.parse(text) : {} }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('auth off on loopback', () => {
  it('a state-changing request from a page of another origin is refused 403, and changes nothing', async () => {
    const { base } = await httpSetup();
    const evil = 'http://evil.example';
    const body = JSON.stringify({ name: 'planted', role: 'TOKEN_ROLE_ADMIN' });
    const cases: Record<string, string>[] = [
      // A browser of today: Sec-Fetch-Site says where the page is.
      { origin: evil, 'sec-fetch-site': 'cross-site', 'content-type': 'text/plain' },
      { origin: 'http://other.localhost', 'sec-fetch-site': 'same-site', 'content-type': 'text/plain' },
      // An older browser: only Origin, another host than the request's.
      { origin: evil, 'content-type': 'text/plain' },
      { origin: 'null', 'content-type': 'text/plain' },
    ];
    for (const headers of cases) {
      const res = await raw(base, 'POST', '/v1/tokens', headers, body);
      expect(res.status, JSON.stringify(headers)).toBe(403);
      expect(res.body.code).toBe('PERMISSION_DENIED');
      expect(res.body.message).toMatch(/^a page of another origin .*may not send POST requests to this API$/);
    }
    const pause = await raw(base, 'POST', `/v1/queues/${queueName('csrf')}/pause`, { origin: evil, 'sec-fetch-site': 'cross-site' });
    expect(pause.status).toBe(403);
    // Nothing was made: auth is still off, and no token exists.
    const caller = await raw(base, 'GET', '/v1/caller', {});
    expect(caller.body).toMatchObject({ kind: 'AUDIT_ACTOR_KIND_ANONYMOUS' });
    expect((await raw(base, 'GET', '/v1/tokens', {})).body).toEqual({});
    // A page of another origin may still send a GET (it cannot read the answer: no CORS).
    expect((await raw(base, 'GET', '/v1/queues', { origin: evil, 'sec-fetch-site': 'cross-site' })).status).toBe(200);
  });

  it('the dashboard (same origin) and clients that are not browsers are served', async () => {
    const { base } = await httpSetup();
    const host = new URL(base).host;
    const upsert = (headers: Record<string, string>) => raw(base, 'PUT', `/v1/queues/${queueName('same')}`, { 'content-type': 'application/json', ...headers }, '{}');
    expect((await upsert({ origin: `http://${host}`, 'sec-fetch-site': 'same-origin' })).status).toBe(201);
    expect((await upsert({ origin: `http://${host}` })).status).toBe(201);
    expect((await upsert({ 'sec-fetch-site': 'none' })).status).toBe(201);
    expect((await upsert({})).status).toBe(201);
  });

  it('a request addressed to a name that is not loopback (DNS rebinding) is refused 403; loopback names are served', async () => {
    const { base } = await httpSetup();
    const port = new URL(base).port;
    const rebound = await raw(base, 'GET', '/v1/queues', { host: `evil.example:${port}` });
    expect({ status: rebound.status, body: rebound.body }).toEqual({
      status: 403,
      body: {
        code: 'PERMISSION_DENIED',
        message: `served without a token on loopback, this answers only requests addressed to localhost, 127.0.0.1 or [::1], not "evil.example:${port}"`,
      },
    });
    const planted = await raw(base, 'POST', '/v1/tokens', { host: `evil.example:${port}`, origin: `http://evil.example:${port}`, 'sec-fetch-site': 'same-origin' }, '{"role":"TOKEN_ROLE_ADMIN"}');
    expect(planted.status).toBe(403);
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `LOCALHOST:${port}`]) {
      expect((await raw(base, 'GET', '/v1/queues', { host })).status, host).toBe(200);
    }
    // /metrics names every queue and is served without a token here: the same rule.
    const metrics = await raw(base, 'GET', '/metrics', { host: `evil.example:${port}` });
    expect({ status: metrics.status, code: metrics.body.code }).toEqual({ status: 403, code: 'PERMISSION_DENIED' });
    const local = await fetch(`${base}/metrics`);
    expect({ status: local.status, text: (await local.text()).includes('evora_') }).toEqual({ status: 200, text: true });
    expect((await raw(base, 'GET', '/v1/caller', {})).body).toMatchObject({ kind: 'AUDIT_ACTOR_KIND_ANONYMOUS' });
  });
});

describe('framing', () => {
  it('no page of another site may frame the dashboard or the API (clickjacking), nor a browser sniff an answer as another type: every answer says so', async () => {
    const { base } = await httpSetup();
    for (const path of ['/', '/queues', '/v1/queues', '/healthz', '/no-such-file.js']) {
      const res = await fetch(`${base}${path}`);
      await res.arrayBuffer();
      expect(res.headers.get('x-frame-options'), path).toBe('DENY');
      expect(res.headers.get('content-security-policy'), path).toBe("frame-ancestors 'none'");
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
    }
  });
});

describe('caching', () => {
  it('no answer of the API is stored by a browser or proxy (a new token\'s secret is one); the dashboard\'s files may be', async () => {
    const { base } = await httpSetup();
    const created = await raw(base, 'POST', '/v1/tokens', { 'content-type': 'application/json' }, JSON.stringify({ name: queueName('t'), role: 'TOKEN_ROLE_ADMIN' }));
    expect(created.status).toBe(201);
    expect(created.headers['cache-control']).toBe('no-store');
    const listed = await fetch(`${base}/v1/queues`);
    await listed.arrayBuffer();
    expect(listed.headers.get('cache-control')).toBe('no-store');
    const page = await fetch(`${base}/`);
    await page.arrayBuffer();
    expect(page.headers.get('cache-control')).not.toBe('no-store');
  });
});

describe('auth on', () => {
  it('any Host is served with a token; a page of another origin still may not change anything', async () => {
    const { base, databaseUrl } = await httpSetup();
    const admin = await tokenInsert(databaseUrl, { role: 'admin' });
    const port = new URL(base).port;
    const authorization = `Bearer ${admin.secret}`;
    await waitFor(async () => (await raw(base, 'GET', '/v1/caller', {})).status === 401, { what: 'auth on' });
    expect((await raw(base, 'GET', '/v1/queues', { host: `evora.example:${port}`, authorization })).status).toBe(200);
    const forged = await raw(base, 'PUT', `/v1/queues/${queueName('on')}`, { authorization, origin: 'http://evil.example', 'content-type': 'text/plain' }, '{}');
    expect(forged.status).toBe(403);
  });
});

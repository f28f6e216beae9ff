import { serverSetup } from '../helpers/server-setup.js';

/** An HTTP answer: its status, its JSON body (null when it is not JSON), its text and headers. */
export interface HttpAnswer<T = any> {
  status: number;
  body: T;
  text: string;
  headers: Headers;
}

/** One request's options: a JSON body (a string or bytes: sent as is), a bearer token, extra headers, query parameters. */
export interface HttpCallOptions {
  body?: unknown;
  token?: string;
  headers?: Record<string, string>;
  query?: Record<string, string | string[]>;
}

/** Calls `base + path` with real fetch; a body is sent as JSON. */
export async function httpCall(base: string, method: string, path: string, opts: HttpCallOptions = {}): Promise<HttpAnswer> {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(opts.query ?? {})) for (const one of Array.isArray(v) ? v : [v]) params.append(k, one);
  const qs = params.toString();
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(`${base}${path}${qs ? `?${qs}` : ''}`, {
    method,
    headers,
    body: opts.body === undefined ? undefined : typeof opts.body === 'string' || opts.body instanceof Uint8Array ? opts.body : JSON.stringify(opts.body),
  });
  const text = await res.text();
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  return { status: res.status, body, text, headers: res.headers };
}

/**
 * A real Evora server with its HTTP port on (a free port on 127.0.0.1), stopped after the
 * file's tests (serverSetup's afterAll), and `api(method, path, opts)` bound to it; `token`
 * (when given) is sent on every call unless the call names its own.
 */
export async function httpSetup(overrides: Parameters<typeof serverSetup>[0] = {}, token?: string) {
  const setup = await serverSetup({ ...overrides, http: true });
  const base = setup.httpUrl;
  const api = (method: string, path: string, opts: HttpCallOptions = {}) => httpCall(base, method, path, { token, ...opts });
  return { ...setup, base, api };
}

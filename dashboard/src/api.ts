/**
 * The one door to the JSON API (/v1 on the same origin): every request goes through `api()`,
 * which adds the bearer token kept in sessionStorage, turns a `{code, message}` error body
 * (or any non-2xx answer) into an `ApiError`, and on 401 tells the app to ask for a token.
 * Nothing else in the dashboard calls fetch, so auth and error handling stay in one place.
 */

const BASE = '/v1';
const TOKEN_KEY = 'evora.token';

/** An API error: `code` is the gRPC code's name (NOT_FOUND…), `message` one readable line. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ApiError';
  }
}

/** One line for any error a query or an action ended with (what the UI shows). */
export function errorLine(error: unknown): string {
  if (error instanceof ApiError) return `${error.code}: ${error.message}`;
  if (error instanceof Error) return error.message.split('\n')[0] ?? 'error';
  return String(error);
}

/** The stored token, or null (auth off, or not signed in yet). */
export function getToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Keeps the token for this browser tab only (sessionStorage: gone when the tab closes). */
export function setToken(token: string | null): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  emitAuth();
}

/**
 * A boolean the UI reads through useSyncExternalStore: its value, a setter that tells the
 * subscribers when it changes, `notify` for a change kept elsewhere (the stored token), and
 * the subscription (which returns its unsubscribe).
 */
function flag(initial: boolean) {
  let value = initial;
  const listeners = new Set<() => void>();
  const notify = () => {
    for (const listener of listeners) listener();
  };
  return {
    get: () => value,
    set(next: boolean): void {
      if (value === next) return;
      value = next;
      notify();
    },
    notify,
    subscribe(listener: () => void): () => void {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** True after a 401, until a token is set; its subscribers also hear of token changes. */
const auth = flag(false);
function emitAuth(): void {
  auth.notify();
}

/** True after a 401, until a token is set: the app shows the token form meanwhile. */
export function isAuthRequired(): boolean {
  return auth.get();
}

/** Subscribes to auth changes (useSyncExternalStore); returns the unsubscribe. */
export function subscribeAuth(listener: () => void): () => void {
  return auth.subscribe(listener);
}

/** Marks the session as needing a token (a 401, or "sign out"). */
export function requireAuth(required: boolean): void {
  auth.set(required);
}

/**
 * Whether the last request found no server at all (the connection refused or dropped: the
 * server is down or restarting), until the next answer of any kind. While it is, the page
 * says so once, in a banner under the header (Layout), instead of one identical line per
 * view (ErrorLine leaves such an error to the banner).
 */
const unreachable = flag(false);

/** True while the server cannot be reached (see `unreachable`). */
export function isServerUnreachable(): boolean {
  return unreachable.get();
}

/** Subscribes to isServerUnreachable's changes (useSyncExternalStore); returns the unsubscribe. */
export function subscribeReach(listener: () => void): () => void {
  return unreachable.subscribe(listener);
}

/** Whether an error is the server not being reached at all (no answer), which the banner reports. */
export function isUnreachableError(error: unknown): boolean {
  return error instanceof ApiError && error.status === 0;
}

type Query = Record<string, string | number | readonly string[] | undefined>;

/**
 * Query parameters whose empty value is a value of its own, not "not given": proto3
 * `optional` fields (ListJobs' error_group: '' = the jobs without an error).
 */
const EMPTY_IS_A_VALUE: ReadonlySet<string> = new Set(['error_group']);

/** Builds `/v1<path>?…`: empty values are left out (but of EMPTY_IS_A_VALUE), arrays repeat the parameter. */
export function apiUrl(path: string, query?: Query): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value === undefined || (value === '' && !EMPTY_IS_A_VALUE.has(name))) continue;
    if (Array.isArray(value)) for (const item of value) params.append(name, item);
    else params.append(name, String(value));
  }
  const search = params.toString();
  return `${BASE}${path}${search ? `?${search}` : ''}`;
}

/** GET, POST or PUT a JSON body; resolves to the parsed answer or rejects with an ApiError. */
export async function api<T>(
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  path: string,
  options: { query?: Query; body?: unknown; signal?: AbortSignal } = {},
): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const token = getToken();
  if (token) headers.authorization = `Bearer ${token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(apiUrl(path, options.query), {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: options.signal,
    });
  } catch (cause) {
    if (cause instanceof DOMException && cause.name === 'AbortError') throw cause;
    unreachable.set(true);
    throw new ApiError(0, 'UNAVAILABLE', 'the server cannot be reached', { cause });
  }
  unreachable.set(false);
  const text = await response.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : {};
  } catch {
    parsed = undefined;
  }
  if (!response.ok) {
    if (response.status === 401) requireAuth(true);
    throw toError(response, parsed);
  }
  if (parsed === undefined) throw new ApiError(response.status, 'INTERNAL', `${method} ${path}: the answer is not JSON`);
  return parsed as T;
}

function toError(response: Response, body: unknown): ApiError {
  if (typeof body === 'object' && body !== null && 'code' in body && 'message' in body) {
    const { code, message } = body as { code: unknown; message: unknown };
    return new ApiError(response.status, String(code), String(message).split('\n')[0] ?? '');
  }
  const reason = response.statusText || 'error';
  return new ApiError(response.status, `HTTP ${response.status}`, `${reason} (${response.url.replace(location.origin, '')})`);
}

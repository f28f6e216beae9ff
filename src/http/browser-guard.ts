import type { IncomingHttpHeaders } from 'node:http';
import { hostIsLoopback } from '../domain/auth.js';

/**
 * What the HTTP API refuses of web pages, before any handler runs (docs/security.md "HTTP
 * and browsers"). A browser lets any page it shows send requests to any address, the
 * visitor's loopback included, and the API reads any content type as JSON; so, without
 * these checks, a page of any site could act on a server that serves anyone (auth off, the
 * default on loopback) in the visitor's name.
 *
 * What must stay true:
 * - a request that may change something (any method but GET, HEAD and OPTIONS) that a
 *   browser says comes from a page of another origin is refused (cross-site request
 *   forgery). Browsers say so in Sec-Fetch-Site (anything but `same-origin` and `none`),
 *   and older ones in an Origin whose host is not the request's Host: the rule of Go's
 *   net/http CrossOriginProtection. Clients that are not browsers send neither header, and
 *   the dashboard is the API's own origin;
 * - while the server serves anyone on loopback, a request whose Host is not a loopback name
 *   is refused: a page whose own name was made to resolve to 127.0.0.1 (DNS rebinding) is
 *   same-origin to the browser, but sends its own name as Host. With auth on nothing is
 *   served without a token, which such a page does not have.
 */

/** Methods that change nothing: a page of another origin may send them (it cannot read the answer: there is no CORS). */
const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The one value of a header (the first, when a client repeated it). */
function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The host (and port) of an Origin value; null for one that is not a URL ("null", from a sandboxed page or a file). */
function originHost(origin: string): string | null {
  try {
    return new URL(origin).host;
  } catch {
    return null;
  }
}

/** Why a request a page of another origin sent is refused, or null when it is not one (or changes nothing). */
export function crossOriginRefusal(method: string, headers: IncomingHttpHeaders): string | null {
  if (SAFE_METHODS.has(method)) return null;
  const site = headerValue(headers, 'sec-fetch-site');
  const origin = headerValue(headers, 'origin');
  const line = `a page of another origin${origin ? ` (${origin.slice(0, 100)})` : ''} may not send ${method} requests to this API`;
  if (site !== undefined) return site === 'same-origin' || site === 'none' ? null : line;
  if (origin === undefined) return null;
  return originHost(origin) === headerValue(headers, 'host')?.toLowerCase() ? null : line;
}

/** The host name of a Host header value, without its port ("[::1]:8080" -> "[::1]"). */
function hostName(host: string): string {
  if (host.startsWith('[')) return host.slice(0, host.indexOf(']') + 1);
  return host.split(':')[0] ?? '';
}

/**
 * Why a request to a server that serves anyone on loopback is refused for its Host, or null
 * when the Host is a loopback name (or there is none: only clients that are not browsers
 * omit it). The line says "without a token", not "without auth": the metrics port, and
 * /metrics with EVORA_METRICS_OPEN, serve without a token while auth is on.
 */
export function loopbackHostRefusal(headers: IncomingHttpHeaders): string | null {
  const host = headerValue(headers, 'host');
  if (host === undefined || hostIsLoopback(hostName(host))) return null;
  return `served without a token on loopback, this answers only requests addressed to localhost, 127.0.0.1 or [::1], not "${host.slice(0, 100)}"`;
}

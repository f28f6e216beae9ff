// Over 400 lines on purpose: the HttpServer class owns the request path end to end (guards,
// auth, body rules, the route table bound to the RPCs, errors and shutdown), read best in one place.
import { existsSync } from 'node:fs';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Server as TlsServer, SecureContextOptions } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { status as grpcStatus, type ServiceDefinition, type UntypedServiceImplementation } from '@grpc/grpc-js';
import fastifyStatic from '@fastify/static';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { DescMethod, JsonObject, JsonValue } from '@bufbuild/protobuf';
import { invalidArgument, isUnavailable, permissionDenied, serverStarting, serverStopping } from '../domain/errors.js';
import { hostIsLoopback } from '../domain/auth.js';
import { MAX_NAME_LENGTH, lineShown } from '../domain/validate.js';
import type { Logger } from '../logger.js';
import type { ServerMetrics } from '../telemetry/metrics.js';
import type { Authenticator } from '../auth/authenticator.js';
import { authRefusalLog } from '../grpc/auth.js';
import { HTTP_BODY_TOO_LARGE, HTTP_METHOD_NOT_ALLOWED, STATUS_HTTP, toServiceError } from '../grpc/status.js';
import { crossOriginRefusal, loopbackHostRefusal } from './browser-guard.js';
import { invokeUnary, RpcStatusError, type UnaryHandler } from './invoke.js';
import { jsonDuplicateKey } from './json-text.js';
import { openApiDocument, type OpenApiRoute } from './openapi.js';
import { bytesToJson, jsonFieldSet, jsonToBytes, methodDescriptor, queryToJson } from './proto-json.js';
import { HTTP_ROUTES, routeMethodsAt, routerPath, type HttpRoute } from './routes.js';

/**
 * The HTTP port (docs/api.md "HTTP"): the JSON API under /v1, the dashboard at / (built
 * into dist/dashboard; any other GET that is not a file gets its index.html, so client
 * routes survive a reload), /healthz (the process is up), /readyz (the services are in),
 * /metrics (Prometheus) and /openapi.json. Fastify 5.
 *
 * Every /v1 route runs the gRPC handler of its RPC in process (./invoke.ts): the server
 * binds this port right after the gRPC port, before the database is reached, and answers
 * 503 UNAVAILABLE until `ready()` hands it the same implementations the gRPC server swaps
 * in. Errors are `{ code, message }` with the HTTP status of src/grpc/status.ts's
 * STATUS_HTTP; anything unexpected is logged with its detail and answered 500 INTERNAL.
 */

/** The TLS of the gRPC port, as this port uses it (src/server/tls.ts's ReloadingServerCredentials). */
export interface HttpTls {
  httpsOptions(): SecureContextOptions & { requestCert: boolean; rejectUnauthorized: boolean };
  onReload(listener: (options: SecureContextOptions) => void): () => void;
}

/** What HttpServer.start needs. */
export interface HttpServerOptions {
  host: string;
  port: number;
  logger: Logger;
  /** The gRPC services' definitions: every route's RPC must be one of their methods. */
  definitions: readonly ServiceDefinition[];
  /** Largest accepted request body in bytes (the gRPC message limit). */
  bodyLimit: number;
  /** TLS as on the gRPC port; null: plain HTTP. */
  tls: HttpTls | null;
  /** The API version in /openapi.json. */
  version: string;
  /** The built dashboard's folder; default: dist/dashboard beside the modules. */
  dashboardDir?: string | null;
  /**
   * /metrics needs no token while auth is on (EVORA_METRICS_OPEN). Off (the default), it
   * needs a valid token of any role, as its labels name every queue.
   */
  metricsOpen?: boolean;
  /**
   * The longest a request may take to arrive, headers and body, before it is answered 408
   * and its connection closed; default HTTP_REQUEST_TIMEOUT_MS. Fastify turns Node's own
   * bound off, and a client that sent a body slowly, or part of one and then nothing, held
   * its connection for ever (many such clients: every file descriptor).
   */
  requestTimeoutMs?: number;
}

/** The default requestTimeoutMs: a 4 MiB body (the message limit) arrives in it at 70 kB/s. */
export const HTTP_REQUEST_TIMEOUT_MS = 60_000;

/** What the HTTP port asks of the token cache (src/auth/authenticator.ts) for its own paths. */
export type HttpAuth = Pick<Authenticator, 'authOn' | 'authenticateAsync'>;

/** A route ready to serve: its row, its RPC's descriptor and its service definition's (de)serializers. */
interface BoundRoute {
  route: HttpRoute;
  desc: DescMethod;
  /** The key of the method in its service definition and implementation ("getJob"). */
  key: string;
  serviceIndex: number;
  requestDeserialize: (bytes: Buffer) => unknown;
  responseSerialize: (value: unknown) => Buffer;
}

/** How long close() lets requests in flight end on their own before cutting them. */
const HTTP_SHUTDOWN_GRACE_MS = 1000;

/**
 * The built dashboard: run from source (tsx, tests), the checkout's build folder
 * (src/http -> dist/dashboard); compiled, beside the modules (dist/src/http ->
 * dist/dashboard). A build has assets/; the dashboard's sources (dashboard/) do not.
 */
function dashboardDirDefault(): string | null {
  for (const rel of ['../../dist/dashboard/', '../../dashboard/']) {
    const dir = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(`${dir}index.html`) && existsSync(`${dir}assets`)) return dir;
  }
  return null;
}

/** The HTTP port's server. */
export class HttpServer {
  private implementations: readonly UntypedServiceImplementation[] | null = null;
  /** Whether this server is in a database outage now (/readyz); set by ready(). */
  private databaseDown: () => boolean = () => false;
  /** Set by notReady(): why /v1 calls are refused when there are no implementations. */
  private stopping = false;
  private metrics: ServerMetrics | null = null;
  private readonly inFlight = new Set<AbortController>();
  private unsubscribeTls: (() => void) | null = null;
  private openApi: Record<string, unknown> | null = null;
  /** The token cache: whether calls need a token now, and /metrics's check; set by ready(). */
  private auth: HttpAuth | null = null;

  private constructor(
    private readonly app: FastifyInstance,
    private readonly routes: readonly BoundRoute[],
    private readonly logger: Logger,
    readonly port: number,
    private readonly version: string,
    /** Bound to a loopback address: with auth off it serves anyone, so only loopback names (./browser-guard.ts). */
    private readonly loopback: boolean,
  ) {}

  /**
   * Binds the port and serves (503 on /v1 until ready()). A taken port, or one that may
   * not be bound, fails with one line ("cannot listen on HTTP 127.0.0.1:8080: the address
   * is already in use").
   */
  static async start(opts: HttpServerOptions): Promise<HttpServer> {
    const logger = opts.logger;
    const routes = routesBind(opts.definitions);
    const tls = opts.tls;
    const requestTimeout = opts.requestTimeoutMs ?? HTTP_REQUEST_TIMEOUT_MS;
    // Node looks for requests past their time every connectionsCheckingInterval (30 s by
    // default), and bounds a request by the longer of requestTimeout and headersTimeout (60 s).
    const checking = { connectionsCheckingInterval: Math.min(30_000, Math.ceil(requestTimeout / 4)), headersTimeout: Math.min(60_000, requestTimeout) };
    const app = Fastify({
      logger: false,
      bodyLimit: opts.bodyLimit,
      requestTimeout,
      http: checking,
      // A name may be 128 characters (MAX_NAME_LENGTH), 384 once each is escaped as %XX.
      // A trailing slash names the same route: /v1/jobs/?queue=a is ListJobs, not GetJob of id "".
      routerOptions: { maxParamLength: MAX_PATH_PARAM_LENGTH, ignoreTrailingSlash: true },
      // The router's own refusals (a malformed URL, an over-long parameter) in our error shape.
      frameworkErrors: (err, _request, reply) => errorSend(reply, invalidArgument(frameworkErrorLine(err), { cause: err }), logger, {}),
      // A request too malformed to reach the router (a bad Content-Length, a broken header).
      clientErrorHandler: clientErrorSend,
      ...(tls ? { https: { ...tls.httpsOptions(), ...checking } } : {}),
    }) as unknown as FastifyInstance;
    const dashboardDir = opts.dashboardDir === undefined ? dashboardDirDefault() : opts.dashboardDir;
    let self: HttpServer | null = null;
    const server = () => {
      if (!self) throw serverStarting();
      return self;
    };

    // JSON bodies: an empty body is an empty message; any content type is read as JSON (curl -d).
    // A compressed body is refused by its header: read as text, its bytes made an unreadable line.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer' }, (req, body, done) => {
      const encoding = req.headers['content-encoding']?.trim();
      if (encoding && encoding.toLowerCase() !== 'identity') {
        return done(invalidArgument(`the request body is encoded (Content-Encoding: ${encoding.slice(0, 40)}): send it as plain JSON`), undefined);
      }
      let text: string;
      try {
        text = utf8Fatal.decode(body as Buffer);
      } catch (err) {
        return done(invalidArgument(bodyNotUtf8Line(req.headers['content-type']), { cause: err }), undefined);
      }
      if (text.trim() === '') return done(null, undefined);
      let value: unknown;
      try {
        value = JSON.parse(text) as unknown;
      } catch (err) {
        return done(invalidArgument(`the request body is not JSON: ${lineShown((err as Error).message)}`, { cause: err }), undefined);
      }
      const twice = jsonDuplicateKey(text);
      if (twice !== null) {
        const key = JSON.stringify(twice.length > 100 ? `${twice.slice(0, 100)}…` : twice);
        return done(invalidArgument(`the request body has the key ${key} twice in one object: send each key once`), undefined);
      }
      done(null, value);
    });

    // No page of another site may frame the dashboard (clickjacking its buttons), and no
    // browser may read an answer as another type than it says (a JSON error quoting a request
    // value sniffed as HTML or script): every answer says so.
    app.addHook('onRequest', async (_request, reply) => {
      reply.header('x-frame-options', 'DENY').header('content-security-policy', "frame-ancestors 'none'").header('x-content-type-options', 'nosniff');
    });

    app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, request, reply) => {
      if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
        const { name, http } = HTTP_BODY_TOO_LARGE;
        return reply.code(http).send({ code: name, message: `the request body is over ${opts.bodyLimit} bytes` });
      }
      if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
        // Fastify refused the request itself (a malformed URL or header, a bad content length).
        return errorSend(reply, invalidArgument(err.message.split('\n')[0] ?? err.message, { cause: err }), logger, {});
      }
      return errorSend(reply, err, logger, { url: request.url });
    });

    // The API's answers are never stored by a browser or a proxy: one carries a new token's
    // secret (POST /v1/tokens), the others the state of the moment.
    for (const bound of routes) {
      app.route({
        method: bound.route.method,
        url: routerPath(bound.route.path),
        handler: async (request, reply) => {
          reply.header('cache-control', 'no-store');
          return server().handle(bound, request, reply);
        },
      });
    }

    app.get('/healthz', async (_req, reply) => reply.type('text/plain').send('ok\n'));
    // Readiness (a Kubernetes readinessProbe): ready once the services are in, and not while
    // this server's statements find PostgreSQL unreachable (every call would be answered
    // UNAVAILABLE), so that a server cut off from the database alone leaves the rotation while
    // the others serve; liveness (/healthz) never follows the database: the outage is survived.
    app.get('/readyz', async (_req, reply) => {
      if (!self?.implementations) return reply.code(503).type('text/plain').send('not ready\n');
      if (self.databaseDown()) return reply.code(503).type('text/plain').send('not ready: database unavailable\n');
      return reply.type('text/plain').send('ready\n');
    });
    app.get('/metrics', async (request, reply) => {
      const metrics = self?.metrics;
      if (!self || !metrics) return reply.code(503).type('text/plain').send('not ready\n');
      // Its labels name every queue: with auth on, a valid token of any role (a token limited
      // to queues sees every label too), refused as the API refuses (401, one warn line).
      if (!opts.metricsOpen) {
        const refusal = await self.tokenRefusal(request, '/metrics');
        if (refusal) return errorSend(reply, refusal, logger, {});
      }
      // Served without a token on loopback (auth off, or EVORA_METRICS_OPEN): only to a
      // loopback name, as the API is, or a page rebound to 127.0.0.1 could read every queue's name.
      const rebound = self.loopbackRefusal(request, 'GET /metrics', opts.metricsOpen === true);
      if (rebound) return errorSend(reply, rebound, logger, {});
      try {
        const text = await metrics.registry.metrics();
        return reply.type(metrics.registry.contentType).send(text);
      } catch (err) {
        logger[isUnavailable(err) ? 'debug' : 'error']({ err }, 'metrics collection failed');
        return reply.code(500).type('text/plain').send('metrics collection failed\n');
      }
    });
    app.get('/openapi.json', async (_req, reply) => reply.send(server().openApiDoc()));

    if (dashboardDir) {
      // A dotfile is never the dashboard's (the build has none): one left in the folder by a
      // deploy (.env, .git/) is not served, as @fastify/static would by default.
      await app.register(fastifyStatic, { root: dashboardDir, prefix: '/', wildcard: true, dotfiles: 'ignore' });
      // The page links its icon (/favicon.svg); a browser showing anything else of this port
      // (/openapi.json, /metrics) asks /favicon.ico, which points there rather than being a 404.
      app.get('/favicon.ico', async (_req, reply) => reply.redirect('/favicon.svg', 302));
    }
    app.setNotFoundHandler((request, reply) => {
      const path = request.url.split('?')[0] ?? '/';
      const api = /^\/(v1|healthz|readyz|metrics|openapi\.json)(\/|$)/.test(path);
      // A missing file of the dashboard (an old build's asset, /robots.txt) is a 404, not
      // the page; a client route whose last segment has a dot (/queues/billing.invoices) is
      // the page. The build puts its files at the top or under /assets/, nowhere else.
      const file = /^\/(assets\/|[^/]*\.[^/]*$)/.test(path);
      // An API path with a segment past any escaped name: the router refuses it (400) when no
      // other route can take it, and the dashboard's wildcard route (when built) does take
      // it; refuse it here too, so the answer does not depend on whether the dashboard is built.
      if (api && path.split('/').some((segment) => segment.length > MAX_PATH_PARAM_LENGTH)) {
        return errorSend(reply, invalidArgument(PARAM_TOO_LONG_LINE), logger, {});
      }
      if (request.method === 'GET' && !api && !file && dashboardDir) return reply.type('text/html').sendFile('index.html');
      if (request.method === 'GET' && !api && !dashboardDir) {
        return reply.code(404).type('text/plain').send('the dashboard is not built: run npm run build\n');
      }
      // A path the API serves, asked with another method: 405 (OPTIONS: 204) with Allow.
      const allowed = path.startsWith('/v1/') ? routeMethodsAt(path) : [];
      if (allowed.length > 0 && !allowed.includes(request.method)) return methodNotAllowedSend(reply, path, request.method, allowed);
      return reply.code(404).send({ code: 'NOT_FOUND', message: `no route ${request.method} ${path}` });
    });

    try {
      await app.listen({ host: opts.host, port: opts.port });
    } catch (err) {
      const reason = LISTEN_ERRORS[(err as NodeJS.ErrnoException).code ?? ''] ?? (err as Error).message;
      await app.close().catch(() => undefined);
      throw new Error(`cannot listen on HTTP ${opts.host}:${opts.port}: ${reason}`, { cause: err });
    }
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : opts.port;
    self = new HttpServer(app, routes, logger, port, opts.version, hostIsLoopback(opts.host));
    if (tls) {
      self.unsubscribeTls = tls.onReload((options) => (app.server as unknown as TlsServer).setSecureContext(options));
    }
    if (!dashboardDir) logger.warn('the dashboard is not built (npm run build): / answers 404');
    return self;
  }

  /**
   * The services are in: /v1 calls run the handlers, /readyz says ready (unless
   * `databaseDown()`), /metrics serves `metrics`. `auth` is the token cache: whether calls
   * need a token, and the check of /metrics.
   */
  ready(implementations: readonly UntypedServiceImplementation[], metrics: ServerMetrics, auth: HttpAuth, databaseDown: () => boolean = () => false): void {
    this.databaseDown = databaseDown;
    this.implementations = implementations;
    this.metrics = metrics;
    this.auth = auth;
  }

  /** Whether calls need a token now (before ready(): yes). */
  private authOn(): boolean {
    return this.auth?.authOn ?? true;
  }

  /**
   * Why a request to one of the port's own paths (not a /v1 route, whose handler checks
   * its token) is refused, logged as the API logs refusals; null when its token is valid
   * or auth is off. UNAUTHENTICATED (401), or UNAVAILABLE when the token cache is stale.
   */
  private async tokenRefusal(request: FastifyRequest, path: string): Promise<unknown> {
    const header = request.headers.authorization;
    try {
      if (!this.auth) throw serverStarting();
      await this.auth.authenticateAsync(Array.isArray(header) ? header[0] : header);
      return null;
    } catch (err) {
      authRefusalLog(this.logger, path, null, err, `${request.ip}:${request.socket.remotePort ?? 0}`);
      return err;
    }
  }

  /**
   * PERMISSION_DENIED (logged as a refusal) for a request to a server bound to loopback that
   * serves it without a token (auth off, or `open`) and is addressed to a name that is not
   * loopback (./browser-guard.ts: DNS rebinding); null otherwise.
   */
  private loopbackRefusal(request: FastifyRequest, route: string, open: boolean): Error | null {
    if (!this.loopback || (this.authOn() && !open)) return null;
    const reason = loopbackHostRefusal(request.headers);
    if (!reason) return null;
    this.logger.warn({ route, reason, peer: request.ip }, 'request refused: sent by a page of another site');
    return permissionDenied(reason);
  }

  /** Shutdown has begun: /v1 answers 503 and /readyz not ready (requests in flight go on). */
  notReady(): void {
    this.implementations = null;
    this.stopping = true;
  }

  /** Stops taking connections, lets requests in flight end for a grace second, then cuts them. */
  async close(): Promise<void> {
    this.notReady();
    this.unsubscribeTls?.();
    const timer = setTimeout(() => {
      for (const ac of this.inFlight) ac.abort();
      this.app.server.closeAllConnections();
    }, HTTP_SHUTDOWN_GRACE_MS);
    try {
      await this.app.close();
    } finally {
      clearTimeout(timer);
    }
  }

  /** The OpenAPI document of the routes served (built once). */
  private openApiDoc(): Record<string, unknown> {
    this.openApi ??= openApiDocument(
      this.routes.map((r): OpenApiRoute => ({ route: r.route, method: r.desc })),
      { version: this.version },
    );
    return this.openApi;
  }

  /** One /v1 request: JSON in, the RPC's handler, JSON out. */
  private async handle(bound: BoundRoute, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    if (bound.route.pathParams) {
      // The router hands GET /v1/jobs/batch to GetJob (a job of id "batch"); that path is POST's.
      const path = request.url.split('?')[0] ?? '/';
      const allowed = routeMethodsAt(path);
      if (!allowed.includes(request.method)) return methodNotAllowedSend(reply, path, request.method, allowed);
    }
    const implementations = this.implementations;
    if (!implementations) return errorSend(reply, this.stopping ? serverStopping() : serverStarting(), this.logger, {});
    const handler = implementations[bound.serviceIndex]?.[bound.key] as UnaryHandler | undefined;
    if (!handler) return errorSend(reply, new Error(`no handler for ${bound.route.rpc}`), this.logger, {});
    const route = `${request.method} ${bound.route.path}`;
    const crossOrigin = crossOriginRefusal(request.method, request.headers);
    if (crossOrigin) this.logger.warn({ route, reason: crossOrigin, peer: request.ip }, 'request refused: sent by a page of another site');
    const refusal = crossOrigin ? permissionDenied(crossOrigin) : this.loopbackRefusal(request, route, false);
    if (refusal) return errorSend(reply, refusal, this.logger, {});
    const ac = new AbortController();
    this.inFlight.add(ac);
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) ac.abort();
    });
    try {
      const bytes = jsonToBytes(bound.desc.input, requestJson(bound, request));
      const req = bound.requestDeserialize(Buffer.from(bytes));
      const header = request.headers.authorization;
      const res = await invokeUnary(handler, req, {
        authorization: Array.isArray(header) ? header[0] : header,
        peer: `${request.ip}:${request.socket.remotePort ?? 0}`,
        signal: ac.signal,
      });
      const json = bytesToJson(bound.desc.output, bound.responseSerialize(res));
      const created = bound.route.created === 'always' || (bound.route.created === 'field' && (res as { created?: boolean }).created === true);
      return reply.code(created ? 201 : 200).send(json);
    } catch (err) {
      return errorSend(reply, err, this.logger, { method: bound.route.rpc });
    } finally {
      this.inFlight.delete(ac);
    }
  }
}

/**
 * The request JSON of a call: the body (whole, or as one field), then the header, path and
 * query values; a body value that disagrees with a header or path value is refused.
 */
function requestJson(bound: BoundRoute, request: FastifyRequest): JsonObject {
  const { route, desc } = bound;
  // Fastify reads no body of a GET: one sent anyway would be dropped unread, its filters too.
  if (route.method === 'GET' && hasBody(request)) {
    throw invalidArgument(`${route.method} ${route.path} takes no body: send its fields as query parameters`);
  }
  const body = request.body as JsonValue | undefined;
  if (body !== undefined && (typeof body !== 'object' || body === null || Array.isArray(body))) {
    throw invalidArgument('the request body must be a JSON object');
  }
  let json: JsonObject;
  if (route.body === 'whole') json = { ...(body ?? {}) };
  else if (route.body === 'none') {
    if (body && Object.keys(body).length > 0) throw invalidArgument(`${route.method} ${route.path} takes no body`);
    json = {};
  } else json = body ? { [route.body.field]: { ...body } } : {};
  const query = queryToJson(desc.input, request.query as Record<string, string | string[]>);
  for (const [key, value] of Object.entries(query)) jsonFieldSet(desc.input, json, key, value, 'query');
  for (const [header, field] of Object.entries(route.headers ?? {})) {
    const value = request.headers[header];
    if (typeof value !== 'string') continue;
    // Header bytes have no agreed encoding: curl sends UTF-8, which Node reads as Latin-1
    // ("kü" became "kÃ¼", a key no other client would send), so only ASCII is taken.
    if (!/^[ -~]*$/.test(value)) {
      throw invalidArgument(`the ${header} header must be printable ASCII: send a key with other characters as ${field} in the body`);
    }
    // Empty, it would set no key (proto3's default) and each retry would submit again.
    if (value === '') throw invalidArgument(`the ${header} header is empty: send a value, or leave the header out`);
    jsonFieldSet(desc.input, json, field, value, `${header} header`);
  }
  for (const header of ROUTE_HEADERS) {
    if (route.headers?.[header] === undefined && request.headers[header] !== undefined) {
      throw invalidArgument(`${route.method} ${route.path} takes no ${header} header (it would be ignored): ${ROUTE_HEADER_HINTS[header] ?? 'send its fields in the body'}`);
    }
  }
  const params = request.params as Record<string, string>;
  for (const [param, field] of Object.entries(route.pathParams ?? {})) {
    jsonFieldSet(desc.input, json, field, params[param] ?? '', `path`);
  }
  return json;
}

/**
 * Reads body bytes as text: UTF-8, the only encoding of JSON between systems (RFC 8259),
 * whatever the Content-Type's charset says; a leading byte order mark is dropped. Bytes that
 * are not UTF-8 throw: decoded leniently, a Latin-1 "café" became "caf\uFFFD" in the stored payload.
 */
const utf8Fatal = new TextDecoder('utf-8', { fatal: true });

/** The refusal of a body that is not UTF-8, naming the charset its Content-Type claims, if any. */
function bodyNotUtf8Line(contentType: string | undefined): string {
  const charset = /;\s*charset\s*=\s*"?([\w.:+-]{1,40})/i.exec(contentType ?? '')?.[1];
  return `the request body is not UTF-8${charset ? ` (its Content-Type says charset=${charset})` : ''}: send JSON as UTF-8 text`;
}

/**
 * The headers some route reads as a request field (Idempotency-Key). Sent to any other route
 * they are refused, not ignored: a client that sent Idempotency-Key with a batch or a
 * schedule trigger believed its retry safe, and each retry submitted its jobs again.
 */
const ROUTE_HEADERS = [...new Set(HTTP_ROUTES.flatMap((r) => Object.keys(r.headers ?? {})))];

/** What to send instead of a header the route does not take. */
const ROUTE_HEADER_HINTS: Record<string, string> = {
  'idempotency-key': 'only POST /v1/jobs takes it; a batch takes idempotencyKey on each job, a trigger triggerId',
};

/** Whether a request carries a body (a Content-Length above 0, or chunks). */
function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return (length !== undefined && length !== '0') || request.headers['transfer-encoding'] !== undefined;
}

/**
 * The one line of a router refusal. Fastify's own echo the whole path back (a 500-character
 * name made a 550-character line) and misspell "exceeding"; a refusal must stay one short,
 * readable line whatever was sent.
 */
function frameworkErrorLine(err: Error & { code?: string }): string {
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return PARAM_TOO_LONG_LINE;
  if (err.code === 'FST_ERR_BAD_URL') return 'the URL is not valid: a path segment is not well-formed percent-encoded UTF-8';
  const line = err.message.split('\n')[0] ?? '';
  return lineShown(line);
}

/** The longest path parameter the router takes: a name of MAX_NAME_LENGTH, each character escaped. */
const MAX_PATH_PARAM_LENGTH = 3 * MAX_NAME_LENGTH;

/** The refusal of a path segment over MAX_PATH_PARAM_LENGTH, by the router or the not-found handler alike. */
const PARAM_TOO_LONG_LINE = `a path segment is over ${MAX_PATH_PARAM_LENGTH} characters (a name is at most ${MAX_NAME_LENGTH}, each character escaped at most 3)`;

/**
 * Answers a request Node's HTTP parser refused (Fastify's clientErrorHandler) as every other
 * refusal is answered, `{ code, message }`, then closes the connection: what follows on it
 * cannot be read. A reset connection, or one that cannot be written, is only closed.
 */
function clientErrorSend(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [http, code, message] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'DEADLINE_EXCEEDED', 'the request was not received in time']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'INVALID_ARGUMENT', 'the request headers are too large']
        : [400, 'INVALID_ARGUMENT', `the request is not valid HTTP (${err.code ?? err.message})`];
  const body = JSON.stringify({ code, message });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${http} ${STATUS_CODES[http]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/** Answers a path the API serves asked with a method it does not take: 405 with Allow (OPTIONS: 204). */
function methodNotAllowedSend(reply: FastifyReply, path: string, method: string, allowed: readonly string[]): FastifyReply {
  const allow = [...allowed, 'OPTIONS'].join(', ');
  if (method === 'OPTIONS') return reply.code(204).header('allow', allow).send();
  const { name, http } = HTTP_METHOD_NOT_ALLOWED;
  return reply.code(http).header('allow', allow).send({ code: name, message: `${path} does not take ${method} (it takes ${allow})` });
}

/** Answers an error: `{ code, message }` with the HTTP status of its gRPC code (STATUS_HTTP). */
function errorSend(reply: FastifyReply, err: unknown, logger: Logger, context: Record<string, unknown>): FastifyReply {
  let code: number;
  let message: string;
  if (err instanceof RpcStatusError) {
    code = err.code;
    message = err.details;
  } else {
    // Domain errors keep their code and line; anything else is logged and answered INTERNAL.
    const status = toServiceError(err, logger, context);
    code = status.code ?? grpcStatus.INTERNAL;
    message = status.details ?? 'internal error';
  }
  const entry = STATUS_HTTP[code as keyof typeof STATUS_HTTP] ?? { name: 'INTERNAL', http: 500 };
  // A 401 names the scheme it wants (RFC 9110 15.5.2: it must): HTTP clients that follow
  // challenges, and people reading the headers, learn that a bearer token is asked for.
  if (entry.http === 401) reply.header('www-authenticate', 'Bearer realm="evora"');
  return reply.code(entry.http).send({ code: entry.name, message });
}

/** Binds the route table to the service definitions. A row whose RPC is missing is a bug (thrown). */
function routesBind(definitions: readonly ServiceDefinition[]): BoundRoute[] {
  const out: BoundRoute[] = [];
  for (const route of HTTP_ROUTES) {
    const desc = methodDescriptor(route.rpc);
    const hit = definitions
      .flatMap((definition, serviceIndex) => Object.entries(definition).map(([key, def]) => ({ key, serviceIndex, def })))
      .find((m) => m.def.path === route.rpc);
    if (!desc || !hit) {
      throw new Error(`HTTP route ${route.method} ${route.path}: ${route.rpc} is not a method of the services (src/http/routes.ts)`);
    }
    if (hit.def.requestStream || hit.def.responseStream) throw new Error(`HTTP route ${route.path}: ${route.rpc} is not unary`);
    out.push({
      route,
      desc,
      key: hit.key,
      serviceIndex: hit.serviceIndex,
      requestDeserialize: hit.def.requestDeserialize as (bytes: Buffer) => unknown,
      responseSerialize: hit.def.responseSerialize as (value: unknown) => Buffer,
    });
  }
  return out;
}

const LISTEN_ERRORS: Record<string, string> = {
  EADDRINUSE: 'the address is already in use',
  EACCES: 'permission denied',
  EADDRNOTAVAIL: 'the address is not available on this machine',
};

/**
 * The HTTP API's route table (docs/api.md "HTTP"): each row maps a method and path under
 * /v1 to one unary RPC. The server registers these rows (src/http/http-server.ts) and the
 * OpenAPI document is generated from them (src/http/openapi.ts), so a route cannot exist
 * in one and not the other. What a row says:
 *  - `path`: OpenAPI style, `{param}` segments;
 *  - `rpc`: the method's full path; its request and response messages are the HTTP bodies;
 *  - `pathParams`: path parameter -> request field (proto name; dotted for a nested one);
 *  - `headers`: HTTP header (lower case) -> request field (Idempotency-Key);
 *  - `body`: 'whole' (the body is the request message, minus what the path fills),
 *    `{ field }` (the body is that field of the request: PUT /v1/schedules/{name} sends a
 *    Schedule), or 'none' (nothing but the path and query; an empty body or {} is allowed);
 *  - `created`: 'always' answers 201; 'field' answers 201 when the response's `created`
 *    is true and 200 otherwise (a replayed submit).
 * Query parameters fill the request's fields by name on every route (proto or JSON name).
 */
export interface HttpRoute {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  rpc: string;
  summary: string;
  pathParams?: Readonly<Record<string, string>>;
  headers?: Readonly<Record<string, string>>;
  body: 'whole' | 'none' | { field: string };
  created?: 'always' | 'field';
}

const J = '/evora.v1.JobService/';
const W = '/evora.v1.WorkerService/';
const Q = '/evora.v1.QueueService/';
const S = '/evora.v1.ScheduleService/';
const T = '/evora.v1.TokenService/';
const A = '/evora.v1.AuditService/';

/** The routes of the RPCs in the generated code. */
export const HTTP_ROUTES: readonly HttpRoute[] = [
  // Jobs
  { method: 'POST', path: '/v1/jobs', rpc: `${J}SubmitJob`, summary: 'Submit a job (Idempotency-Key header: the idempotency key; 201 created, 200 replay)', body: 'whole', headers: { 'idempotency-key': 'idempotency_key' }, created: 'field' },
  { method: 'POST', path: '/v1/jobs/batch', rpc: `${J}SubmitJobs`, summary: 'Submit several jobs in one transaction', body: 'whole' },
  { method: 'GET', path: '/v1/jobs', rpc: `${J}ListJobs`, summary: 'List jobs, newest first (query: queue, states, type, idempotency_key, error_group, page_size, page_token)', body: 'none' },
  { method: 'GET', path: '/v1/jobs/{id}', rpc: `${J}GetJob`, summary: 'A job and its attempts', body: 'none', pathParams: { id: 'id' } },
  { method: 'GET', path: '/v1/jobs/{id}/attempts', rpc: `${J}ListJobAttempts`, summary: "A job's attempts", body: 'none', pathParams: { id: 'id' } },
  { method: 'POST', path: '/v1/jobs/{id}/cancel', rpc: `${J}CancelJob`, summary: 'Cancel a job', body: 'none', pathParams: { id: 'id' } },
  { method: 'POST', path: '/v1/jobs/{id}/retry', rpc: `${J}RetryJob`, summary: 'Retry a dead-lettered or cancelled job', body: 'none', pathParams: { id: 'id' } },
  { method: 'POST', path: '/v1/jobs/retry', rpc: `${J}RetryJobs`, summary: 'Retry every job matching a filter', body: 'whole' },
  { method: 'POST', path: '/v1/jobs/purge', rpc: `${J}PurgeJobs`, summary: 'Delete finished jobs matching a filter', body: 'whole' },
  { method: 'POST', path: '/v1/jobs/cancel', rpc: `${J}CancelJobs`, summary: 'Cancel every pending, waiting or running job matching a filter', body: 'whole' },
  { method: 'GET', path: '/v1/dead-letters', rpc: `${J}ListDeadLetterGroups`, summary: 'Dead-lettered jobs grouped by queue, type and error (query: queue, limit)', body: 'none' },
  // Worker twins of the Work stream
  { method: 'POST', path: '/v1/jobs/claim', rpc: `${W}ClaimJobs`, summary: 'Claim jobs (long-poll up to `wait`)', body: 'whole' },
  { method: 'POST', path: '/v1/jobs/{id}/extend', rpc: `${W}ExtendLease`, summary: "Extend a held job's lease", body: 'whole', pathParams: { id: 'job_id' } },
  { method: 'POST', path: '/v1/jobs/{id}/complete', rpc: `${W}CompleteJob`, summary: 'Complete a held job', body: 'whole', pathParams: { id: 'job_id' } },
  { method: 'POST', path: '/v1/jobs/{id}/fail', rpc: `${W}FailJob`, summary: 'Fail a held job', body: 'whole', pathParams: { id: 'job_id' } },
  { method: 'POST', path: '/v1/jobs/{id}/snooze', rpc: `${W}SnoozeJob`, summary: 'Put a held job back for later', body: 'whole', pathParams: { id: 'job_id' } },
  { method: 'POST', path: '/v1/jobs/{id}/progress', rpc: `${W}ReportProgress`, summary: "Report a held job's progress", body: 'whole', pathParams: { id: 'job_id' } },
  // Queues and workers
  { method: 'GET', path: '/v1/queues', rpc: `${Q}ListQueues`, summary: 'Every queue', body: 'none' },
  { method: 'GET', path: '/v1/queues/{name}', rpc: `${Q}GetQueue`, summary: 'A queue', body: 'none', pathParams: { name: 'name' } },
  { method: 'PUT', path: '/v1/queues/{name}', rpc: `${Q}UpsertQueue`, summary: "Create a queue or change its settings (201 when created)", body: 'whole', pathParams: { name: 'name' }, created: 'field' },
  { method: 'POST', path: '/v1/queues/{name}/pause', rpc: `${Q}PauseQueue`, summary: 'Pause a queue', body: 'none', pathParams: { name: 'name' } },
  { method: 'POST', path: '/v1/queues/{name}/resume', rpc: `${Q}ResumeQueue`, summary: 'Resume a queue', body: 'none', pathParams: { name: 'name' } },
  { method: 'DELETE', path: '/v1/queues/{name}', rpc: `${Q}DeleteQueue`, summary: 'Delete an empty queue and its settings (409 when it has jobs or schedules)', body: 'none', pathParams: { name: 'name' } },
  { method: 'GET', path: '/v1/queue-stats', rpc: `${Q}ListQueueStats`, summary: "Every queue's stats", body: 'none' },
  { method: 'GET', path: '/v1/queues/{name}/stats', rpc: `${Q}GetQueueStats`, summary: "A queue's stats", body: 'none', pathParams: { name: 'name' } },
  { method: 'GET', path: '/v1/queue-series', rpc: `${Q}GetQueueSeries`, summary: 'Per-minute counts and latencies (query: queue, minutes)', body: 'none' },
  { method: 'GET', path: '/v1/workers', rpc: `${W}ListWorkers`, summary: 'Live worker sessions across servers (query: queue)', body: 'none' },
  // Schedules
  { method: 'GET', path: '/v1/schedules', rpc: `${S}ListSchedules`, summary: 'Every schedule', body: 'none' },
  { method: 'GET', path: '/v1/schedules/{name}', rpc: `${S}GetSchedule`, summary: 'A schedule', body: 'none', pathParams: { name: 'name' } },
  { method: 'PUT', path: '/v1/schedules/{name}', rpc: `${S}UpsertSchedule`, summary: 'Create or replace a schedule (the body is a Schedule; 201 when created)', body: { field: 'schedule' }, pathParams: { name: 'schedule.name' }, created: 'field' },
  { method: 'DELETE', path: '/v1/schedules/{name}', rpc: `${S}DeleteSchedule`, summary: 'Delete a schedule', body: 'none', pathParams: { name: 'name' } },
  { method: 'POST', path: '/v1/schedules/{name}/pause', rpc: `${S}PauseSchedule`, summary: 'Pause a schedule', body: 'none', pathParams: { name: 'name' } },
  { method: 'POST', path: '/v1/schedules/{name}/resume', rpc: `${S}ResumeSchedule`, summary: 'Resume a schedule', body: 'none', pathParams: { name: 'name' } },
  { method: 'POST', path: '/v1/schedules/{name}/trigger', rpc: `${S}TriggerSchedule`, summary: 'Run a schedule now', body: 'whole', pathParams: { name: 'name' } },
  // The caller, tokens and the audit log
  { method: 'GET', path: '/v1/caller', rpc: `${T}GetCaller`, summary: 'Who the caller is: auth on or off, role, queues', body: 'none' },
  { method: 'GET', path: '/v1/tokens', rpc: `${T}ListTokens`, summary: 'API tokens (query: include_revoked)', body: 'none' },
  { method: 'POST', path: '/v1/tokens', rpc: `${T}CreateToken`, summary: 'Create an API token (its secret is in this answer only)', body: 'whole', created: 'always' },
  { method: 'POST', path: '/v1/tokens/{idOrName}/revoke', rpc: `${T}RevokeToken`, summary: 'Revoke a token by id or name', body: 'none', pathParams: { idOrName: 'token' } },
  { method: 'GET', path: '/v1/audit', rpc: `${A}ListAuditEvents`, summary: 'The audit log, newest first', body: 'none' },
];

/** "/v1/jobs/{id}" as the router writes it ("/v1/jobs/:id"). */
export function routerPath(path: string): string {
  return path.replace(/\{(\w+)\}/g, ':$1');
}

/** Each route's path as a pattern over concrete paths, and how many of its segments are literal. */
const ROUTE_PATTERNS = HTTP_ROUTES.map((route) => ({
  route,
  pattern: new RegExp(`^${route.path.replace(/\{\w+\}/g, '[^/]+')}$`),
  literals: route.path.split('/').filter((segment) => segment !== '' && !segment.startsWith('{')).length,
}));

/**
 * The methods the route table serves at a concrete path ("/v1/jobs/abc/cancel" -> POST),
 * with HEAD wherever GET is (the router answers HEAD for every GET route). Empty: no route
 * has that path. It exists so that a known path asked with another method is answered 405
 * with an Allow header rather than 404 (src/http/http-server.ts): both must read this table.
 * A literal segment wins over a parameter, as in the router: /v1/jobs/batch is POST only,
 * not also GET as a job whose id is "batch".
 */
export function routeMethodsAt(path: string): string[] {
  // As the router (ignoreTrailingSlash), a trailing slash names the same path.
  const bare = path.length > 1 ? path.replace(/\/$/, '') : path;
  const matches = ROUTE_PATTERNS.filter((p) => p.pattern.test(bare));
  const most = Math.max(0, ...matches.map((p) => p.literals));
  const methods = new Set(matches.filter((p) => p.literals === most).map((p) => p.route.method as string));
  if (methods.has('GET')) methods.add('HEAD');
  return [...methods].sort();
}

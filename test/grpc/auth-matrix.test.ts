import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { METHOD_PERMISSIONS } from '../../src/grpc/auth.js';
import { AuditServiceService, TokenServiceService } from '../../src/gen/evora/v1/auth.js';
import { JobFilter, JobServiceService, SubmitJobRequest } from '../../src/gen/evora/v1/job.js';
import { QueueServiceService } from '../../src/gen/evora/v1/queue.js';
import { Schedule, ScheduleServiceService } from '../../src/gen/evora/v1/schedule.js';
import { WorkerServiceService } from '../../src/gen/evora/v1/worker.js';
import { configLoad } from '../../src/server/config.js';
import { serverStart, type EvoraServer } from '../../src/server/server.js';
import type { TokenRole } from '../../src/domain/auth.js';
import { testDatabaseCreate } from '../helpers/db.js';
import { submitStreamOpen, workOpen } from '../helpers/open-streams.js';
import { bearer, tokenInsert, type TestToken } from '../helpers/tokens.js';
import { waitFor } from '../helpers/wait.js';

/**
 * THE must-show matrix of issue 18: every method of every Evora service called with a token
 * of every role (allowed: any status but PERMISSION_DENIED or UNAUTHENTICATED), the
 * refusals of missing, malformed, unknown, expired and revoked tokens, queue scopes, a
 * revocation and an expiry reaching a second server over the same database within 5 s
 * (an open Work stream ended), and the servers' log lines: none holds a secret, and a
 * refusal logs one warn line.
 */

type MethodDef = { path: string; requestStream: boolean; responseStream: boolean; requestSerialize: (v: never) => Buffer; responseDeserialize: (b: Buffer) => unknown; requestDeserialize: (b: Buffer) => unknown };

/** Every service of the Evora API, by name. */
const SERVICES: Record<string, Record<string, MethodDef>> = {
  JobService: JobServiceService as unknown as Record<string, MethodDef>,
  WorkerService: WorkerServiceService as unknown as Record<string, MethodDef>,
  QueueService: QueueServiceService as unknown as Record<string, MethodDef>,
  ScheduleService: ScheduleServiceService as unknown as Record<string, MethodDef>,
  TokenService: TokenServiceService as unknown as Record<string, MethodDef>,
  AuditService: AuditServiceService as unknown as Record<string, MethodDef>,
};
const ALL_METHODS: MethodDef[] = Object.values(SERVICES).flatMap((s) => Object.values(s));

/** The roles allowed each method, as proto/evora/v1/auth.proto's top comment lists them (admin: all). */
const ALLOWED: Record<string, TokenRole[]> = {
  SubmitJob: ['producer', 'worker'],
  SubmitJobs: ['producer', 'worker'],
  SubmitJobStream: ['producer', 'worker'],
  GetJob: ['producer', 'viewer'],
  ListJobs: ['producer', 'viewer'],
  ListJobAttempts: ['producer', 'viewer'],
  CancelJob: [],
  RetryJob: [],
  RetryJobs: [],
  PurgeJobs: [],
  CancelJobs: [],
  ListDeadLetterGroups: ['producer', 'viewer'],
  Work: ['worker'],
  ClaimJobs: ['worker'],
  ExtendLease: ['worker'],
  CompleteJob: ['worker'],
  FailJob: ['worker'],
  SnoozeJob: ['worker'],
  ReportProgress: ['worker'],
  ListWorkers: ['viewer'],
  GetQueue: ['viewer'],
  ListQueues: ['viewer'],
  GetQueueStats: ['viewer'],
  ListQueueStats: ['viewer'],
  GetQueueSeries: ['viewer'],
  UpsertQueue: [],
  PauseQueue: [],
  ResumeQueue: [],
  DeleteQueue: [],
  GetSchedule: ['viewer'],
  ListSchedules: ['viewer'],
  UpsertSchedule: [],
  DeleteSchedule: [],
  PauseSchedule: [],
  ResumeSchedule: [],
  TriggerSchedule: [],
  CreateToken: [],
  ListTokens: [],
  RevokeToken: [],
  GetCaller: ['producer', 'worker', 'viewer'],
  ListAuditEvents: [],
};
const ROLES: TokenRole[] = ['producer', 'worker', 'viewer', 'admin'];
const methodName = (path: string) => path.slice(path.lastIndexOf('/') + 1);

const UUID_A = '018f0000-0000-7000-8000-00000000000a';
/** Ids filled in beforeAll. */
const ids = { billingJob: '', otherJob: '' };

/** A valid request of each method (the decoded empty message with these fields set). */
const REQUESTS: Record<string, () => Record<string, unknown>> = {
  SubmitJob: () => ({ queue: 'billing.matrix', type: 'matrix' }),
  SubmitJobs: () => ({ jobs: [SubmitJobRequest.fromPartial({ queue: 'billing.matrix', type: 'matrix' })] }),
  SubmitJobStream: () => ({ requestId: 1, job: SubmitJobRequest.fromPartial({ queue: 'billing.matrix', type: 'matrix' }) }),
  GetJob: () => ({ id: ids.billingJob }),
  ListJobs: () => ({ queue: 'billing.a' }),
  ListJobAttempts: () => ({ id: ids.billingJob }),
  CancelJob: () => ({ id: UUID_A }),
  RetryJob: () => ({ id: UUID_A }),
  RetryJobs: () => ({ filter: JobFilter.fromPartial({ queue: 'matrix-empty' }), dryRun: true }),
  PurgeJobs: () => ({ filter: JobFilter.fromPartial({ queue: 'matrix-empty' }), dryRun: true }),
  CancelJobs: () => ({ filter: JobFilter.fromPartial({ queue: 'matrix-empty' }), dryRun: true }),
  ListDeadLetterGroups: () => ({ queue: 'billing.a' }),
  ClaimJobs: () => ({ workerId: 'matrix', queues: ['matrix-empty'], max: 1 }),
  ExtendLease: () => ({ jobId: UUID_A, leaseToken: UUID_A }),
  CompleteJob: () => ({ jobId: UUID_A, leaseToken: UUID_A }),
  FailJob: () => ({ jobId: UUID_A, leaseToken: UUID_A, error: 'x' }),
  SnoozeJob: () => ({ jobId: UUID_A, leaseToken: UUID_A }),
  ReportProgress: () => ({ jobId: UUID_A, leaseToken: UUID_A, percent: 10 }),
  ListWorkers: () => ({}),
  GetQueue: () => ({ name: 'billing.a' }),
  ListQueues: () => ({}),
  GetQueueStats: () => ({ name: 'billing.a' }),
  ListQueueStats: () => ({}),
  GetQueueSeries: () => ({ queue: 'billing.a', minutes: 5 }),
  UpsertQueue: () => ({ name: 'matrix-queue' }),
  PauseQueue: () => ({ name: 'matrix-queue' }),
  ResumeQueue: () => ({ name: 'matrix-queue' }),
  DeleteQueue: () => ({ name: 'matrix-missing' }),
  GetSchedule: () => ({ name: 'matrix-schedule' }),
  ListSchedules: () => ({}),
  UpsertSchedule: () => ({ schedule: Schedule.fromPartial({ name: 'matrix-schedule', cron: '0 0 1 1 *', timezone: 'UTC', queue: 'matrix-queue', type: 't' }) }),
  DeleteSchedule: () => ({ name: 'matrix-missing' }),
  PauseSchedule: () => ({ name: 'matrix-schedule' }),
  ResumeSchedule: () => ({ name: 'matrix-schedule' }),
  TriggerSchedule: () => ({ name: 'matrix-missing' }),
  CreateToken: () => ({ name: '', role: 0 }),
  ListTokens: () => ({}),
  RevokeToken: () => ({}),
  GetCaller: () => ({}),
  ListAuditEvents: () => ({}),
};

/** A log line as the servers wrote it, raw (to search for secrets) and parsed. */
interface LogLine {
  raw: string;
  level: number;
  msg: string;
  method?: string;
  token_name?: string | null;
  reason?: string;
  peer?: string;
}
const lines: LogLine[] = [];

async function start(databaseUrl: string): Promise<EvoraServer> {
  const config = configLoad(
    { host: '127.0.0.1', port: '0', httpPort: '0', databaseUrl, pollIntervalMs: '200', sweepIntervalMs: '100', electionIntervalMs: '200', projectIntervalMs: '200' },
    {},
  );
  const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push({ ...(JSON.parse(s) as LogLine), raw: s }) });
  return serverStart(config, logger);
}

let serverA: EvoraServer;
let serverB: EvoraServer;
let clientA: grpc.Client;
let clientB: grpc.Client;
let dropDb: () => Promise<void>;
let databaseUrl: string;
const tokens = {} as Record<TokenRole, TestToken>;
const secrets: string[] = [];
async function token(opts: Parameters<typeof tokenInsert>[1]): Promise<TestToken> {
  const t = await tokenInsert(databaseUrl, opts);
  secrets.push(t.secret);
  return t;
}

/** The status code of a unary call (OK when it succeeded). */
function unaryCode(client: grpc.Client, def: MethodDef, request: Record<string, unknown>, md: grpc.Metadata): Promise<grpc.status> {
  const full = { ...(def.requestDeserialize(Buffer.alloc(0)) as object), ...request };
  return new Promise((resolve) => {
    client.makeUnaryRequest(def.path, def.requestSerialize as (v: unknown) => Buffer, def.responseDeserialize, full, md, { deadline: Date.now() + 10_000 }, (err) =>
      resolve(err ? err.code : grpc.status.OK),
    );
  });
}

beforeAll(async () => {
  const db = await testDatabaseCreate();
  databaseUrl = db.url;
  dropDb = db.drop;
  serverA = await start(databaseUrl);
  clientA = new grpc.Client(serverA.address, grpc.credentials.createInsecure());
  // Data, while the server is still open (no token yet).
  const none = new grpc.Metadata();
  const J = JobServiceService;
  const submit = (queue: string) =>
    new Promise<string>((resolve, reject) =>
      clientA.makeUnaryRequest(J.submitJob.path, J.submitJob.requestSerialize, J.submitJob.responseDeserialize, SubmitJobRequest.fromPartial({ queue, type: 't' }), none, (err, res) =>
        err ? reject(err) : resolve(res!.job!.id),
      ),
    );
  ids.billingJob = await submit('billing.a');
  ids.otherJob = await submit('other');
  expect(await unaryCode(clientA, QueueServiceService.upsertQueue as unknown as MethodDef, { name: 'billing.a' }, none)).toBe(grpc.status.OK);
  for (const role of ROLES) tokens[role] = await token({ role, name: `matrix-${role}` });
  serverB = await start(databaseUrl);
  clientB = new grpc.Client(serverB.address, grpc.credentials.createInsecure());
  // Auth is on on server A (NOTIFY, or the next read).
  await waitFor(async () => (await unaryCode(clientA, JobServiceService.listJobs as unknown as MethodDef, {}, none)) === grpc.status.UNAUTHENTICATED, {
    timeoutMs: 5000,
    what: 'auth on',
  });
});

afterAll(async () => {
  clientA?.close();
  clientB?.close();
  await serverA?.stop();
  await serverB?.stop();
  await dropDb?.();
});

describe('every method x every role', () => {
  it('METHOD_PERMISSIONS and this matrix cover every method of every service definition', () => {
    const paths = ALL_METHODS.map((m) => m.path).sort();
    expect(Object.keys(METHOD_PERMISSIONS).sort()).toEqual(paths);
    expect(Object.keys(ALLOWED).sort()).toEqual(paths.map(methodName).sort());
    expect(Object.keys(REQUESTS).filter((n) => n !== 'Work').sort()).toEqual(paths.map(methodName).filter((n) => n !== 'Work').sort());
  });

  it("docs/security.md's roles table lists exactly what each role may call, as this matrix does", () => {
    const doc = readFileSync(new URL('../../docs/security.md', import.meta.url), 'utf8');
    for (const role of ['producer', 'worker', 'viewer'] as const) {
      const row = doc.split('\n').find((l) => l.startsWith(`| \`${role}\` |`));
      expect(row, `docs/security.md lacks the ${role} row`).toBeDefined();
      // "the Work stream" names Work; every other method is written by its name.
      const listed = [...new Set((row!.replace('the Work stream', 'Work').match(/\b[A-Z][A-Za-z]+\b/g) ?? []).filter((w) => w in ALLOWED))];
      const allowed = Object.keys(ALLOWED).filter((m) => ALLOWED[m]!.includes(role) && m !== 'GetCaller');
      expect(listed.sort(), `docs/security.md, ${role}`).toEqual(allowed.sort());
    }
  });

  for (const role of ROLES) {
    it(`${role}: allowed exactly what auth.proto lists, PERMISSION_DENIED for the rest`, async () => {
      const got: Record<string, string> = {};
      const want: Record<string, string> = {};
      for (const def of ALL_METHODS) {
        const name = methodName(def.path);
        let code: grpc.status;
        if (def.path === WorkerServiceService.work.path) {
          const w = workOpen(clientA, bearer(tokens[role]), ['matrix-work']);
          code = await w.first;
          w.close();
        } else if (def.requestStream) {
          const w = submitStreamOpen(clientA, bearer(tokens[role]), REQUESTS[name]!());
          code = await w.first;
          w.close();
        } else {
          code = await unaryCode(clientA, def, REQUESTS[name]!(), bearer(tokens[role]));
        }
        // TokenService and AuditService are served once their implementation is registered.
        if (code === grpc.status.UNIMPLEMENTED && (def.path.includes('TokenService') || def.path.includes('AuditService'))) continue;
        const allowed = role === 'admin' || ALLOWED[name]!.includes(role);
        want[name] = allowed ? 'allowed' : 'PERMISSION_DENIED';
        got[name] = code === grpc.status.PERMISSION_DENIED ? 'PERMISSION_DENIED' : code === grpc.status.UNAUTHENTICATED ? 'UNAUTHENTICATED' : 'allowed';
      }
      expect(got).toEqual(want);
      expect(Object.keys(got).length).toBeGreaterThanOrEqual(30);
    });
  }
});

describe('authentication', () => {
  it('no token, a malformed, unknown, expired or revoked one: UNAUTHENTICATED, on unary calls and the Work stream', async () => {
    const expired = await token({ role: 'admin', expiresAt: new Date(Date.now() - 1000) });
    const revoked = await token({ role: 'admin', revokedAt: new Date() });
    const unknown = 'evora_' + 'u'.repeat(43);
    secrets.push(unknown);
    const malformed = new grpc.Metadata();
    malformed.set('authorization', 'Token abc');
    const cases: [string, grpc.Metadata][] = [
      ['none', new grpc.Metadata()],
      ['malformed', malformed],
      ['too short', bearer('short')],
      ['unknown', bearer(unknown)],
      ['expired', bearer(expired)],
      ['revoked', bearer(revoked)],
    ];
    for (const [what, md] of cases) {
      expect(await unaryCode(clientA, JobServiceService.getJob as unknown as MethodDef, { id: ids.billingJob }, md), what).toBe(grpc.status.UNAUTHENTICATED);
      const w = workOpen(clientA, md, ['matrix-work']);
      expect(await w.first, `Work, ${what}`).toBe(grpc.status.UNAUTHENTICATED);
    }
  });
});

describe('queue scopes', () => {
  it('SubmitJobs: one job out of scope refuses the whole batch and writes nothing; a prefix* pattern allows its queues', async () => {
    const producer = await token({ role: 'producer', queues: ['billing.*'] });
    const jobs = [SubmitJobRequest.fromPartial({ queue: 'billing.x', type: 'scoped-batch' }), SubmitJobRequest.fromPartial({ queue: 'other', type: 'scoped-batch' })];
    expect(await unaryCode(clientA, JobServiceService.submitJobs as unknown as MethodDef, { jobs }, bearer(producer))).toBe(grpc.status.PERMISSION_DENIED);
    const pg = await import('pg');
    const client = new pg.default.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query(`SELECT count(*)::int AS n FROM evora.jobs WHERE type = 'scoped-batch'`);
      expect(rows[0].n).toBe(0);
    } finally {
      await client.end();
    }
    expect(await unaryCode(clientA, JobServiceService.submitJobs as unknown as MethodDef, { jobs: [jobs[0]] }, bearer(producer))).toBe(grpc.status.OK);
    expect(await unaryCode(clientA, JobServiceService.submitJob as unknown as MethodDef, { queue: 'billingx', type: 't' }, bearer(producer))).toBe(grpc.status.PERMISSION_DENIED);
  });

  it('ListJobs must name a queue in scope; GetJob of a job of another queue is refused', async () => {
    const producer = await token({ role: 'producer', queues: ['billing.*'] });
    const list = JobServiceService.listJobs as unknown as MethodDef;
    expect(await unaryCode(clientA, list, {}, bearer(producer))).toBe(grpc.status.PERMISSION_DENIED);
    expect(await unaryCode(clientA, list, { queue: 'other' }, bearer(producer))).toBe(grpc.status.PERMISSION_DENIED);
    expect(await unaryCode(clientA, list, { queue: 'billing.a' }, bearer(producer))).toBe(grpc.status.OK);
    const get = JobServiceService.getJob as unknown as MethodDef;
    expect(await unaryCode(clientA, get, { id: ids.otherJob }, bearer(producer))).toBe(grpc.status.PERMISSION_DENIED);
    expect(await unaryCode(clientA, get, { id: ids.billingJob }, bearer(producer))).toBe(grpc.status.OK);
  });

  it('a token limited to queues may not manage tokens or read the audit log, even an admin one', async () => {
    const admin = await token({ role: 'admin', queues: ['billing.*'] });
    for (const def of [TokenServiceService.listTokens, AuditServiceService.listAuditEvents] as unknown as MethodDef[]) {
      const code = await unaryCode(clientA, def, {}, bearer(admin));
      expect([grpc.status.PERMISSION_DENIED, grpc.status.UNIMPLEMENTED], def.path).toContain(code);
    }
    expect(await unaryCode(clientA, QueueServiceService.pauseQueue as unknown as MethodDef, { name: 'other' }, bearer(admin))).toBe(grpc.status.PERMISSION_DENIED);
    // DeleteQueue as UpsertQueue: a queue-scoped admin deletes only its own queues.
    const del = QueueServiceService.deleteQueue as unknown as MethodDef;
    expect(await unaryCode(clientA, del, { name: 'other' }, bearer(admin))).toBe(grpc.status.PERMISSION_DENIED);
    expect(await unaryCode(clientA, del, { name: 'billing.none' }, bearer(admin))).toBe(grpc.status.NOT_FOUND);
  });

  it('the Work stream hello must name queues in scope; ListQueues answers only the scope', async () => {
    const worker = await token({ role: 'worker', queues: ['billing.a'] });
    const out = workOpen(clientA, bearer(worker), ['billing.a', 'other']);
    expect(await out.first).toBe(grpc.status.PERMISSION_DENIED);
    const ok = workOpen(clientA, bearer(worker), ['billing.a']);
    expect(await ok.first).toBe(grpc.status.OK);
    ok.close();
    const viewer = await token({ role: 'viewer', queues: ['billing.*'] });
    const def = QueueServiceService.listQueues;
    const names = await new Promise<string[]>((resolve, reject) =>
      clientA.makeUnaryRequest(def.path, def.requestSerialize, def.responseDeserialize, {}, bearer(viewer), (err, res) => (err ? reject(err) : resolve(res!.queues.map((q) => q.name)))),
    );
    expect(names).toContain('billing.a');
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((n) => !n.startsWith('billing.'))).toEqual([]);
  });
});

describe('queue scopes: ListWorkers', () => {
  it("a token limited to queues sees the sessions of its queues, naming only its queues", async () => {
    const worker = await token({ role: 'worker' });
    const w = workOpen(clientA, bearer(worker), ['billing.workers', 'payroll.workers']);
    expect(await w.first).toBe(grpc.status.OK);
    try {
      const viewer = await token({ role: 'viewer', queues: ['billing.*'] });
      const def = WorkerServiceService.listWorkers;
      const list = (md: grpc.Metadata) =>
        new Promise<string[][]>((resolve, reject) =>
          clientA.makeUnaryRequest(def.path, def.requestSerialize, def.responseDeserialize, { queue: '' }, md, (err, res) =>
            err ? reject(err) : resolve(res!.workers.filter((x) => x.queues.some((q) => q.endsWith('.workers'))).map((x) => x.queues)),
          ),
        );
      // Every queue for a token of every queue (once the session is listed).
      await waitFor(async () => (await list(bearer(tokens.admin))).length === 1, { what: 'the session to be listed' });
      expect(await list(bearer(tokens.admin))).toEqual([['billing.workers', 'payroll.workers']]);
      expect(await list(bearer(viewer))).toEqual([['billing.workers']]);
    } finally {
      w.close();
    }
  });
});

describe('revocation and expiry on a second server', () => {
  it('a revoked token stops working on server B within 5 s, and its open Work stream and SubmitJobStream end UNAUTHENTICATED', async () => {
    const worker = await token({ role: 'worker' });
    const w = workOpen(clientB, bearer(worker), ['billing.revoke']);
    expect(await w.first).toBe(grpc.status.OK);
    const submits = submitStreamOpen(clientB, bearer(worker), { requestId: 7, job: SubmitJobRequest.fromPartial({ queue: 'billing.revoke', type: 't' }) });
    expect(await submits.first).toBe(grpc.status.OK);
    // Revoked by another process with no NOTIFY: the periodic read alone must see it.
    const pg = await import('pg');
    const client = new pg.default.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query(`UPDATE evora.api_tokens SET revoked_at = now() WHERE id = $1`, [worker.id]);
    await client.end();
    const claim = WorkerServiceService.claimJobs as unknown as MethodDef;
    await waitFor(async () => (await unaryCode(clientB, claim, REQUESTS.ClaimJobs!(), bearer(worker))) === grpc.status.UNAUTHENTICATED, {
      timeoutMs: 5000,
      what: 'the revocation on server B',
    });
    const ended: grpc.ServiceError = await waitFor(() => w.error as grpc.ServiceError, { timeoutMs: 5000, what: 'the Work stream to end' });
    expect(ended.code).toBe(grpc.status.UNAUTHENTICATED);
    const submitsEnded: grpc.ServiceError = await waitFor(() => submits.error as grpc.ServiceError, { timeoutMs: 5000, what: 'the SubmitJobStream to end' });
    expect(submitsEnded.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(submitsEnded.details).toMatch(/revoked or has expired/);
  });

  it('an expired token stops working on server B within 5 s of its expiry, and its Work stream ends', async () => {
    const expiresAt = new Date(Date.now() + 2000);
    const worker = await token({ role: 'worker', expiresAt });
    const w = workOpen(clientB, bearer(worker), ['billing.expire']);
    expect(await w.first).toBe(grpc.status.OK);
    const ended: grpc.ServiceError = await waitFor(() => w.error as grpc.ServiceError, { timeoutMs: 2000 + 5000, what: 'the Work stream to end at expiry' });
    expect(ended.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAt.getTime());
    const claim = WorkerServiceService.claimJobs as unknown as MethodDef;
    expect(await unaryCode(clientB, claim, REQUESTS.ClaimJobs!(), bearer(worker))).toBe(grpc.status.UNAUTHENTICATED);
  });
});

describe('log lines', () => {
  it('a refusal logs one warn line (method, token, reason, peer); no line of either server holds a secret', async () => {
    const before = lines.length;
    expect(await unaryCode(clientA, JobServiceService.cancelJob as unknown as MethodDef, { id: UUID_A }, bearer(tokens.viewer))).toBe(grpc.status.PERMISSION_DENIED);
    const refusals = lines.slice(before).filter((l) => l.level === 40 && l.method === 'CancelJob');
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatchObject({ token_name: 'matrix-viewer', msg: 'call refused: permission denied' });
    expect(refusals[0]!.reason).toMatch(/may not call CancelJob/);
    expect(refusals[0]!.peer).toBeTruthy();

    // A known token refused (revoked) is named too, though it authenticates as nobody.
    const revoked = await token({ role: 'viewer', revokedAt: new Date() });
    const at = lines.length;
    expect(await unaryCode(clientA, JobServiceService.listJobs as unknown as MethodDef, { queue: 'q' }, bearer(revoked))).toBe(grpc.status.UNAUTHENTICATED);
    const named = lines.slice(at).filter((l) => l.level === 40 && l.method === 'ListJobs');
    expect(named).toHaveLength(1);
    expect(named[0]).toMatchObject({ token_id: revoked.id, token_name: revoked.name, reason: `token "${revoked.name}" was revoked`, msg: 'call refused: not authenticated' });

    expect(secrets.length).toBeGreaterThan(5);
    for (const l of lines) {
      for (const s of secrets) expect(l.raw.includes(s), `a log line holds a secret: ${l.msg}`).toBe(false);
      expect(/bearer\s+(?!<token>)/i.test(l.raw), `a log line holds a header: ${l.msg}`).toBe(false);
    }
    expect(lines.filter((l) => l.level === 40 && /call refused/.test(l.msg)).length).toBeGreaterThan(10);
  });
});

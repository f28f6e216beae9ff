import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { AuditActorKind, GetCallerResponse, TokenRole, TokenServiceClient } from '../../src/gen/evora/v1/auth.js';
import { JobFilter, JobState, SubmitJobRequest } from '../../src/gen/evora/v1/job.js';
import { EvoraClient, EvoraWorker, NonRetryableError } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { call, clientsFor, serverSetup, type Clients } from '../helpers/server-setup.js';
import { bearer, tokenInsert, type TestToken } from '../helpers/tokens.js';
import { waitFor } from '../helpers/wait.js';
import type { EvoraServer } from '../../src/server/server.js';

/**
 * The reads the dashboard needs, over the wire: dead letters grouped by error and a group
 * retried by JobFilter.error_group, its jobs listed by ListJobsRequest.error_group; per-minute series of a known set of jobs; ListWorkers and
 * the stats' worker counts across two servers on one database; GetJob's dependents; ListJobs
 * by idempotency key; GetCaller with auth off, then per role with auth on (last: it turns
 * auth on for the file's database).
 */

let server: EvoraServer;
let clients: Clients;
let client: EvoraClient;
let address: string;
let databaseUrl: string;
let sql: pg.Pool;
const workers: EvoraWorker[] = [];

beforeAll(async () => {
  ({ server, clients, address, databaseUrl } = await serverSetup());
  client = new EvoraClient({ address });
  sql = new pg.Pool({ connectionString: databaseUrl, max: 2 });
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0, graceMs: 1_000 })));
});
afterAll(async () => {
  client.close();
  await sql.end();
});

function worker(addr: string, workerId: string, queues: string[], slots = 5): EvoraWorker {
  const w = new EvoraWorker({ address: addr, workerId, queues, slots });
  workers.push(w);
  return w;
}

async function dlqCount(queue: string): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1 AND state = 'DLQ'`, [queue]);
  return rows[0]!.n;
}

describe('dead letters', () => {
  it('groups DLQ jobs by type and error (first line, at most 200 characters), largest first; RetryJobs by error_group retries one group only', async () => {
    const queue = queueName('dlq');
    await client.upsertQueue(queue, { maxAttempts: 1 });
    const long = 'x'.repeat(300);
    let failing = true;
    const w = worker(address, 'dlq-worker', [queue]);
    w.handle('a', async (job) => {
      if (!failing) return {};
      throw new NonRetryableError((job.payload as { n: number }).n % 3 === 0 ? `timeout talking to bank\nat line ${String((job.payload as { n: number }).n)}` : 'card declined');
    });
    w.handle('b', async () => {
      if (!failing) return {};
      throw new NonRetryableError(long);
    });
    await client.submitMany([
      ...Array.from({ length: 9 }, (_, n) => ({ queue, type: 'a', payload: { n } })),
      { queue, type: 'b', payload: { n: 0 } },
    ]);
    await w.start();
    await waitFor(async () => (await dlqCount(queue)) === 10, { what: '10 DLQ jobs', timeoutMs: 30_000 });

    const res = await call(clients.jobs, 'listDeadLetterGroups', { queue, limit: 0 });
    expect(res.truncated).toBe(false);
    expect(res.groups.map((g) => [g.type, g.error, g.count])).toEqual([
      ['a', 'card declined', 6],
      ['a', 'timeout talking to bank', 3],
      ['b', 'x'.repeat(200), 1],
    ]);
    expect(res.groups.every((g) => g.queue === queue && g.newestFinishedAt instanceof Date)).toBe(true);
    // limit bounds the groups.
    expect(res.totalGroups).toBe(3);
    const cut = await call(clients.jobs, 'listDeadLetterGroups', { queue, limit: 1 });
    expect(cut.groups).toHaveLength(1);
    // The answer says the limit left groups out.
    expect(cut.totalGroups).toBe(3);
    // Every queue: this queue's groups are among them.
    const all = await call(clients.jobs, 'listDeadLetterGroups', { queue: '', limit: 200 });
    expect(all.groups.filter((g) => g.queue === queue)).toHaveLength(3);

    // A group's dry run counts it; the retry takes it only.
    const groupFilter = (errorGroup: string) => JobFilter.fromPartial({ queue, states: [JobState.JOB_STATE_DLQ], type: 'a', errorGroup });
    expect((await call(clients.jobs, 'retryJobs', { filter: groupFilter('timeout talking to bank'), dryRun: true })).count).toBe(3);
    expect((await call(clients.jobs, 'retryJobs', { filter: groupFilter('no such error'), dryRun: true })).count).toBe(0);
    failing = false;
    expect((await call(clients.jobs, 'retryJobs', { filter: groupFilter('timeout talking to bank'), dryRun: false })).count).toBe(3);
    await waitFor(async () => (await dlqCount(queue)) === 7, { what: 'the group to leave the DLQ' });
    const after = await call(clients.jobs, 'listDeadLetterGroups', { queue, limit: 0 });
    expect(after.groups.map((g) => [g.error.slice(0, 20), g.count])).toEqual([
      ['card declined', 6],
      ['x'.repeat(20), 1],
    ]);
    // The long group by its 200-character key (PurgeJobs honours error_group as well: dry run).
    const purge = await call(clients.jobs, 'purgeJobs', {
      filter: JobFilter.fromPartial({ queue, states: [JobState.JOB_STATE_DLQ], errorGroup: 'x'.repeat(200) }),
      dryRun: true,
    });
    expect(purge.count).toBeLessThanOrEqual(1);
  });

  it('ListJobs by error_group: only that group, across pages, among another group interleaved; "" = the jobs without an error', async () => {
    const queue = queueName('dlqlist');
    await client.upsertQueue(queue, { maxAttempts: 1 });
    const failed = (await client.submitMany(Array.from({ length: 10 }, () => ({ queue, type: 'a' })))).map((r) => r.job.id);
    const pending = (await client.submitMany(Array.from({ length: 2 }, () => ({ queue, type: 'a' })))).map((r) => r.job.id);
    // The first ten dead-lettered in two statements (a worker failing each would take longer),
    // through RUNNING with a lease as a claim then a failure would; in id order, the groups
    // alternate: even positions 'card declined' (a second line each), odd ones 'timeout'.
    await sql.query(
      `UPDATE evora.jobs SET state = 'RUNNING', attempt = 1, lease_token = gen_random_uuid(), locked_until = now() + interval '1 hour' WHERE id = ANY($1)`,
      [failed],
    );
    await sql.query(
      `UPDATE evora.jobs j SET state = 'DLQ', finished_at = now(), locked_until = NULL,
              last_error = CASE WHEN r.n % 2 = 0 THEN E'card declined\nat line ' || r.n ELSE 'timeout' END
       FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM evora.jobs WHERE id = ANY($1)) r WHERE j.id = r.id`,
      [failed],
    );
    const inIdOrder = [...failed].sort();
    const newestFirst = (ids: string[]) => [...ids].sort().reverse();

    /** Every page of ListJobs with `errorGroup` (2 a page); the ids and the number of pages. */
    const listAll = async (errorGroup: string | undefined, states: JobState[]): Promise<{ ids: string[]; pages: number }> => {
      const ids: string[] = [];
      let pageToken = '';
      let pages = 0;
      do {
        const res = await call(clients.jobs, 'listJobs', { queue, states, type: '', pageSize: 2, pageToken, idempotencyKey: '', errorGroup });
        ids.push(...res.jobs.map((j) => j.id));
        pages++;
        pageToken = res.nextPageToken;
      } while (pageToken);
      return { ids, pages };
    };
    const declined = await listAll('card declined', [JobState.JOB_STATE_DLQ]);
    expect(declined.ids).toEqual(newestFirst(inIdOrder.filter((_, i) => i % 2 === 0)));
    expect(declined.pages).toBeGreaterThan(1);
    expect((await listAll('timeout', [])).ids).toEqual(newestFirst(inIdOrder.filter((_, i) => i % 2 === 1)));
    // The whole key, not a prefix.
    expect((await listAll('card', [])).ids).toEqual([]);
    // "" is the group of the jobs without an error: the two never run.
    expect((await listAll('', [])).ids).toEqual(newestFirst(pending));
    // Unset: any.
    expect((await listAll(undefined, [])).ids).toHaveLength(12);
  });

  it('refuses a bad limit or error group, and changes nothing', async () => {
    for (const errorGroup of ['y'.repeat(201), 'two\nlines']) {
      await expect(
        call(clients.jobs, 'listJobs', { queue: '', states: [], type: '', pageSize: 0, pageToken: '', idempotencyKey: '', errorGroup }),
      ).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: expect.stringMatching(/^error_group is /) });
    }
    await expect(call(clients.jobs, 'listDeadLetterGroups', { queue: '', limit: 201 })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    await expect(
      call(clients.jobs, 'retryJobs', { filter: JobFilter.fromPartial({ errorGroup: 'y'.repeat(201) }), dryRun: false }),
    ).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: expect.stringMatching(/error_group/) });
    await expect(
      call(clients.jobs, 'retryJobs', { filter: JobFilter.fromPartial({ errorGroup: 'two\nlines' }), dryRun: false }),
    ).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
  });
});

describe('GetQueueSeries', () => {
  it('one point per minute, oldest first, the current minute last; the completed jobs and their latencies are in it once projected', async () => {
    const queue = queueName('series');
    const w = worker(address, 'series-worker', [queue]);
    w.handle('s', async () => ({}));
    await w.start();
    await client.submitMany(Array.from({ length: 20 }, () => ({ queue, type: 's' })));
    const points = (await waitFor(
      async () => {
        const res = await call(clients.queues, 'getQueueSeries', { queue, minutes: 5 });
        return res.points.reduce((n, p) => n + p.completed, 0) === 20 ? res.points : null;
      },
      { what: 'the projector to count 20 completed jobs', timeoutMs: 20_000 },
    ))!;
    expect(points).toHaveLength(5);
    const minutes = points.map((p) => p.minute!.getTime());
    expect(minutes).toEqual([...minutes].sort((a, b) => a - b));
    for (let i = 1; i < minutes.length; i++) expect(minutes[i]! - minutes[i - 1]!).toBe(60_000);
    // The current minute last (the call may have been made just before a minute turned).
    const current = Math.floor(Date.now() / 60_000) * 60_000;
    expect([current, current - 60_000]).toContain(minutes[4]);
    expect(points.reduce((n, p) => n + p.submitted, 0)).toBe(20);
    const busy = points.filter((p) => p.completed > 0);
    expect(busy.every((p) => p.runP50Ms > 0 && p.runP99Ms >= p.runP50Ms && p.waitP99Ms >= p.waitP50Ms)).toBe(true);
    // Empty minutes are zeros.
    expect(points.filter((p) => p.completed === 0 && p.submitted === 0).every((p) => p.runP50Ms === 0 && p.failed === 0)).toBe(true);
    // Every queue summed: at least this queue's jobs; default window 60 minutes.
    const sum = await call(clients.queues, 'getQueueSeries', { queue: '', minutes: 0 });
    expect(sum.points).toHaveLength(60);
    expect(sum.points.reduce((n, p) => n + p.completed, 0)).toBeGreaterThanOrEqual(20);
    await expect(call(clients.queues, 'getQueueSeries', { queue, minutes: 1441 })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
  });
});

describe('workers across servers', () => {
  it("ListWorkers on either server shows both servers' sessions; the stats count them; a stopped server's sessions leave", async () => {
    const queue = queueName('fleet');
    await client.upsertQueue(queue);
    const second = await serverSetup({ databaseUrl });
    const clientsB = second.clients;
    const a = worker(address, 'worker-on-a', [queue], 3);
    const b = worker(second.address, 'worker-on-b', [queue], 4);
    a.handle('t', async () => ({}));
    b.handle('t', async () => ({}));
    await Promise.all([a.start(), b.start()]);

    for (const c of [clients, clientsB]) {
      const listed = (await waitFor(
        async () => {
          const res = await call(c.workers, 'listWorkers', { queue });
          return res.workers.length === 2 ? res.workers : null;
        },
        { what: 'both sessions listed' },
      ))!;
      expect(listed.map((x) => [x.workerId, x.serverId, x.serverAddress, x.slots, x.queues])).toEqual([
        ['worker-on-a', server.serverId, address, 3, [queue]],
        ['worker-on-b', second.server.serverId, second.address, 4, [queue]],
      ]);
      expect(listed.every((x) => x.connectedAt && x.lastSeenAt && x.heldJobs === 0 && x.sessionId)).toBe(true);
    }
    const stats = (await waitFor(
      async () => {
        const s = (await call(clients.queues, 'getQueueStats', { name: queue })).stats;
        return s?.connectedWorkers === 2 && s.freeSlots === 7 ? s : null;
      },
      { what: 'stats counting both servers' },
    ))!;
    expect(stats.connectedWorkers).toBe(2);
    const other = await call(clients.workers, 'listWorkers', { queue: queueName('nobody') });
    expect(other.workers).toEqual([]);

    // Server B stops: its sessions leave the table (a killed one's go stale: test/store/worker-sessions.test.ts).
    await b.stop({ timeoutMs: 0, graceMs: 1_000 });
    await second.server.stop();
    const left = await call(clients.workers, 'listWorkers', { queue });
    expect(left.workers.map((x) => x.workerId)).toEqual(['worker-on-a']);
    const { rows } = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM evora.worker_sessions WHERE server_id = $1', [second.server.serverId]);
    expect(rows[0]!.n).toBe(0);
  });
});

describe('GetJob dependents and ListJobs by idempotency key', () => {
  it("lists a job's direct children, oldest first", async () => {
    const queue = queueName('deps');
    const parent = (await call(clients.jobs, 'submitJob', SubmitJobRequest.fromPartial({ queue, type: 'p' }))).job!;
    const c1 = (await call(clients.jobs, 'submitJob', SubmitJobRequest.fromPartial({ queue, type: 'c', dependsOn: [parent.id] }))).job!;
    const c2 = (await call(clients.jobs, 'submitJob', SubmitJobRequest.fromPartial({ queue, type: 'c', dependsOn: [parent.id] }))).job!;
    const grandchild = (await call(clients.jobs, 'submitJob', SubmitJobRequest.fromPartial({ queue, type: 'g', dependsOn: [c1.id] }))).job!;
    expect((await call(clients.jobs, 'getJob', { id: parent.id })).dependents).toEqual([c1.id, c2.id]);
    expect((await call(clients.jobs, 'getJob', { id: c1.id })).dependents).toEqual([grandchild.id]);
    expect((await call(clients.jobs, 'getJob', { id: c2.id })).dependents).toEqual([]);
  });

  it('finds a job by its idempotency key, with or without its queue', async () => {
    const queue = queueName('idem');
    const key = `order-${queue}`;
    const job = (await call(clients.jobs, 'submitJob', SubmitJobRequest.fromPartial({ queue, type: 't', idempotencyKey: key }))).job!;
    await call(clients.jobs, 'submitJob', SubmitJobRequest.fromPartial({ queue, type: 't', idempotencyKey: `${key}-other` }));
    const list = (q: string, k: string) => call(clients.jobs, 'listJobs', { queue: q, states: [], type: '', pageSize: 10, pageToken: '', idempotencyKey: k });
    expect((await list('', key)).jobs.map((j) => j.id)).toEqual([job.id]);
    expect((await list(queue, key)).jobs.map((j) => j.id)).toEqual([job.id]);
    expect((await list(queueName('elsewhere'), key)).jobs).toEqual([]);
    expect((await list('', 'no-such-key')).jobs).toEqual([]);
    expect((await client.list({ idempotencyKey: key })).jobs.map((j) => j.id)).toEqual([job.id]);
  });
});

describe('GetCaller', () => {
  function getCaller(tokens: TokenServiceClient, md: grpc.Metadata): Promise<GetCallerResponse> {
    return new Promise((resolve, reject) => tokens.getCaller({}, md, (err, res) => (err ? reject(err) : resolve(res))));
  }

  it('auth off: anonymous, no token needed; auth on: each role sees itself, no token is UNAUTHENTICATED', async () => {
    const tokens = new TokenServiceClient(address, grpc.credentials.createInsecure());
    try {
      expect(await getCaller(tokens, new grpc.Metadata())).toMatchObject({
        authOn: false,
        kind: AuditActorKind.AUDIT_ACTOR_KIND_ANONYMOUS,
        role: TokenRole.TOKEN_ROLE_ADMIN,
        queues: [],
        tokenId: '',
      });
      const roles = [
        ['producer', TokenRole.TOKEN_ROLE_PRODUCER],
        ['worker', TokenRole.TOKEN_ROLE_WORKER],
        ['viewer', TokenRole.TOKEN_ROLE_VIEWER],
        ['admin', TokenRole.TOKEN_ROLE_ADMIN],
      ] as const;
      const made: TestToken[] = [];
      for (const [role] of roles) made.push(await tokenInsert(databaseUrl, { role, name: `caller-${role}`, queues: role === 'viewer' ? ['billing.*'] : [] }));
      await waitFor(
        async () => {
          try {
            await getCaller(tokens, new grpc.Metadata());
            return false;
          } catch (err) {
            return (err as grpc.ServiceError).code === grpc.status.UNAUTHENTICATED;
          }
        },
        { what: 'auth on' },
      );
      for (const [i, [role, pbRole]] of roles.entries()) {
        const t = made[i]!;
        expect(await getCaller(tokens, bearer(t))).toMatchObject({
          authOn: true,
          kind: AuditActorKind.AUDIT_ACTOR_KIND_TOKEN,
          name: `caller-${role}`,
          role: pbRole,
          tokenId: t.id,
          queues: role === 'viewer' ? ['billing.*'] : [],
        });
      }
      // A scoped viewer: ListWorkers and the series answer only its queues; dead letters need one.
      const viewer = made[2]!;
      const inScope = new EvoraWorker({ address, workerId: 'scoped-in', queues: ['billing.x'], slots: 1, token: made[3]!.secret });
      const outOfScope = new EvoraWorker({ address, workerId: 'scoped-out', queues: ['other'], slots: 1, token: made[3]!.secret });
      workers.push(inScope, outOfScope);
      for (const w of [inScope, outOfScope]) w.handle('t', async () => ({}));
      await Promise.all([inScope.start(), outOfScope.start()]);
      const scoped = clientsFor(address);
      try {
        const listWorkers = (md: grpc.Metadata) =>
          new Promise<string[]>((resolve, reject) =>
            scoped.workers.listWorkers({ queue: '' }, md, (err, res) => (err ? reject(err) : resolve(res.workers.map((w) => w.workerId)))),
          );
        await waitFor(async () => (await listWorkers(bearer(made[3]!))).length === 2, { what: 'both workers recorded' });
        expect(await listWorkers(bearer(viewer))).toEqual(['scoped-in']);
        await expect(
          new Promise((resolve, reject) => scoped.jobs.listDeadLetterGroups({ queue: '', limit: 0 }, bearer(viewer), (err, res) => (err ? reject(err) : resolve(res)))),
        ).rejects.toMatchObject({ code: grpc.status.PERMISSION_DENIED });
        await expect(
          new Promise((resolve, reject) => scoped.queues.getQueueSeries({ queue: 'other', minutes: 5 }, bearer(viewer), (err, res) => (err ? reject(err) : resolve(res)))),
        ).rejects.toMatchObject({ code: grpc.status.PERMISSION_DENIED });
        const own = await new Promise<number>((resolve, reject) =>
          scoped.queues.getQueueSeries({ queue: '', minutes: 5 }, bearer(viewer), (err, res) => (err ? reject(err) : resolve(res.points.reduce((n, p) => n + p.completed, 0)))),
        );
        expect(own).toBe(0);
      } finally {
        scoped.close();
      }
    } finally {
      tokens.close();
    }
  });
});

import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { EvoraClient, EvoraWorker, NonRetryableError, type EvoraWorkerOptions } from '../../src/sdk/index.js';
import type { EvoraServer } from '../../src/server/server.js';
import { deadLettersMake } from '../helpers/dead-letters.js';
import { queueName } from '../helpers/factories.js';
import { apiError } from '../helpers/grpc-status.js';
import { serverSetup } from '../helpers/server-setup.js';
import { tokenInsert } from '../helpers/tokens.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The SDK's operator reads against a real server: listWorkers (real EvoraWorkers, one holding
 * a job), deadLetterGroups and retryJobs/purgeJobs by errorGroup (jobs dead-lettered by
 * failing them non-retryably), queueSeries (jobs completed and dead-lettered, once
 * projected), and whoAmI with auth off, then on a second server (a database of its own)
 * per token, where a token limited to queues sees only its queues.
 */

let server: EvoraServer;
let address: string;
let client: EvoraClient;
const workers: EvoraWorker[] = [];
const clients: EvoraClient[] = [];

beforeAll(async () => {
  ({ server, address } = await serverSetup());
  client = new EvoraClient({ address });
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0, graceMs: 1_000 })));
});
afterAll(() => {
  client.close();
  for (const c of clients.splice(0)) c.close();
});

function worker(opts: Partial<EvoraWorkerOptions> & { queues: string[] }): EvoraWorker {
  const w = new EvoraWorker({ address, ...opts });
  workers.push(w);
  return w;
}

describe('listWorkers', () => {
  it('lists each connected worker: id, session, server, queues, types, slots and held jobs; by queue; a stopped one leaves', async () => {
    const qa = queueName('wa');
    const qb = queueName('wb');
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const busy = worker({ workerId: `busy-${qa}`, queues: [qa, qb], slots: 3 });
    busy.handle('slow', async () => {
      await released;
      return {};
    });
    const idle = worker({ workerId: `idle-${qb}`, queues: [qb], slots: 2 });
    idle.handle('x', async () => ({}));
    idle.handle('y', async () => ({}));
    await Promise.all([busy.start(), idle.start()]);
    const { job } = await client.submit({ queue: qa, type: 'slow' });

    // The held job is as the server last recorded it (every 5 s).
    const listed = (await waitFor(
      async () => {
        const all = (await client.listWorkers()).filter((w) => w.workerId === busy.workerId || w.workerId === idle.workerId);
        return all.length === 2 && all[0]!.heldJobs === 1 ? all : null;
      },
      { what: 'both workers listed, the busy one holding its job', timeoutMs: 15_000 },
    ))!;
    expect(listed.map((w) => [w.workerId, w.queues, w.jobTypes, w.slots, w.heldJobs, w.serverId, w.serverAddress])).toEqual([
      [busy.workerId, [qa, qb], ['slow'], 3, 1, server.serverId, address],
      [idle.workerId, [qb], ['x', 'y'], 2, 0, server.serverId, address],
    ]);
    for (const w of listed) {
      expect(w.sessionId).toMatch(/^[0-9a-f-]{36}$/);
      expect(w.connectedAt).toBeInstanceOf(Date);
      expect(w.lastSeenAt).toBeInstanceOf(Date);
      expect(w.lastSeenAt!.getTime()).toBeGreaterThanOrEqual(w.connectedAt!.getTime());
    }
    expect(listed[0]!.sessionId).toBe(busy.stats().sessionId);
    expect((await client.get(job.id)).workerId).toBe(busy.workerId);

    expect((await client.listWorkers({ queue: qa })).map((w) => w.workerId)).toEqual([busy.workerId]);
    expect((await client.listWorkers({ queue: queueName('nobody') }))).toEqual([]);
    expect((await apiError(client.listWorkers({ queue: 'has space' }))).codeName).toBe('INVALID_ARGUMENT');

    release();
    await idle.stop({ timeoutMs: 0, graceMs: 1_000 });
    await waitFor(async () => (await client.listWorkers({ queue: qb })).map((w) => w.workerId).join() === busy.workerId, {
      what: 'the stopped worker to leave the list',
    });
  });
});

describe('deadLetterGroups', () => {
  it('groups DLQ jobs by type and first error line, largest first; retryJobs and purgeJobs act on one group by errorGroup', async () => {
    const queue = queueName('dlq');
    const w = worker({ workerId: `dlq-${queue}`, queues: [queue] });
    const errors = ['card declined', 'card declined', 'card declined', 'timeout talking to bank\n  at charge (bank.ts:12)', 'timeout talking to bank\n  at refund (bank.ts:40)'];
    const ids = await deadLettersMake(client, w, { queue, type: 'charge', errors });

    const res = await client.deadLetterGroups({ queue });
    expect(res.truncated).toBe(false);
    expect(res.totalGroups).toBe(2);
    expect(res.groups.map((g) => [g.queue, g.type, g.error, g.count])).toEqual([
      [queue, 'charge', 'card declined', 3],
      [queue, 'charge', 'timeout talking to bank', 2],
    ]);
    for (const g of res.groups) expect(g.newestFinishedAt).toBeInstanceOf(Date);
    // limit keeps the largest; totalGroups says how many there were.
    expect(await client.deadLetterGroups({ queue, limit: 1 })).toMatchObject({ groups: [{ error: 'card declined', count: 3 }], totalGroups: 2 });
    // Every queue: this queue's groups are among them.
    expect((await client.deadLetterGroups({ limit: 200 })).groups.filter((g) => g.queue === queue)).toHaveLength(2);

    // The group's key as the filter: counts (dry runs) of that group only, then its retry.
    const group = { queue, type: 'charge', states: 'DLQ', errorGroup: 'timeout talking to bank' };
    expect(await client.retryJobs(group, { dryRun: true })).toBe(2);
    expect(await client.retryJobs({ ...group, errorGroup: 'no such error' }, { dryRun: true })).toBe(0);
    // The count with its bound: the same filter bounded by it counts the same jobs.
    const counted = await client.retryJobsCount(group);
    expect(counted).toEqual({ count: 2, finishedBefore: expect.any(Date) });
    expect(await client.retryJobs({ ...group, finishedBefore: counted.finishedBefore! }, { dryRun: true })).toBe(2);
    expect(await client.purgeJobsCount({ ...group, errorGroup: 'no such error' })).toEqual({ count: 0, finishedBefore: null });
    // Purge counts a job once telemetry has recorded its events.
    await waitFor(async () => (await client.purgeJobs({ ...group, errorGroup: 'card declined' }, { dryRun: true })) === 3, { what: 'the group of 3 to purge' });
    expect(await client.retryJobs(group)).toBe(2);
    // Retried, its jobs run a second attempt and fail again into the group; the other group is untouched.
    const secondFailure = async (id: string) => {
      const job = await client.get(id);
      return job.state === 'DLQ' && (await client.attempts(id)).length === 2;
    };
    await waitFor(async () => (await secondFailure(ids[3]!)) && secondFailure(ids[4]!), { what: 'the retried group back in the DLQ' });
    for (const id of ids.slice(0, 3)) expect(await client.attempts(id)).toHaveLength(1);
    expect((await client.deadLetterGroups({ queue })).groups.map((g) => [g.error, g.count])).toEqual([
      ['card declined', 3],
      ['timeout talking to bank', 2],
    ]);

    // Refused without a call, or by the server in one line; nothing changes.
    await expect(client.deadLetterGroups({ queue, limit: 2.5 })).rejects.toThrow(TypeError);
    const tooMany = await apiError(client.deadLetterGroups({ queue, limit: 201 }));
    expect(tooMany.codeName).toBe('INVALID_ARGUMENT');
    expect(tooMany.message).toMatch(/limit/);
    const twoLines = await apiError(client.retryJobs({ queue, errorGroup: 'a\nb' }));
    expect(twoLines.codeName).toBe('INVALID_ARGUMENT');
    expect(twoLines.message).toMatch(/error_group/);
    expect((await client.deadLetterGroups({ queue })).groups.map((g) => g.count)).toEqual([3, 2]);
  });
});

describe('queueSeries', () => {
  it('one point per minute, oldest first: the completed and dead-lettered jobs once projected; every queue summed; bad windows refused', async () => {
    const queue = queueName('series');
    await client.upsertQueue(queue, { maxAttempts: 1 });
    const w = worker({ workerId: `series-${queue}`, queues: [queue] });
    w.handle('ok', async () => ({}));
    w.handle('bad', async () => {
      throw new NonRetryableError('broken');
    });
    await client.submitMany([...Array.from({ length: 6 }, () => ({ queue, type: 'ok' })), ...Array.from({ length: 2 }, () => ({ queue, type: 'bad' }))]);
    await w.start();

    const sum = (points: { completed: number; deadLettered: number }[], k: 'completed' | 'deadLettered') => points.reduce((n, p) => n + p[k], 0);
    const points = (await waitFor(
      async () => {
        const p = await client.queueSeries({ queue, minutes: 5 });
        return sum(p, 'completed') === 6 && sum(p, 'deadLettered') === 2 ? p : null;
      },
      { what: 'the projector to count 6 completed and 2 dead-lettered jobs', timeoutMs: 20_000 },
    ))!;
    expect(points).toHaveLength(5);
    for (const p of points) expect(p.minute).toBeInstanceOf(Date);
    const minutes = points.map((p) => p.minute.getTime());
    for (let i = 1; i < minutes.length; i++) expect(minutes[i]! - minutes[i - 1]!).toBe(60_000);
    expect(points.reduce((n, p) => n + p.submitted, 0)).toBe(8);
    expect(points.reduce((n, p) => n + p.failed, 0)).toBe(2);
    const busy = points.filter((p) => p.completed > 0);
    expect(busy.every((p) => p.run.p50Ms > 0 && p.run.p99Ms >= p.run.p50Ms && p.wait.p99Ms >= p.wait.p50Ms)).toBe(true);
    expect(points.filter((p) => p.submitted === 0 && p.completed === 0).every((p) => p.run.p50Ms === 0 && p.failed === 0)).toBe(true);

    // Every queue summed, default window 60 minutes.
    const all = await client.queueSeries();
    expect(all).toHaveLength(60);
    expect(sum(all, 'completed')).toBeGreaterThanOrEqual(6);
    expect((await apiError(client.queueSeries({ queue, minutes: 1441 }))).codeName).toBe('INVALID_ARGUMENT');
    await expect(client.queueSeries({ minutes: Number.NaN })).rejects.toThrow(TypeError);
  });
});

describe('large jobs', () => {
  it('a payload that passed the limit as JSON comes back whatever its Struct size: submit, get and list answer it', async () => {
    const queue = queueName('large-struct');
    // 800 kB of JSON text under the 1 MiB limit; as a Struct about 4.4 MB, past 4 MiB.
    const payload = { zeros: new Array<number>(400_000).fill(0) };
    const { job } = await client.submit({ queue, type: 't', payload });
    expect(job.payload).toEqual(payload);
    expect((await client.get(job.id)).payload).toEqual(payload);
    expect((await client.list({ queue })).jobs.map((j) => j.id)).toEqual([job.id]);
  });

  it('ListJobs ends a page before the job that would begin past 1 MiB of JSON text, and the next page goes on from there', async () => {
    const queue = queueName('large-page');
    const ids: string[] = [];
    for (const n of [1, 2, 3]) ids.push((await client.submit({ queue, type: 't', payload: { n, blob: 'x'.repeat(600_000) } })).job.id);
    const [a, b, c] = ids;
    const first = await client.list({ queue, pageSize: 10 });
    expect(first.jobs.map((j) => j.id)).toEqual([c, b]);
    expect(first.nextPageToken).not.toBeNull();
    const second = await client.list({ queue, pageSize: 10, pageToken: first.nextPageToken });
    expect(second.jobs.map((j) => j.id)).toEqual([a]);
    expect(second.nextPageToken).toBeNull();
    // A page of small jobs is cut by page_size alone, as before.
    const small = queueName('small-page');
    for (const n of [1, 2, 3]) await client.submit({ queue: small, type: 't', payload: { n } });
    const page = await client.list({ queue: small, pageSize: 3 });
    expect([page.jobs.length, page.nextPageToken]).toEqual([3, null]);
  });
});

describe('whoAmI', () => {
  it('auth off: anonymous, role admin, no token', async () => {
    expect(await client.whoAmI()).toEqual({ authOn: false, kind: 'anonymous', name: null, role: 'admin', queues: [], tokenId: null, expiresAt: null });
  });

  it("auth on: each token sees itself; without one UNAUTHENTICATED; a token limited to queues sees only its queues' workers, dead letters and series", async () => {
    // A server of its own: its first token turns auth on for its database only.
    const other = await serverSetup();
    const expiresAt = new Date(Date.now() + 86_400_000);
    const admin = await tokenInsert(other.databaseUrl, { role: 'admin', name: 'ops-admin' });
    const viewer = await tokenInsert(other.databaseUrl, { role: 'viewer', name: 'billing-viewer', queues: ['billing.*'], expiresAt });
    const producer = await tokenInsert(other.databaseUrl, { role: 'producer', name: 'shop' });
    const as = (secret?: string) => {
      const c = new EvoraClient({ address: other.address, token: secret });
      clients.push(c);
      return c;
    };
    const anonymous = as();
    await waitFor(async () => (await apiError(anonymous.whoAmI())).codeName === 'UNAUTHENTICATED', { what: 'auth on' });

    const asAdmin = as(admin.secret);
    const asViewer = as(viewer.secret);
    expect(await asAdmin.whoAmI()).toEqual({ authOn: true, kind: 'token', name: 'ops-admin', role: 'admin', queues: [], tokenId: admin.id, expiresAt: null });
    const me = await asViewer.whoAmI();
    expect(me).toMatchObject({ authOn: true, kind: 'token', name: 'billing-viewer', role: 'viewer', queues: ['billing.*'], tokenId: viewer.id });
    expect(me.expiresAt?.getTime()).toBe(expiresAt.getTime());
    // Any role may ask who it is, also one that may read nothing of queues.
    expect(await as(producer.secret).whoAmI()).toMatchObject({ name: 'shop', role: 'producer' });
    expect((await apiError(as(producer.secret).listWorkers())).codeName).toBe('PERMISSION_DENIED');

    // Workers (admin token) on a queue in the viewer's scope and one outside it, each leaving a dead letter.
    const onWorker = (workerId: string, queue: string) => worker({ address: other.address, token: admin.secret, workerId, queues: [queue], slots: 1 });
    await deadLettersMake(asAdmin, onWorker('in-scope', 'billing.invoices'), { queue: 'billing.invoices', type: 'render', errors: ['template missing'] });
    await deadLettersMake(asAdmin, onWorker('out-of-scope', 'shipping.labels'), { queue: 'shipping.labels', type: 'print', errors: ['printer offline'] });

    await waitFor(async () => (await asAdmin.listWorkers()).length === 2, { what: 'both workers recorded' });
    expect((await asAdmin.listWorkers()).map((w) => [w.workerId, w.queues])).toEqual([
      ['in-scope', ['billing.invoices']],
      ['out-of-scope', ['shipping.labels']],
    ]);
    expect((await asViewer.listWorkers()).map((w) => [w.workerId, w.queues])).toEqual([['in-scope', ['billing.invoices']]]);
    expect((await apiError(asViewer.listWorkers({ queue: 'shipping.labels' }))).codeName).toBe('PERMISSION_DENIED');

    expect((await asAdmin.deadLetterGroups()).groups.map((g) => [g.queue, g.error])).toEqual(
      expect.arrayContaining([
        ['billing.invoices', 'template missing'],
        ['shipping.labels', 'printer offline'],
      ]),
    );
    expect((await asViewer.deadLetterGroups({ queue: 'billing.invoices' })).groups.map((g) => [g.queue, g.type, g.error, g.count])).toEqual([
      ['billing.invoices', 'render', 'template missing', 1],
    ]);
    // A limited token must name one of its queues.
    expect((await apiError(asViewer.deadLetterGroups())).codeName).toBe('PERMISSION_DENIED');
    expect((await apiError(asViewer.deadLetterGroups({ queue: 'shipping.labels' }))).codeName).toBe('PERMISSION_DENIED');

    // The series of every queue sums only the viewer's: its one dead letter, not the other queue's.
    const own = (await waitFor(
      async () => {
        const p = await asAdmin.queueSeries({ minutes: 5 });
        return p.reduce((n, x) => n + x.deadLettered, 0) === 2 ? asViewer.queueSeries({ minutes: 5 }) : null;
      },
      { what: 'both dead letters projected', timeoutMs: 20_000 },
    ))!;
    expect(own.reduce((n, x) => n + x.deadLettered, 0)).toBe(1);
    expect((await apiError(asViewer.queueSeries({ queue: 'shipping.labels' }))).codeName).toBe('PERMISSION_DENIED');

    // It reads only its queues' telemetry, not every queue's to drop most of it: a day's series
    // over 500 busy queues cost a viewer of one small queue 20 s and 1 GB of the server's heap.
    const read = vi.spyOn(other.server.telemetry, 'read');
    expect((await asViewer.listQueueStats()).map((s) => s.queue)).toEqual(['billing.invoices']);
    expect((await asViewer.queueSeries({ minutes: 5 })).reduce((n, x) => n + x.deadLettered, 0)).toBe(1);
    expect(read.mock.calls.map(([params]) => params.queues)).toEqual([['billing.invoices'], ['billing.invoices']]);
    read.mockRestore();
  });
});

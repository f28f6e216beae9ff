import * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SubmitJobRequest } from '../../src/gen/evora/v1/job.js';
import { JobState } from '../../src/gen/evora/v1/job.js';
import { EvoraClient, EvoraWorker, NonRetryableError, type Job, type JobStateName, type JsonObject } from '../../src/sdk/index.js';
import type { EvoraServer } from '../../src/server/server.js';
import { queueName } from '../helpers/factories.js';
import { expectStatus } from '../helpers/grpc-status.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { jobInState, waitFor } from '../helpers/wait.js';

/**
 * Job dependencies through the API: a graph submitted in one SubmitJobs call, run by a real
 * TS SDK worker (parents' results in ctx.parentResults), DLQ propagation and retry, and bad
 * input that changes nothing.
 */

let client: EvoraClient;
let clients: Clients;
let address: string;
let server: EvoraServer;
let sql: pg.Pool;
const workers: EvoraWorker[] = [];

beforeAll(async () => {
  let databaseUrl: string;
  ({ clients, address, databaseUrl, server } = await serverSetup());
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

function jobIn(id: string, state: JobStateName): Promise<Job> {
  return jobInState<Job>(client, id, state);
}

/** What the handlers saw, in the order they started. */
interface Seen {
  type: string;
  parentResults: Record<string, JsonObject>;
}

/** A started worker on `queue` that completes each job with { from: type }, or fails type `failType` for good. */
async function worker(queue: string, seen: Seen[], failType: { value: string | null }): Promise<EvoraWorker> {
  const w = new EvoraWorker({ address, workerId: `w-${queueName('')}`, queues: [queue], slots: 4 });
  workers.push(w);
  for (const type of ['a', 'b', 'c', 'd']) {
    w.handle(type, async (job, ctx) => {
      seen.push({ type: job.type, parentResults: { ...ctx.parentResults } });
      if (failType.value === type) throw new NonRetryableError(`${type} fails`);
      return { from: type };
    });
  }
  await w.start();
  return w;
}

/** The diamond A -> B, A -> C, B and C -> D in one call, refs out of order. */
async function submitDiamond(queue: string) {
  const results = await client.submitMany([
    { queue, type: 'd', ref: 'd', dependsOnRefs: ['b', 'c'] },
    { queue, type: 'c', ref: 'c', dependsOnRefs: ['a'] },
    { queue, type: 'b', ref: 'b', dependsOnRefs: ['a'] },
    { queue, type: 'a', ref: 'a' },
  ]);
  const [d, c, b, a] = results.map((r) => r.job);
  return { a: a!, b: b!, c: c!, d: d! };
}

describe('a diamond through the API', () => {
  it('D starts only after B and C complete and sees both results; the jobs show their parents', async () => {
    const queue = queueName();
    const { a, b, c, d } = await submitDiamond(queue);
    expect([a.state, b.state, c.state, d.state]).toEqual(['PENDING', 'WAITING', 'WAITING', 'WAITING']);
    expect([...d.dependsOn].sort()).toEqual([b.id, c.id].sort());
    expect((await client.get(b.id)).dependsOn).toEqual([a.id]);
    const waiting = await client.list({ queue, states: 'WAITING' });
    expect(waiting.jobs.map((j) => j.id).sort()).toEqual([b.id, c.id, d.id].sort());

    const seen: Seen[] = [];
    await worker(queue, seen, { value: null });
    await jobIn(d.id, 'COMPLETED');
    expect(seen.map((s) => s.type).slice(0, 1)).toEqual(['a']);
    expect(seen.map((s) => s.type).slice(1, 3).sort()).toEqual(['b', 'c']);
    expect(seen[3]).toEqual({ type: 'd', parentResults: { [b.id]: { from: 'b' }, [c.id]: { from: 'c' } } });
    expect(seen.find((s) => s.type === 'b')!.parentResults).toEqual({ [a.id]: { from: 'a' } });
    // D started after both B and C finished.
    const [bDone, cDone, dRun] = await Promise.all([client.get(b.id), client.get(c.id), client.get(d.id)]);
    expect(dRun.startedAt!.getTime()).toBeGreaterThanOrEqual(Math.max(bDone.finishedAt!.getTime(), cDone.finishedAt!.getTime()));
  });

  it('A dead-lettered cancels B, C and D naming A; retrying A runs the whole graph', async () => {
    const queue = queueName();
    const { a, b, c, d } = await submitDiamond(queue);
    const seen: Seen[] = [];
    const fail = { value: 'a' as string | null };
    await worker(queue, seen, fail);
    await jobIn(a.id, 'DLQ');
    for (const id of [b.id, c.id, d.id]) {
      const job = await jobIn(id, 'CANCELLED');
      expect(job.lastError).toBe(`parent ${a.id} ended DLQ`);
    }
    fail.value = null;
    expect((await client.retry(a.id)).state).toBe('PENDING');
    await jobIn(d.id, 'COMPLETED');
    for (const id of [a.id, b.id, c.id]) expect((await client.get(id)).state).toBe('COMPLETED');
    expect(seen.at(-1)).toEqual({ type: 'd', parentResults: { [b.id]: { from: 'b' }, [c.id]: { from: 'c' } } });
  });
});

describe('bad input changes nothing', () => {
  const ok = (queue: string, extra: Partial<SubmitJobRequest> = {}): SubmitJobRequest => ({
    queue, type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0), ...extra,
  });

  async function jobsIn(queue: string): Promise<number> {
    return (await sql.query('SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1', [queue])).rows[0].n;
  }

  it('unknown ref, ref used twice, cycle, unknown or malformed id, refs in SubmitJob', async () => {
    const queue = queueName();
    const { INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION } = grpc.status;
    const submitJobs = (jobs: SubmitJobRequest[]) => call(clients.jobs, 'submitJobs', { idsOnly: false, jobs });
    await expectStatus(
      submitJobs([ok(queue, { ref: 'a' }), ok(queue, { dependsOnRefs: ['nope'] })]),
      INVALID_ARGUMENT,
      /^jobs\[1\]\.depends_on_refs names unknown ref "nope"$/,
    );
    await expectStatus(submitJobs([ok(queue, { ref: 'a' }), ok(queue, { ref: 'a' })]), INVALID_ARGUMENT, /^ref "a" is used twice \(jobs\[0\] and jobs\[1\]\)$/);
    await expectStatus(
      submitJobs([ok(queue, { ref: 'a', dependsOnRefs: ['c'] }), ok(queue, { ref: 'b', dependsOnRefs: ['a'] }), ok(queue, { ref: 'c', dependsOnRefs: ['b'] })]),
      INVALID_ARGUMENT,
      /^depends_on_refs form a cycle: "a" -> "c" -> "b" -> "a"$/,
    );
    await expectStatus(submitJobs([ok(queue, { ref: 'a', dependsOnRefs: ['a'] })]), INVALID_ARGUMENT, /cycle: "a" -> "a"$/);
    const missing = '01900000-0000-7000-8000-000000000001';
    await expectStatus(
      submitJobs([ok(queue, { ref: 'a' }), ok(queue, { dependsOn: [missing], dependsOnRefs: ['a'] })]),
      NOT_FOUND,
      new RegExp(`^jobs\\[1\\]\\.depends_on names job ${missing}, which does not exist$`),
    );
    await expectStatus(call(clients.jobs, 'submitJob', ok(queue, { dependsOn: ['not-a-uuid'] })), INVALID_ARGUMENT, /^depends_on\[0\] "not-a-uuid" is not a UUID$/);
    await expectStatus(call(clients.jobs, 'submitJob', ok(queue, { dependsOnRefs: ['a'] })), INVALID_ARGUMENT, /^depends_on_refs names jobs of the same SubmitJobs call/);
    expect(await jobsIn(queue)).toBe(0);

    // A parent already in the DLQ: refused, nothing created.
    const dead = (await client.submit({ queue: queueName(), type: 'a' })).job;
    const seen: Seen[] = [];
    await worker(dead.queue, seen, { value: 'a' });
    await jobIn(dead.id, 'DLQ');
    await expectStatus(call(clients.jobs, 'submitJob', ok(queue, { dependsOn: [dead.id] })), FAILED_PRECONDITION, /which is DLQ: retry it first/);
    expect(await jobsIn(queue)).toBe(0);
  });

  it('a replay with different parents is ALREADY_EXISTS naming depends_on', async () => {
    const queue = queueName();
    const p1 = (await client.submit({ queue, type: 't' })).job;
    const p2 = (await client.submit({ queue, type: 't' })).job;
    await client.submit({ queue, type: 't', idempotencyKey: 'k', dependsOn: [p1.id] });
    expect((await client.submit({ queue, type: 't', idempotencyKey: 'k', dependsOn: [p1.id] })).created).toBe(false);
    await expectStatus(
      call(clients.jobs, 'submitJob', ok(queue, { idempotencyKey: 'k', dependsOn: [p2.id] })),
      grpc.status.ALREADY_EXISTS,
      /submitted with a different depends_on$/,
    );
  });

  it('a parent id in upper case names the same job: the child waits for it, and a replay in either case is the same', async () => {
    const queue = queueName();
    const parent = (await client.submit({ queue, type: 't' })).job;
    const upper = parent.id.toUpperCase();
    const child = await client.submit({ queue, type: 't', idempotencyKey: 'c', dependsOn: [upper, parent.id] });
    expect(child.job.state).toBe('WAITING');
    expect(child.job.dependsOn).toEqual([parent.id]);
    expect((await client.submit({ queue, type: 't', idempotencyKey: 'c', dependsOn: [parent.id] })).created).toBe(false);
  });

  it('JOB_STATE_WAITING filters ListJobs over the raw API', async () => {
    const queue = queueName();
    const parent = (await client.submit({ queue, type: 't' })).job;
    const child = (await client.submit({ queue, type: 't', dependsOn: [parent.id] })).job;
    const page = await call(clients.jobs, 'listJobs', { queue, states: [JobState.JOB_STATE_WAITING], type: '', pageSize: 0, pageToken: '', idempotencyKey: '' });
    expect(page.jobs.map((j) => [j.id, j.state, j.dependsOn])).toEqual([[child.id, JobState.JOB_STATE_WAITING, [parent.id]]]);
    await waitFor(async () => (await client.queueStats(queue)).counts.WAITING === 1, { what: 'WAITING in queue stats' });
  });
});

describe('a failed parent and retention', () => {
  /** Retried-manually events of `ids`, in the outbox or already projected into the recent events. */
  async function retriedEvents(ids: string[]): Promise<number> {
    const { rows } = await sql.query(
      `SELECT count(*)::int AS n FROM (
         SELECT u.job_id, u.kind FROM evora.job_events e CROSS JOIN LATERAL unnest(e.job_ids, e.kinds) AS u(job_id, kind)
         UNION ALL
         SELECT u.job_id, u.kind FROM evora.telemetry_recent_events e CROSS JOIN LATERAL unnest(e.job_ids, e.kinds) AS u(job_id, kind)
       ) ev WHERE ev.job_id = ANY ($1) AND ev.kind = 'retried_manually'`,
      [ids],
    );
    return rows[0].n;
  }

  /** The rows RetryJob must leave as they were. */
  async function rowsOf(ids: string[]) {
    const { rows } = await sql.query(
      'SELECT id, state::text, cancelled_by, last_error, finished_at FROM evora.jobs WHERE id = ANY ($1) ORDER BY id',
      [ids],
    );
    return rows;
  }

  it('retention keeps it while a child it cancelled is there; deleted (a purge), that child is never retried (RetryJob FAILED_PRECONDITION, RetryJobs skips it), down the graph; a child of a COMPLETED parent deleted since still is', async () => {
    const parents = queueName();
    const queue = queueName();
    // The parents' queue keeps finished jobs for an hour; the children's, for the default week.
    await client.upsertQueue(parents, { dlqRetentionSeconds: 3600, completedRetentionSeconds: 3600 });
    // P fails: C is cancelled naming P, G (C's child) naming C, GG (G's child) naming G. P2
    // fails: C2 is cancelled. OK completes: K1 and K2 are released.
    const [p, c, g, gg, ok, k1, k2, p2, c2] = (
      await client.submitMany([
        { queue: parents, type: 'a', ref: 'p' },
        { queue, type: 'b', ref: 'c', dependsOnRefs: ['p'] },
        { queue, type: 'b', ref: 'g', dependsOnRefs: ['c'] },
        { queue, type: 'b', dependsOnRefs: ['g'] },
        { queue: parents, type: 'c', ref: 'ok' },
        { queue, type: 'b', dependsOnRefs: ['ok'] },
        { queue, type: 'b', dependsOnRefs: ['ok'] },
        { queue: parents, type: 'a', ref: 'p2' },
        { queue, type: 'b', dependsOnRefs: ['p2'] },
      ])
    ).map((r) => r.job.id) as [string, string, string, string, string, string, string, string, string];
    await worker(parents, [], { value: 'a' });
    await jobIn(p, 'DLQ');
    await jobIn(p2, 'DLQ');
    await jobIn(ok, 'COMPLETED');
    await jobIn(gg, 'CANCELLED');
    await jobIn(c2, 'CANCELLED');
    expect((await rowsOf([c, g, gg])).map((r) => [r.id, r.cancelled_by, r.last_error])).toEqual(
      [[c, p, `parent ${p} ended DLQ`], [g, c, `parent ${p} ended DLQ`], [gg, g, `parent ${p} ended DLQ`]].sort((x, y) => x[0]!.localeCompare(y[0]!)),
    );
    // No worker serves the children's queue: K1 and K2 wait PENDING until an operator cancels them.
    for (const k of [k1, k2]) {
      await jobIn(k, 'PENDING');
      expect((await client.cancel(k)).state).toBe('CANCELLED');
    }

    // Retention, as the leader's pruner runs it, two hours from now: OK goes, nothing of the
    // children's queue, and neither P nor P2, each kept by the child it cancelled.
    await waitFor(async () => (await server.store.outboxLag()).events === 0, { what: 'the outbox projected' });
    const prune = async () => {
      const run = await server.maintainer.services.pruner.runOnce(new AbortController().signal, { now: new Date(Date.now() + 2 * 3600_000) });
      return run.counts.filter((n) => n.queue === parents || n.queue === queue).map((n) => [n.queue, n.state, n.jobs]);
    };
    expect(await prune()).toEqual([[parents, 'COMPLETED', 1]]);
    expect((await client.get(p)).state).toBe('DLQ');
    // A refused retry names the job to retry first: P, the parent of C and the root of G and GG.
    await expectStatus(call(clients.jobs, 'retryJob', { id: c }), grpc.status.FAILED_PRECONDITION, `job ${c} has a parent in DLQ or CANCELLED (parent ${p} ended DLQ); retry parent ${p} first`);
    await expectStatus(
      call(clients.jobs, 'retryJob', { id: gg }),
      grpc.status.FAILED_PRECONDITION,
      `job ${gg} has a parent in DLQ or CANCELLED (parent ${p} ended DLQ); retry job ${p} first (parent ${g} is held back by it)`,
    );
    // Once C2 is gone (an operator's purge here; its own retention otherwise), P2 goes at the next run.
    await waitFor(async () => (await client.purgeJobs({ ids: [c2] })) === 1, { what: 'C2 purged' });
    expect(await prune()).toEqual([[parents, 'DLQ', 1]]);
    await expect(client.get(p2)).rejects.toMatchObject({ codeName: 'NOT_FOUND' });

    // An operator purges P all the same.
    await waitFor(async () => (await client.purgeJobs({ ids: [p] })) === 1, { what: 'P purged' });
    const before = await rowsOf([c, g, gg]);

    // P can never complete: C is refused, naming it.
    await expectStatus(
      call(clients.jobs, 'retryJob', { id: c }),
      grpc.status.FAILED_PRECONDITION,
      `job ${c} was cancelled because parent ${p} did not complete (parent ${p} ended DLQ), and that parent no longer exists (deleted by retention or a purge): it can never complete; submit the job again without it`,
    );
    expect(await prune()).toEqual([]);
    // G waits on C, which stays CANCELLED for good: the refusal says so, not "retry P" (gone);
    // and GG's names its parent G, the job C above it, and P.
    await expectStatus(
      call(clients.jobs, 'retryJob', { id: g }),
      grpc.status.FAILED_PRECONDITION,
      `job ${g} has a parent that can never complete: parent ${c} was cancelled because its parent ${p} did not complete (parent ${p} ended DLQ), and ${p} no longer exists (deleted by retention or a purge); submit the job again without it`,
    );
    await expectStatus(
      call(clients.jobs, 'retryJob', { id: gg }),
      grpc.status.FAILED_PRECONDITION,
      `job ${gg} has a parent that can never complete: parent ${g} is held back by job ${c}, which was cancelled because its parent ${p} did not complete (parent ${p} ended DLQ), and ${p} no longer exists (deleted by retention or a purge); submit the job again without it`,
    );
    expect(await rowsOf([c, g, gg])).toEqual(before);

    // The control: K1's parent COMPLETED before it was deleted, so K1 runs again.
    expect((await client.retry(k1)).state).toBe('PENDING');
    // RetryJobs over the queue's CANCELLED jobs takes K2 only: C and G are neither retried nor counted.
    expect(await client.retryJobs({ queue, states: 'CANCELLED' }, { dryRun: true })).toBe(1);
    expect(await client.retryJobs({ queue, states: 'CANCELLED' })).toBe(1);
    expect((await client.get(k2)).state).toBe('PENDING');
    expect(await client.retryJobs({ ids: [c, g, gg] })).toBe(0);

    // C deleted too (a purge, as retention would): G now names a parent that is gone.
    await waitFor(async () => (await client.purgeJobs({ ids: [c] })) === 1, { what: 'C purged' });
    await expectStatus(
      call(clients.jobs, 'retryJob', { id: g }),
      grpc.status.FAILED_PRECONDITION,
      `job ${g} was cancelled because parent ${c} did not complete (parent ${p} ended DLQ), and that parent no longer exists (deleted by retention or a purge): it can never complete; submit the job again without it`,
    );
    await expectStatus(
      call(clients.jobs, 'retryJob', { id: gg }),
      grpc.status.FAILED_PRECONDITION,
      `job ${gg} has a parent that can never complete: parent ${g} was cancelled because its parent ${c} did not complete (parent ${p} ended DLQ), and ${c} no longer exists (deleted by retention or a purge); submit the job again without it`,
    );
    expect(await client.retryJobs({ queue, states: 'CANCELLED' }, { dryRun: true })).toBe(0);
    expect(await client.retryJobs({ queue, states: 'CANCELLED' })).toBe(0);

    // Nothing was changed or recorded for C, G and GG.
    expect(await rowsOf([g, gg])).toEqual(before.filter((r) => r.id !== c));
    expect(await retriedEvents([c, g, gg])).toBe(0);
    const audit = await sql.query(`SELECT count(*)::int AS n FROM evora.audit_events WHERE action = 'job.retry' AND target = ANY ($1)`, [[c, g, gg]]);
    expect(audit.rows[0].n).toBe(0);
  });

  it('two failed parents, the one cancelled_by does not name purged: the other\'s retry and completion leave the child CANCELLED naming the purged one, never run; an operator-cancelled child too; a new child naming it is NOT_FOUND', async () => {
    const parents = queueName();
    const queue = queueName();
    // C and O wait on P1 and P2; O is cancelled by an operator before they run.
    const [p1, p2, c, o] = (
      await client.submitMany([
        { queue: parents, type: 'a', ref: 'p1' },
        { queue: parents, type: 'a', ref: 'p2' },
        { queue, type: 'b', dependsOnRefs: ['p1', 'p2'] },
        { queue, type: 'b', dependsOnRefs: ['p1', 'p2'] },
      ])
    ).map((r) => r.job.id) as [string, string, string, string];
    expect((await client.cancel(o)).state).toBe('CANCELLED');
    const fail = { value: 'a' as string | null };
    await worker(parents, [], fail);
    await jobIn(p1, 'DLQ');
    await jobIn(p2, 'DLQ');
    // C names the parent that failed first; the other is the one purged.
    const named = (await rowsOf([c]))[0].cancelled_by as string;
    expect([p1, p2]).toContain(named);
    const purged = named === p1 ? p2 : p1;
    // While another transaction holds C (a retry of C locks it, then its parents), a purge
    // leaves its parent for a later call rather than wait for C (and deadlock with that retry).
    await waitFor(async () => (await server.store.outboxLag()).events === 0, { what: 'the outbox projected' });
    const holder = await sql.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM evora.jobs WHERE id = $1 FOR UPDATE', [c]);
      expect(await client.purgeJobs({ ids: [purged] })).toBe(0);
      await holder.query('ROLLBACK');
    } finally {
      holder.release();
    }
    expect(await client.purgeJobs({ ids: [purged] })).toBe(1);

    // The named parent runs again and completes: C and O must not run without the purged one.
    fail.value = null;
    expect((await client.retry(named)).state).toBe('PENDING');
    await jobIn(named, 'COMPLETED');
    expect((await rowsOf([c, o])).map((r) => [r.id, r.state, r.cancelled_by, r.last_error])).toEqual(
      [c, o].sort().map((id) => [id, 'CANCELLED', purged, `parent ${purged} ended DLQ`]),
    );
    for (const id of [c, o]) {
      await expectStatus(
        call(clients.jobs, 'retryJob', { id }),
        grpc.status.FAILED_PRECONDITION,
        `job ${id} was cancelled because parent ${purged} did not complete (parent ${purged} ended DLQ), and that parent no longer exists (deleted by retention or a purge): it can never complete; submit the job again without it`,
      );
    }
    expect(await client.retryJobs({ ids: [c, o] })).toBe(0);
    // A child submitted after the purge cannot name it.
    await expectStatus(
      call(clients.jobs, 'submitJob', { queue, type: 'b', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [purged], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) }),
      grpc.status.NOT_FOUND,
      `depends_on names job ${purged}, which does not exist`,
    );
  });
});

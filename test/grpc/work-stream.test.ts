import { beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { JobState } from '../../src/gen/evora/v1/job.js';
import { AckResult, LeaseLostReason, type LeasedJob } from '../../src/gen/evora/v1/worker.js';
import type { EvoraServer } from '../../src/server/server.js';
import { queueName } from '../helpers/factories.js';
import { rawWorkers } from '../helpers/raw-worker.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The Work stream's protocol rules: ack result codes, messages sent before the welcome,
 * snooze without run_at, malformed ids and tokens, and backpressure on a worker that does
 * not read.
 */

let clients: Clients;
let server: EvoraServer;
let databaseUrl: string;
beforeAll(async () => {
  ({ clients, server, databaseUrl } = await serverSetup());
});
const worker = rawWorkers(() => clients);

const submit = async (queue: string, payload: Record<string, unknown> = {}) =>
  (await call(clients.jobs, 'submitJob', { queue, type: 't', payload, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) })).job!;
const getJob = async (id: string) => (await call(clients.jobs, 'getJob', { id })).job!;
const lease = (l: LeasedJob) => ({ jobId: l.job!.id, leaseToken: l.leaseToken });

describe('every ack carries a result code', () => {
  it('ACCEPTED for a current lease, LEASE_LOST for one that is not, INVALID for a malformed report', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const w = worker();
    await w.hello('acks', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    const leased = w.jobs[0]!;

    w.send({ msg: { $case: 'complete', value: { jobId: id, leaseToken: 'junk' } } });
    w.complete(leased, { ok: true });
    w.complete(leased, { again: true }); // the job is finished: that lease is no longer current
    await w.until(() => w.acks(id).length === 3);
    // Each ack names the lease token its report carried, so a worker can match them.
    expect(w.acks(id)).toEqual([
      { jobId: id, leaseToken: 'junk', accepted: false, result: AckResult.ACK_RESULT_INVALID, reason: expect.stringMatching(/lease_token "junk" is not a UUID/), databaseUnavailable: false },
      { jobId: id, leaseToken: leased.leaseToken, accepted: true, result: AckResult.ACK_RESULT_ACCEPTED, reason: '', databaseUnavailable: false },
      { jobId: id, leaseToken: leased.leaseToken, accepted: false, result: AckResult.ACK_RESULT_LEASE_LOST, reason: expect.any(String), databaseUnavailable: false },
    ]);
    expect(await getJob(id)).toMatchObject({ state: JobState.JOB_STATE_COMPLETED, result: { ok: true } });
  });

  it('RETRY_LATER when the write fails in the database; the same report sent again is accepted', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const w = worker();
    await w.hello('retry', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    try {
      // Hold the jobs table so the completion waits, then end the server connections that
      // wait for it: the write fails as it would if the database went away mid-statement.
      await admin.query('BEGIN');
      await admin.query('LOCK TABLE evora.jobs IN ACCESS EXCLUSIVE MODE');
      w.complete(w.jobs[0]!);
      await waitFor(
        async () => {
          await admin.query(
            `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`,
          );
          return w.acks(id).length === 1;
        },
        { what: 'the failed write to be acked' },
      );
      await admin.query('ROLLBACK');
    } finally {
      await admin.end();
    }
    expect(w.acks(id)[0]).toMatchObject({ accepted: false, result: AckResult.ACK_RESULT_RETRY_LATER });
    expect((await getJob(id)).state).toBe(JobState.JOB_STATE_RUNNING);

    w.complete(w.jobs[0]!);
    await w.until(() => w.acks(id).length === 2);
    expect(w.acks(id)[1]).toMatchObject({ accepted: true, result: AckResult.ACK_RESULT_ACCEPTED });
    expect((await getJob(id)).state).toBe(JobState.JOB_STATE_COMPLETED);
  });
});

describe('messages sent before the welcome', () => {
  it('hello, heartbeat and complete back to back: the session opens, then both are answered in order of arrival', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    // The lease comes from a unary claim, as a worker reconnecting with a job in hand has it.
    const claimed = (await call(clients.workers, 'claimJobs', { workerId: 'early', queues: [queue], max: 1, jobTypes: [] })).jobs[0]!;
    const w = worker();
    w.helloSend('early', [queue], 1, { held: [lease(claimed)] });
    w.send({ msg: { $case: 'heartbeat', value: { leases: [lease(claimed)] } } });
    w.complete(claimed, { early: true });
    await w.until(() => w.acks(id).length === 1 && w.messages('heartbeatAck').length === 1);
    expect(w.received[0]?.msg?.$case).toBe('welcome');
    // Once the session is open the heartbeat and the completion run side by side: the
    // heartbeat extends the lease, or finds the job already completed and tells it lost.
    const extended = w.messages('heartbeatAck')[0]!.leases.map((l) => l.jobId);
    if (extended.length === 0) await w.until(() => w.messages('leaseLost').some((l) => l.jobId === id));
    else expect(extended).toEqual([id]);
    expect(w.acks(id)[0]).toMatchObject({ accepted: true, result: AckResult.ACK_RESULT_ACCEPTED });
    expect(await getJob(id)).toMatchObject({ state: JobState.JOB_STATE_COMPLETED, result: { early: true } });
  });

  it('hello then drain back to back: the worker gets the welcome and no job; another worker gets them all', async () => {
    const queue = queueName();
    const ids = new Set<string>();
    for (let i = 0; i < 5; i++) ids.add((await submit(queue, { i })).id);
    const drained = worker();
    drained.helloSend('drained', [queue], 10);
    drained.send({ msg: { $case: 'drain', value: {} } });
    await drained.welcomed();
    // The drain was handled with the welcome: the session has no free slots.
    expect(server.dispatcher.queueWorkers(queue)).toEqual({ workers: 1, freeSlots: 0 });
    const other = worker();
    await other.hello('other', [queue], 10);
    await other.until(() => other.jobs.length === 5);
    expect(new Set(other.jobs.map((j) => j.job!.id))).toEqual(ids);
    expect(drained.jobs).toHaveLength(0);
  });
});

describe('ending', () => {
  it('a worker that half-closes right after a report still gets its ack before the stream ends', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const w = worker();
    await w.hello('leaving', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    w.complete(w.jobs[0]!);
    w.stream.end();
    await w.until(() => w.ended);
    expect(w.error).toBeNull();
    expect(w.acks(id)).toMatchObject([{ accepted: true, result: AckResult.ACK_RESULT_ACCEPTED }]);
  });
});

describe('snooze without run_at means now', () => {
  it('on the stream: acked, PENDING and claimable at once, without using up an attempt', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const w = worker();
    await w.hello('snoozer', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    const before = new Date();
    w.send({ msg: { $case: 'snooze', value: lease(w.jobs[0]!) } });
    await w.until(() => w.acks(id).length === 1);
    expect(w.acks(id)[0]).toMatchObject({ accepted: true, result: AckResult.ACK_RESULT_ACCEPTED });
    // Given back and claimable at once: it comes straight back to this worker.
    await w.until(() => w.jobs.length === 2);
    expect(w.jobs[1]!.job).toMatchObject({ id, attempt: 1 });
    expect(w.jobs[1]!.job!.runAt!.getTime()).toBeGreaterThanOrEqual(before.getTime() - 1);
    expect(w.jobs[1]!.job!.runAt!.getTime()).toBeLessThanOrEqual(w.jobs[1]!.job!.startedAt!.getTime());
  });

  it('on SnoozeJob: PENDING with run_at now, and the next ClaimJobs gets it', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const first = (await call(clients.workers, 'claimJobs', { workerId: 'u', queues: [queue], max: 1, jobTypes: [] })).jobs[0]!;
    const snoozed = await call(clients.workers, 'snoozeJob', lease(first));
    expect(snoozed.job).toMatchObject({ id, state: JobState.JOB_STATE_PENDING, attempt: 0 });
    expect(snoozed.job!.runAt!.getTime()).toBeLessThanOrEqual(Date.now());
    const again = await call(clients.workers, 'claimJobs', { workerId: 'u', queues: [queue], max: 1, jobTypes: [] });
    expect(again.jobs.map((j) => j.job!.id)).toEqual([id]);
  });
});

describe('heartbeats match leases by job id and token', () => {
  it('a stale and the current lease of one job: the current one is extended with its token, the stale one is told lost with its own, and the slot stays held', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const w = worker();
    await w.hello('two-leases', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    const stale = lease(w.jobs[0]!);
    // Snoozed for now, the job comes straight back to this worker's one slot with a new lease.
    w.send({ msg: { $case: 'snooze', value: stale } });
    await w.until(() => w.jobs.length === 2);
    const current = lease(w.jobs[1]!);
    expect(current.jobId).toBe(id);
    expect(current.leaseToken).not.toBe(stale.leaseToken);

    // The current lease first: a match by job id alone answers it with the stale token.
    w.send({ msg: { $case: 'heartbeat', value: { leases: [current, stale] } } });
    await w.until(() => w.messages('heartbeatAck').length === 1 && w.messages('leaseLost').length === 1);
    expect(w.messages('heartbeatAck')[0]!.leases).toEqual([{ ...current, leaseExpiresAt: expect.any(Date), cancelRequested: false }]);
    expect(w.messages('leaseLost')).toEqual([{ ...stale, code: LeaseLostReason.LEASE_LOST_REASON_EXPIRED, reason: expect.any(String) }]);

    // The lost stale lease did not free the current one's slot: it is still held, the
    // session has no free slot, and the current lease still completes.
    expect(server.dispatcher.queueWorkers(queue)).toEqual({ workers: 1, freeSlots: 0 });
    w.complete(w.jobs[1]!);
    await w.until(() => w.acks(id).some((a) => a.leaseToken === current.leaseToken));
    expect(w.acks(id).find((a) => a.leaseToken === current.leaseToken)).toMatchObject({ result: AckResult.ACK_RESULT_ACCEPTED });
  });
});

describe('malformed ids and tokens on the stream', () => {
  it('complete, fail and snooze with a malformed id or token are acked INVALID and change nothing', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const w = worker();
    await w.hello('malformed', [queue], 1, { batches: true });
    await w.until(() => w.jobs.length === 1);
    const token = w.jobs[0]!.leaseToken;
    w.send({ msg: { $case: 'fail', value: { jobId: id, leaseToken: 'x', error: 'e', nonRetryable: true } } });
    w.send({ msg: { $case: 'snooze', value: { jobId: id, leaseToken: `${token}0` } } });
    w.send({ msg: { $case: 'completes', value: { completes: [{ jobId: 'job-1', leaseToken: token }, { jobId: id, leaseToken: '' }] } } });
    await w.until(() => w.allAcks().length === 4);
    expect(w.allAcks().map((a) => [a.jobId, a.result, a.accepted])).toEqual([
      [id, AckResult.ACK_RESULT_INVALID, false],
      [id, AckResult.ACK_RESULT_INVALID, false],
      ['job-1', AckResult.ACK_RESULT_INVALID, false],
      [id, AckResult.ACK_RESULT_INVALID, false],
    ]);
    expect(w.allAcks().map((a) => a.reason)).toEqual([
      expect.stringMatching(/lease_token "x" is not a UUID/),
      expect.stringMatching(/lease_token ".*" is not a UUID/),
      expect.stringMatching(/job_id "job-1" is not a UUID/),
      expect.stringMatching(/lease_token is required/),
    ]);
    expect((await getJob(id)).state).toBe(JobState.JOB_STATE_RUNNING);
  });

  it('a heartbeat naming a malformed lease: that one is told lease_lost (EXPIRED), the others are extended', async () => {
    const queue = queueName();
    const { id } = await submit(queue);
    const w = worker();
    await w.hello('beats', [queue], 1);
    await w.until(() => w.jobs.length === 1);
    w.send({ msg: { $case: 'heartbeat', value: { leases: [lease(w.jobs[0]!), { jobId: 'nope', leaseToken: 'junk' }] } } });
    await w.until(() => w.messages('heartbeatAck').length === 1);
    expect(w.messages('heartbeatAck')[0]!.leases.map((l) => l.jobId)).toEqual([id]);
    expect(w.messages('leaseLost')).toEqual([{ jobId: 'nope', leaseToken: 'junk', code: LeaseLostReason.LEASE_LOST_REASON_EXPIRED, reason: expect.any(String) }]);
    // The well-formed lease is still held: completing it is accepted.
    w.complete(w.jobs[0]!);
    await w.until(() => w.acks(id).length === 1);
    expect(w.acks(id)[0]!.result).toBe(AckResult.ACK_RESULT_ACCEPTED);
  });

  it('a malformed lease in hello.held is told lease_lost (NOT_HELD_ON_RECONNECT) after the welcome', async () => {
    const w = worker();
    await w.hello('held-junk', [queueName()], 1, { held: [{ jobId: 'x', leaseToken: 'y' }] });
    await w.until(() => w.messages('leaseLost').length === 1);
    expect(w.received[0]?.msg?.$case).toBe('welcome');
    expect(w.messages('leaseLost')[0]).toMatchObject({ jobId: 'x', code: LeaseLostReason.LEASE_LOST_REASON_NOT_HELD_ON_RECONNECT });
  });
});

describe('backpressure', () => {
  it('a worker that stops reading gets no new jobs while its stream is backed up, and loses none', async () => {
    const queue = queueName();
    // 100 jobs of 16 KiB: more than the writer keeps before it blocks (WRITER_HIGH_WATER_BYTES).
    const pad = 'x'.repeat(16 * 1024);
    const first = await call(clients.jobs, 'submitJobs', { idsOnly: false,
      jobs: Array.from({ length: 100 }, (_, i) => ({ queue, type: 't', payload: { i, pad }, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) })),
    });
    const ids = new Set(first.results.map((r) => r.job!.id));
    const w = worker();
    await w.hello('slow-reader', [queue], 1000); // one `job` message of ~16 KiB per job
    w.stream.pause(); // reads nothing more: HTTP/2 flow control stops the server's writes

    // Every job was dealt to the session, and its writer is blocked: the session, with 900
    // slots unused, says it has none free.
    await waitFor(() => server.dispatcher.sessionStats().held === 100 && server.dispatcher.queueWorkers(queue).freeSlots === 0, {
      what: 'the stream to back up',
    });
    // Jobs submitted meanwhile are not handed to it, and no claim takes them for it.
    for (let i = 0; i < 10; i++) {
      const { id, state } = await submit(queue, { late: i });
      expect(state).toBe(JobState.JOB_STATE_PENDING);
      ids.add(id);
    }
    server.dispatcher.notifyQueue(queue);
    expect(server.dispatcher.sessionStats().held).toBe(100);

    // Reading again: every job arrives, each once, the late ones by a claim once the writer flows.
    w.stream.resume();
    w.autoComplete();
    await w.until(() => w.allAcks().length === 110, 30_000);
    expect(w.jobs.map((j) => j.job!.id).sort()).toEqual([...ids].sort());
    expect(w.allAcks().every((a) => a.result === AckResult.ACK_RESULT_ACCEPTED)).toBe(true);
    // 110 jobs of 16 KiB pass a page's 1 MiB of JSON text: the pages are followed.
    let completed = 0;
    let pageToken = '';
    do {
      const page = await call(clients.jobs, 'listJobs', { queue, states: [JobState.JOB_STATE_COMPLETED], type: '', pageSize: 200, pageToken, idempotencyKey: '' });
      completed += page.jobs.length;
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(completed).toBe(110);
  });
  it('a worker that reads slowly (a slow link) keeps the leases of jobs that wait for it while the server holds back its heartbeats', async () => {
    const queue = queueName();
    // 1 s leases; 120 jobs of 16 KiB take the worker about 3 s to read at one message per
    // 25 ms, and the writer is blocked (the stream reads nothing from the worker) most of that
    // time: the jobs' leases run out while they wait in the server, unless it renews them.
    await call(clients.queues, 'upsertQueue', { name: queue, leaseSeconds: 1 });
    const pad = 'x'.repeat(16 * 1024);
    await call(clients.jobs, 'submitJobs', { idsOnly: true,
      jobs: Array.from({ length: 120 }, (_, i) => ({ queue, type: 't', payload: { i, pad }, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) })),
    });
    const w = worker();
    await w.hello('slow-link', [queue], 200);
    // One message per 25 ms, each job completed as it arrives, as a worker on a slow link
    // would: its completions wait, unread, behind the server's backpressure.
    w.stream.on('data', () => {
      w.stream.pause();
      setTimeout(() => w.stream.resume(), 25);
    });
    w.autoComplete();
    await w.until(() => w.allAcks().length === 120, 60_000);
    expect(w.messages('leaseLost')).toEqual([]);
    expect(w.allAcks().filter((a) => a.result !== AckResult.ACK_RESULT_ACCEPTED)).toEqual([]);
    const sql = new pg.Client(databaseUrl);
    await sql.connect();
    try {
      const { rows } = await sql.query(`SELECT count(*)::int AS n FROM evora.jobs WHERE queue = $1 AND (state <> 'COMPLETED' OR attempt <> 1)`, [queue]);
      expect(rows[0].n).toBe(0);
    } finally {
      await sql.end();
    }
  });
  it('jobs pushed that the worker has not named yet are renewed while it heartbeats, and not once it falls silent', async () => {
    const queue = queueName();
    await call(clients.queues, 'upsertQueue', { name: queue, leaseSeconds: 1 });
    const [a, b] = [await submit(queue), await submit(queue)];
    const w = worker();
    await w.hello('far', [queue], 2);
    await w.until(() => w.jobs.length === 2);
    // As if the jobs were still on their way: empty heartbeats only, for three lease lengths.
    const started = Date.now();
    const beat = setInterval(() => w.send({ msg: { $case: 'heartbeat', value: { leases: [] } } }), 300);
    try {
      await waitFor(async () => Date.now() - started > 3_000 && (await getJob(a.id)).state === JobState.JOB_STATE_RUNNING, { what: 'three lease lengths', timeoutMs: 10_000 });
    } finally {
      clearInterval(beat);
    }
    expect((await getJob(a.id)).attempt).toBe(1);
    expect((await getJob(b.id)).attempt).toBe(1);
    w.complete(w.jobs[0]!);
    await w.until(() => w.acks(a.id).length === 1);
    expect(w.acks(a.id)[0]!.result).toBe(AckResult.ACK_RESULT_ACCEPTED);
    // Silent from now on (a worker stopped or hung): its last job's lease runs out.
    await waitFor(async () => (await getJob(b.id)).state === JobState.JOB_STATE_PENDING, { what: 'the silent worker to lose its lease', timeoutMs: 15_000 });
  });
  it('a job pushed just before a renewal tick, too young to renew then, is renewed at the next one while the worker heartbeats', async () => {
    const queue = queueName();
    // 3 s leases: renewals every second from the first push, of the jobs pushed over 0.5 s ago.
    await call(clients.queues, 'upsertQueue', { name: queue, leaseSeconds: 3 });
    const w = worker();
    await w.hello('far', [queue], 2);
    await submit(queue);
    await w.until(() => w.jobs.length === 1);
    const firstAt = Date.now();
    // The first job arrives and is named at once (a near job); the second is pushed between
    // half a second and a second after the first, so the tick at one second finds it too young.
    w.send({ msg: { $case: 'heartbeat', value: { leases: [lease(w.jobs[0]!)] } } });
    await waitFor(() => Date.now() - firstAt >= 700, { what: 'the middle of the first renewal period' });
    const b = await submit(queue);
    await w.until(() => w.jobs.length === 2);
    // The worker beats, naming only the first job: the second is as if still on its way.
    const beat = setInterval(() => w.send({ msg: { $case: 'heartbeat', value: { leases: [lease(w.jobs[0]!)] } } }), 300);
    try {
      await waitFor(async () => Date.now() - firstAt > 8_000, { what: 'over two lease lengths', timeoutMs: 15_000 });
    } finally {
      clearInterval(beat);
    }
    expect(w.messages('leaseLost')).toEqual([]);
    expect(await getJob(b.id)).toMatchObject({ state: JobState.JOB_STATE_RUNNING, attempt: 1 });
  });
});

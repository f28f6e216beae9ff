import { afterEach, describe, expect, it } from 'vitest';
import { Dispatcher, type SessionMessage, type WorkerSession } from '../../src/dispatcher/dispatcher.js';
import type { Job } from '../../src/domain/job.js';
import { silentLogger } from '../../src/logger.js';
import { dispatcherTestSetup } from '../helpers/dispatcher-setup.js';
import { jobInput, queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

const t = dispatcherTestSetup();

/** The grace the dispatcher gives a lease past its expiry by default (DispatcherOptions.leaseExpiryGraceMs). */
const GRACE_MS = 2000;

/** What a session was sent, by kind. */
function recorder() {
  const jobs: Job[] = [];
  const lost: Extract<SessionMessage, { kind: 'leaseLost' }>[] = [];
  const send = (msg: SessionMessage) => {
    if (msg.kind === 'jobs') jobs.push(...msg.jobs);
    if (msg.kind === 'leaseLost') lost.push(msg);
  };
  return { jobs, lost, send };
}

/** `ms` after a job's lease expiry, as the dispatcher's expiry check takes `now`. */
function after(job: Job, ms: number): Date {
  return new Date(job.lockedUntil!.getTime() + ms);
}

/** One job of a fresh queue (with these settings), pushed to a one-slot session. */
async function onePushed(settings: { leaseSeconds?: number } = {}) {
  const queue = queueName();
  await t.store.queueUpsert({ name: queue, ...settings });
  await t.store.jobSubmit({ job: jobInput({ queue }) });
  const r = recorder();
  const { dispatcher, session } = await t.open({ queue, slots: 1, send: r.send });
  dispatcher.notifyQueue(queue);
  await waitFor(() => r.jobs.length === 1, { what: 'the job pushed' });
  return { queue, r, dispatcher, session, job: r.jobs[0]! };
}

/** Waits until no claim holds a reservation of the session and it has `free` slots. */
async function settled(session: WorkerSession, free: number): Promise<void> {
  await waitFor(() => session.free === free && session.reserved === 0, { what: `${free} slots free and none reserved` });
}

describe('a session holds a lease only until it expires', () => {
  it('a lease the worker never heartbeats nor reports is told lost once it expired, and its slot takes the next job', async () => {
    const queue = queueName();
    await t.store.queueUpsert({ name: queue });
    await t.store.jobSubmitMany({ jobs: [jobInput({ queue, priority: 10 }), jobInput({ queue })] });
    const r = recorder();
    const { dispatcher, session } = await t.open({ queue, slots: 1, send: r.send });
    dispatcher.notifyQueue(queue);
    await waitFor(() => r.jobs.length === 1, { what: 'the first job pushed' });
    const first = r.jobs[0]!;
    await settled(session, 0);

    // Within the grace past its expiry, the lease is still held.
    expect(dispatcher.dropExpiredLeases(after(first, GRACE_MS - 1))).toBe(0);
    expect(session.held.has(first.id)).toBe(true);
    expect(r.lost).toEqual([]);

    // Past it: told lost (as a heartbeat that finds it lost tells it), and the slot refills.
    expect(dispatcher.dropExpiredLeases(after(first, GRACE_MS + 1))).toBe(1);
    expect(r.lost).toEqual([{ kind: 'leaseLost', jobId: first.id, token: first.leaseToken, reason: 'expired' }]);
    expect(session.held.has(first.id)).toBe(false);
    await waitFor(() => r.jobs.length === 2, { what: 'the next job pushed into the freed slot' });
    const second = r.jobs[1]!;
    expect(second.id).not.toBe(first.id);
    expect([...session.held.keys()]).toEqual([second.id]);

    // A second check drops nothing more (the new lease expires later than the first).
    expect(dispatcher.dropExpiredLeases(after(first, GRACE_MS + 1))).toBe(0);
    // The late report of the dropped lease frees nothing (the database still honours it: not swept).
    expect(await dispatcher.complete(session, { id: first.id, token: first.leaseToken!, result: null })).toMatchObject({ accepted: true });
    expect([...session.held.keys()]).toEqual([second.id]);
    expect(session.free).toBe(0);
  });

  it('a lease a heartbeat extended is held until its new expiry', async () => {
    const { queue, r, dispatcher, session, job } = await onePushed({ leaseSeconds: 1 });

    // The heartbeat extends the lease by the queue's lease, an hour now.
    await t.store.queueUpsert({ name: queue, leaseSeconds: 3600 });
    const beat = await dispatcher.heartbeat(session, [{ id: job.id, token: job.leaseToken! }]);
    const extended = beat.extended[0]!;
    expect(extended.lockedUntil.getTime()).toBeGreaterThan(job.lockedUntil!.getTime() + 3_000_000);

    expect(dispatcher.dropExpiredLeases(after(job, 60_000))).toBe(0);
    expect(session.held.get(job.id)).toMatchObject({ token: job.leaseToken, expiresAt: extended.lockedUntil.getTime() });
    expect(r.lost).toEqual([]);

    expect(dispatcher.dropExpiredLeases(new Date(extended.lockedUntil.getTime() + GRACE_MS + 1))).toBe(1);
    expect(r.lost).toMatchObject([{ jobId: job.id, token: job.leaseToken, reason: 'expired' }]);
  });

  it('a unary heartbeat extends the lease for the session that holds it', async () => {
    const { queue, dispatcher, session, job } = await onePushed({ leaseSeconds: 1 });

    await t.store.queueUpsert({ name: queue, leaseSeconds: 3600 });
    await dispatcher.heartbeat(null, [{ id: job.id, token: job.leaseToken! }]);
    expect(dispatcher.dropExpiredLeases(after(job, 60_000))).toBe(0);
    expect(session.held.has(job.id)).toBe(true);
  });

  it('a unary heartbeat that finds lost a lease a session holds tells that session, and frees the slot', async () => {
    const { r, dispatcher, session, job } = await onePushed({ leaseSeconds: 1 });
    await t.store.jobSweepExpired({ limit: 10, now: after(job, 1) }); // requeued: the lease is lost

    const beat = await dispatcher.heartbeat(null, [{ id: job.id, token: job.leaseToken! }]);
    expect(beat.lost).toEqual([{ id: job.id, token: job.leaseToken }]);
    expect(r.lost).toMatchObject([{ jobId: job.id, token: job.leaseToken, reason: 'expired' }]);
    expect(session.held.has(job.id)).toBe(false);
  });

  it('a heartbeat of a stale lease does not extend the current lease of the same job', async () => {
    const { session, dispatcher, job } = await onePushed();
    // The session's own accounting, as a stale lease's extension would reach it.
    expect(session.extend(job.id, 'not-the-token', job.lockedUntil!.getTime() + 3_600_000)).toBe(false);
    expect(dispatcher.dropExpiredLeases(after(job, GRACE_MS + 1))).toBe(1);
  });

  it('a lease re-adopted through hello.held is told lost once it expired', async () => {
    const queue = queueName();
    await t.store.queueUpsert({ name: queue });
    await t.store.jobSubmit({ job: jobInput({ queue }) });
    const first = recorder();
    const { dispatcher, session } = await t.open({ queue, slots: 1, send: first.send });
    dispatcher.notifyQueue(queue);
    await waitFor(() => first.jobs.length === 1, { what: 'the job pushed' });
    const job = first.jobs[0]!;
    dispatcher.sessionClose(session);

    const second = recorder();
    const again = await dispatcher.sessionOpen({ workerId: 'w', queues: [queue], slots: 1, held: [{ id: job.id, token: job.leaseToken! }], send: second.send });
    const adopted = again.held.get(job.id)!;
    expect(adopted.token).toBe(job.leaseToken);
    expect(adopted.expiresAt).toBeGreaterThanOrEqual(job.lockedUntil!.getTime());
    expect(dispatcher.dropExpiredLeases(new Date(adopted.expiresAt + GRACE_MS - 1))).toBe(0);
    expect(dispatcher.dropExpiredLeases(new Date(adopted.expiresAt + GRACE_MS + 1))).toBe(1);
    expect(second.lost).toMatchObject([{ jobId: job.id, token: job.leaseToken, reason: 'expired' }]);
    expect(first.lost).toEqual([]);
    expect(again.free).toBe(1);
  });

  it('a timer tick that comes long after the one before (the process was stalled) skips the check once', async () => {
    const { r, dispatcher, session, job } = await onePushed({ leaseSeconds: 1 });
    const POLL_MS = 3_600_000; // the setup's pollIntervalMs
    const STALL_MS = 2000; // how late a tick must run to be taken for a stall (dispatcher.ts)
    const first = job.lockedUntil!.getTime() - 500;
    expect(dispatcher.expiryTick(first)).toBe(0);

    // The next tick runs more than 2 s later than due: the heartbeats sent meanwhile are not read yet.
    const late = first + POLL_MS + STALL_MS + 1;
    expect(dispatcher.expiryTick(late)).toBeNull();
    expect(session.held.has(job.id)).toBe(true);
    expect(r.lost).toEqual([]);

    // The tick after it, on time, judges the lease.
    expect(dispatcher.expiryTick(late + POLL_MS)).toBe(1);
    expect(r.lost).toMatchObject([{ jobId: job.id, token: job.leaseToken, reason: 'expired' }]);
  });

  it('a job handed off at submit is held only until its lease expires', async () => {
    const queue = queueName();
    await t.store.queueUpsert({ name: queue });
    const r = recorder();
    const { dispatcher, session } = await t.open({ queue, slots: 1, send: r.send });
    // The session's first claim comes back empty and leaves the queue idle: a submit hands off.
    await waitFor(() => dispatcher.queueWorkers(queue).freeSlots === 1 && session.reserved === 0, { what: 'the first claim back' });
    await waitFor(async () => (await dispatcher.submit(jobInput({ queue }))).job.state === 'RUNNING', { what: 'a submit handed off' });
    await waitFor(() => r.jobs.length === 1, { what: 'the handed-off job pushed' });
    const job = r.jobs[0]!;
    expect(session.held.get(job.id)?.expiresAt).toBe(job.lockedUntil!.getTime());
    expect(dispatcher.dropExpiredLeases(after(job, GRACE_MS + 1))).toBe(1);
    expect(r.lost).toMatchObject([{ jobId: job.id, reason: 'expired' }]);
  });
});

describe('the expiry check runs by itself', () => {
  let dispatchers: Dispatcher[] = [];
  afterEach(async () => {
    await Promise.all(dispatchers.map((d) => d.drainAll(1000)));
    dispatchers = [];
  });

  /** A dispatcher whose check drops a lease as soon as the clock passes its expiry. */
  function eager(pollIntervalMs: number): Dispatcher {
    const d = new Dispatcher({ store: t.store, logger: silentLogger(), pollIntervalMs, claimCooldownMs: 0, leaseExpiryGraceMs: 0 });
    dispatchers.push(d);
    return d;
  }

  it('on the fallback poll: an expired lease is told lost and its slot refilled', async () => {
    const queue = queueName();
    await t.store.queueUpsert({ name: queue, leaseSeconds: 1 });
    await t.store.jobSubmitMany({ jobs: [jobInput({ queue, priority: 10 }), jobInput({ queue })] });
    const dispatcher = eager(50);
    const r = recorder();
    await dispatcher.sessionOpen({ workerId: 'w', queues: [queue], slots: 1, send: r.send });
    dispatcher.start();
    await waitFor(() => r.lost.length >= 1 && r.jobs.length >= 2, { what: 'the first lease told lost and the next job pushed' });
    expect(r.lost[0]).toMatchObject({ jobId: r.jobs[0]!.id, token: r.jobs[0]!.leaseToken, reason: 'expired' });
  });

  it('while drainAll waits: an expired lease stops counting, so the drain ends with nothing held', async () => {
    const queue = queueName();
    await t.store.queueUpsert({ name: queue, leaseSeconds: 1 });
    await t.store.jobSubmit({ job: jobInput({ queue }) });
    const dispatcher = eager(50); // never started: only drainAll's own check can drop the lease
    const r = recorder();
    await dispatcher.sessionOpen({ workerId: 'w', queues: [queue], slots: 1, send: r.send });
    await waitFor(() => r.jobs.length === 1, { what: 'the job pushed' });
    expect(await dispatcher.drainAll(60_000)).toBe(0);
    expect(r.lost).toMatchObject([{ jobId: r.jobs[0]!.id, reason: 'expired' }]);
  });
});

describe("a server whose clock is not the database's", () => {
  it('judges leases on the database\'s clock: 40 s ahead, a fresh lease is held, and dropped only once it ended there', async () => {
    const SKEW_MS = 40_000;
    const clock = () => Date.now() + SKEW_MS;
    const queue = queueName();
    await t.store.queueUpsert({ name: queue, leaseSeconds: 30 });
    await t.store.jobSubmit({ job: jobInput({ queue }) });
    const r = recorder();
    const { dispatcher, session } = await t.open({ queue, slots: 1, send: r.send, localClock: clock });
    dispatcher.notifyQueue(queue);
    await waitFor(() => r.jobs.length === 1, { what: 'the job pushed' });
    const job = r.jobs[0]!;
    await settled(session, 0);

    // This clock is past the lease's end plus the grace (40 s > 30 s + 2 s), the database's is not.
    expect(clock()).toBeGreaterThan(job.lockedUntil!.getTime() + GRACE_MS);
    expect(dispatcher.expiryTick(clock())).toBe(0);
    expect(session.held.has(job.id)).toBe(true);
    expect(r.lost).toEqual([]);

    // Once the database's clock passes it (this one 40 s further on), it is dropped. The
    // estimate of the database's clock errs behind by the claim's answer time (ms here), so
    // this checks half a second past the grace.
    expect(dispatcher.expiryTick(job.lockedUntil!.getTime() + GRACE_MS + 500 + SKEW_MS)).toBe(1);
    expect(r.lost).toEqual([{ kind: 'leaseLost', jobId: job.id, token: job.leaseToken, reason: 'expired' }]);
  });
});


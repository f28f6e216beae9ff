import type { Store } from '../../src/store/store.js';
import { sqlFor } from './store-setup.js';
import type { Job } from '../../src/domain/job.js';
import { jobInputs } from './factories.js';

/**
 * A mixed workload through the store: submits `total` jobs over a few queues and drives
 * them to every end: completed, retried then completed, dead-lettered, cancelled while
 * pending and while running, expired leases, snoozed; and jobs handed straight to a worker
 * by their submit. Returns the queues it used.
 */
export async function mixedRun(store: Store, opts: { total: number; prefix: string }): Promise<string[]> {
  const queues = [`${opts.prefix}_a`, `${opts.prefix}_b`, `${opts.prefix}_c`];
  for (const name of queues) {
    await store.queueUpsert({ name, maxAttempts: 2, backoffKind: 'fixed', backoffBaseSeconds: 0, backoffJitter: 0 });
  }
  const per = Math.ceil(opts.total / queues.length);
  for (const queue of queues) {
    for (let i = 0; i < per; i += 1000) await store.jobSubmitMany({ jobs: jobInputs(queue, Math.min(1000, per - i)) });
  }
  let round = 0;
  for (;;) {
    round++;
    const claimed = (await Promise.all(queues.map((q) => store.jobClaim({ queues: [q], limit: 500, workerId: `w${round}` })))).flat();
    if (claimed.length === 0) break;
    const completions = [];
    const failures = [];
    const snoozes = [];
    for (const [i, j] of claimed.entries()) {
      const bucket = (i + round) % 10;
      if (bucket < 5) completions.push({ id: j.id, token: j.leaseToken!, result: { i } });
      else if (bucket < 7) failures.push({ id: j.id, token: j.leaseToken!, error: 'boom', retryable: true });
      else if (bucket === 7) failures.push({ id: j.id, token: j.leaseToken!, error: 'fatal', retryable: false });
      else if (bucket === 8 && round < 3) snoozes.push({ id: j.id, token: j.leaseToken!, runAt: new Date(Date.now() - 1000) });
      else if (bucket === 8) await store.jobCancel({ id: j.id });
      // bucket 9: left running; its lease expires below.
    }
    await store.jobCompleteMany({ completions });
    await store.jobFailMany({ failures });
    await store.jobSnoozeMany({ snoozes });
    await store.jobSweepExpired({ limit: 10_000, now: new Date(Date.now() + 3_600_000) });
  }
  // Hand-offs: nothing is claimable now, so each submit leases its job to the named worker.
  for (const queue of queues) {
    const handed = [];
    for (const job of jobInputs(queue, 4)) handed.push((await store.jobSubmit({ job, handoffWorkerId: 'w-handoff' })).job);
    if (handed.some((j) => j.state !== 'RUNNING')) throw new Error('mixedRun: a hand-off did not lease its job');
    const [a, b, c] = handed as [Job, Job, Job];
    await store.jobCompleteMany({ completions: [a, b].map((j) => ({ id: j.id, token: j.leaseToken!, result: {} })) });
    await store.jobFailMany({ failures: [{ id: c.id, token: c.leaseToken!, error: 'fatal', retryable: false }] });
    // The fourth stays RUNNING.
  }
  // Some pending jobs cancelled, and some dead-lettered ones retried back to pending.
  for (const queue of queues) {
    await store.jobSubmitMany({ jobs: jobInputs(queue, 20) });
    const { jobs } = await store.jobList({ queue, states: ['PENDING'], limit: 10 });
    for (const j of jobs) await store.jobCancel({ id: j.id });
    const dlq = await store.jobList({ queue, states: ['DLQ'], limit: 5 });
    for (const j of dlq.jobs) await store.jobRetry({ id: j.id });
  }
  return queues;
}

/** The number of jobs per queue and state, straight from the jobs table. */
export async function countsFromJobs(store: Store, queues: string[]): Promise<Record<string, Record<string, number>>> {
  const { rows } = await sqlFor(store).query<{ queue: string; state: string; n: number }>(
    'SELECT queue, state::text, count(*)::int AS n FROM evora.jobs WHERE queue = ANY($1) GROUP BY queue, state',
    [queues],
  );
  const out: Record<string, Record<string, number>> = {};
  for (const r of rows) (out[r.queue] ??= {})[r.state] = r.n;
  return out;
}

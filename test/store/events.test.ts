import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { jobInput, jobInputs, queueName } from '../helpers/factories.js';
import { OUTBOX_EVENTS, storeSetup } from '../helpers/store-setup.js';

let store: Store;
let sql: pg.Pool;
beforeAll(async () => {
  ({ store, sql } = await storeSetup());
});

const T0 = new Date('2032-01-01T00:00:00Z');
const at = (s: number) => new Date(T0.getTime() + s * 1000);

async function events(queue: string) {
  const { rows } = await sql.query<{ kind: string; from_state: string | null; to_state: string; wait_ms: number | null; run_ms: number | null; attempt: number }>(
    `SELECT kind::text, from_state::text, to_state::text, wait_ms, run_ms, attempt FROM ${OUTBOX_EVENTS} f WHERE queue = $1 ORDER BY id`,
    [queue],
  );
  return rows;
}

describe('the outbox records every state change in the same statement', () => {
  it('each operation writes its event, with wait and run times', async () => {
    const queue = queueName();
    await store.queueUpsert({ name: queue, maxAttempts: 2, backoffKind: 'fixed', backoffBaseSeconds: 0, backoffJitter: 0 });
    const { job } = await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
    let [c] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: at(2) });
    await store.jobFailMany({ failures: [{ id: job.id, token: c!.leaseToken!, error: 'x', retryable: true }], now: at(5) });
    [c] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: at(6) });
    await store.jobSnoozeMany({ snoozes: [{ id: job.id, token: c!.leaseToken!, runAt: at(10) }], now: at(7) });
    [c] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: at(10) });
    await store.jobSweepExpired({ limit: 10, now: at(100) }); // attempt 2 of 2: dead-lettered
    await store.jobRetry({ id: job.id, now: at(101) });
    [c] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: at(101) });
    await store.jobCompleteMany({ completions: [{ id: job.id, token: c!.leaseToken!, result: {} }], now: at(104) });
    const { job: other } = await store.jobSubmit({ job: jobInput({ queue }), now: at(105) });
    await store.jobCancel({ id: other.id, now: at(106) });

    expect((await events(queue)).map((e) => [e.kind, e.from_state, e.to_state])).toEqual([
      ['submitted', null, 'PENDING'],
      ['claimed', 'PENDING', 'RUNNING'],
      ['failed_retrying', 'RUNNING', 'PENDING'],
      ['claimed', 'PENDING', 'RUNNING'],
      ['snoozed', 'RUNNING', 'PENDING'],
      ['claimed', 'PENDING', 'RUNNING'],
      ['dead_lettered', 'RUNNING', 'DLQ'],
      ['retried_manually', 'DLQ', 'PENDING'],
      ['claimed', 'PENDING', 'RUNNING'],
      ['completed', 'RUNNING', 'COMPLETED'],
      ['submitted', null, 'PENDING'],
      ['cancelled', 'PENDING', 'CANCELLED'],
    ]);
    const evs = await events(queue);
    expect(evs[1]?.wait_ms).toBe(2000); // claimable at T0, claimed at +2 s
    expect(evs[2]?.run_ms).toBe(3000); // claimed at +2 s, failed at +5 s
    expect(evs[9]?.run_ms).toBe(3000);
  });

  it('a lease expiry with attempts left is recorded as lease_expired; lease-lost writes record nothing', async () => {
    const queue = queueName();
    await store.jobSubmit({ job: jobInput({ queue }), now: T0 });
    const [c] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w', now: T0 });
    await store.jobSweepExpired({ limit: 10, now: at(31) });
    await store.jobCompleteMany({ completions: [{ id: c!.id, token: c!.leaseToken!, result: {} }] });
    expect((await events(queue)).map((e) => e.kind)).toEqual(['submitted', 'claimed', 'lease_expired']);
  });

  it('a statement that changes many jobs writes one packed outbox row; one that changes none writes nothing', async () => {
    const queue = queueName();
    await store.jobSubmitMany({ jobs: jobInputs(queue, 25), now: T0 });
    const claimed = await store.jobClaim({ queues: [queue], limit: 25, workerId: 'w', now: at(1) });
    await store.jobCompleteMany({ completions: claimed.map((j) => ({ id: j.id, token: '00000000-0000-4000-8000-000000000000', result: {} })) });
    const { rows } = await sql.query<{ n: number; kinds: string; jobs: number }>(
      `SELECT n, array_to_string(kinds, ',') AS kinds, cardinality(job_ids) AS jobs
       FROM evora.job_events WHERE $1 = ANY(queues) ORDER BY id`,
      [queue],
    );
    expect(rows.map((r) => [r.n, r.jobs, r.kinds.split(',')[0]])).toEqual([
      [25, 25, 'submitted'],
      [25, 25, 'claimed'],
    ]);
    // Element i of each array is one job: unpacked, each job has its claimed event.
    const { rows: flat } = await sql.query<{ job_id: string }>(
      `SELECT job_id FROM ${OUTBOX_EVENTS} f WHERE queue = $1 AND kind = 'claimed' ORDER BY id`,
      [queue],
    );
    expect(new Set(flat.map((r) => r.job_id))).toEqual(new Set(claimed.map((j) => j.id)));
  });

  it('replaying events reproduces the count of jobs in every state', async () => {
    const queue = queueName();
    await store.queueUpsert({ name: queue, maxAttempts: 2, backoffBaseSeconds: 0, backoffJitter: 0 });
    await store.jobSubmitMany({ jobs: jobInputs(queue, 40), now: T0 });
    const claimed = await store.jobClaim({ queues: [queue], limit: 30, workerId: 'w', now: T0 });
    const [done, failed, rest] = [claimed.slice(0, 10), claimed.slice(10, 20), claimed.slice(20)];
    await store.jobCompleteMany({ completions: done.map((j) => ({ id: j.id, token: j.leaseToken!, result: {} })), now: at(1) });
    await store.jobFailMany({ failures: failed.map((j, i) => ({ id: j.id, token: j.leaseToken!, error: 'e', retryable: i % 2 === 0 })), now: at(1) });
    await store.jobCancel({ id: rest[0]!.id, now: at(1) });
    await store.jobSweepExpired({ limit: 100, now: at(60) });
    const { rows: derived } = await sql.query<{ state: string; n: number }>(
      `SELECT state::text, sum(n)::int AS n FROM (
         SELECT to_state AS state, 1 AS n FROM ${OUTBOX_EVENTS} f WHERE queue = $1
         UNION ALL SELECT from_state, -1 FROM ${OUTBOX_EVENTS} f WHERE queue = $1 AND from_state IS NOT NULL
       ) d GROUP BY state HAVING sum(n) <> 0 ORDER BY state`,
      [queue],
    );
    const { rows: actual } = await sql.query<{ state: string; n: number }>(
      'SELECT state::text, count(*)::int AS n FROM evora.jobs WHERE queue = $1 GROUP BY state ORDER BY state',
      [queue],
    );
    expect(derived).toEqual(actual);
    expect(actual.length).toBeGreaterThanOrEqual(4);
  });
});

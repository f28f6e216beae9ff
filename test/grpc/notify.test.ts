import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JobState } from '../../src/gen/evora/v1/job.js';
import { queueName } from '../helpers/factories.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';

let clients: Clients;
const workers: RawWorker[] = [];
beforeAll(async () => {
  // The fallback poll is an hour: a push can only come from the NOTIFY.
  ({ clients } = await serverSetup({ pollIntervalMs: '3600000' }));
});
afterEach(() => {
  for (const w of workers.splice(0)) w.close();
});

describe('wake-ups by NOTIFY', () => {
  it('an idle worker gets a job submitted after it connected, with the fallback poll set to an hour', async () => {
    const queue = queueName();
    const w = new RawWorker(clients);
    workers.push(w);
    await w.hello('idle', [queue], 4);
    for (let i = 0; i < 3; i++) {
      const { job } = await call(clients.jobs, 'submitJob', { queue, type: 't', payload: { i }, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
      await w.until(() => w.jobs.some((j) => j.job?.id === job!.id), 5_000);
    }
    expect(w.jobs).toHaveLength(3);
  });

  it('a worker on two queues gets work from either', async () => {
    const [a, b] = [queueName(), queueName()];
    const w = new RawWorker(clients);
    workers.push(w);
    await w.hello('both', [a, b], 2);
    await call(clients.jobs, 'submitJob', { queue: a, type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
    await call(clients.jobs, 'submitJob', { queue: b, type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
    await w.until(() => w.jobs.length === 2, 5_000);
    expect(new Set(w.jobs.map((j) => j.job?.queue))).toEqual(new Set([a, b]));
  });

  it('resuming a paused queue wakes its workers', async () => {
    const queue = queueName();
    await call(clients.queues, 'upsertQueue', { name: queue });
    await call(clients.queues, 'pauseQueue', { name: queue });
    const w = new RawWorker(clients);
    workers.push(w);
    await w.hello('patient', [queue], 1);
    const { job } = await call(clients.jobs, 'submitJob', { queue, type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) });
    // Running, the idle worker of this server would have taken it in the submit (the hand-off,
    // RUNNING in the answer); paused, it waits, and nothing is pushed until the resume's NOTIFY.
    expect(job!.state).toBe(JobState.JOB_STATE_PENDING);
    expect((await call(clients.jobs, 'getJob', { id: job!.id })).job!.state).toBe(JobState.JOB_STATE_PENDING);
    expect(w.jobs).toHaveLength(0);
    await call(clients.queues, 'resumeQueue', { name: queue });
    await w.until(() => w.jobs.length === 1, 5_000);
    expect(w.jobs[0]!.job!.id).toBe(job!.id);
  });
});

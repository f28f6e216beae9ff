import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EvoraClient, EvoraWorker, SnoozeError, type EvoraWorkerOptions } from '../../src/sdk/index.js';
import { cliSetup } from '../helpers/cli.js';
import { queueName } from '../helpers/factories.js';
import { jobInState, waitFor } from '../helpers/wait.js';

/**
 * `evora get` on a job that is not running says why (src/cli/why.ts): on-call's "why is job X
 * not running?", asked of the built CLI against a live server, with real workers holding
 * slots, a real paused queue, a real concurrency limit and real parents.
 */

const { evora, json, address } = cliSetup();
let client: EvoraClient;
const workers: EvoraWorker[] = [];

beforeAll(() => {
  client = new EvoraClient({ address: address() });
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0, graceMs: 1_000 })));
});
afterAll(() => client.close());

function worker(opts: Partial<EvoraWorkerOptions> & { queues: string[] }): EvoraWorker {
  const w = new EvoraWorker({ address: address(), ...opts });
  workers.push(w);
  return w;
}

/** A started worker of one slot on `queue` whose `resize` jobs run until `release()` is called. */
async function heldWorker(queue: string): Promise<() => void> {
  const w = worker({ queues: [queue], slots: 1 });
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  w.handle('resize', async () => {
    await released;
    return {};
  });
  await w.start();
  return release;
}

type Held = { state: string; notRunning: { code: string; text: string }[] };

/** The reasons `evora get --json` gives, as codes. */
async function codes(id: string): Promise<string[]> {
  return (await json<Held>('get', id)).notRunning.map((r) => r.code);
}

/** The lines under "not running because:" of `evora get`. */
async function reasons(id: string): Promise<string[]> {
  const r = await evora('get', id);
  expect(r).toMatchObject({ code: 0, stderr: '' });
  const after = r.stdout.split('not running because:\n')[1];
  if (after === undefined) return [];
  return after.split('\n\n')[0]!.split('\n').map((l) => l.replace(/^ {2}- /, ''));
}

describe('evora get: why a job is not running', () => {
  it('names a paused queue, a rate limit and a queue no worker takes; says nothing for a RUNNING job', async () => {
    const queue = queueName('why');
    await client.upsertQueue(queue, { rateLimit: { perSecond: 2, burst: 2 } });
    await client.pauseQueue(queue);
    const { job } = await client.submit({ queue, type: 'resize' });
    expect(await reasons(job.id)).toEqual([
      `queue ${queue} is paused: \`evora queue resume ${queue}\``,
      `queue ${queue} starts at most 2/s, burst 2: a backlog waits its turn`,
      `no worker connected to any server takes queue ${queue}: \`evora workers\``,
    ]);

    await client.resumeQueue(queue);
    const release = await heldWorker(queue);
    await jobInState(client, job.id, 'RUNNING');
    expect(await json<Held>('get', job.id)).toMatchObject({ state: 'RUNNING', notRunning: [] });
    expect((await evora('get', job.id)).stdout).not.toContain('not running because');
    release();
  });

  it('names full worker slots, a type no worker runs, unfinished parents, a future run_at and a full concurrency limit', async () => {
    const queue = queueName('why');
    const release = await heldWorker(queue);
    const { job: first } = await client.submit({ queue, type: 'resize' });
    await jobInState(client, first.id, 'RUNNING');
    const { job: second } = await client.submit({ queue, type: 'resize' });
    // The worker's held count is recorded every few seconds (ListWorkers).
    await waitFor(async () => (await codes(second.id)).includes('WORKER_SLOTS_FULL'), { what: 'the full slots seen', timeoutMs: 15_000 });
    expect(await reasons(second.id)).toEqual([`every worker that runs resize on queue ${queue} is busy: 1 of 1 slots held (1 worker(s))`]);

    const { job: other } = await client.submit({ queue, type: 'thumbnail' });
    expect(await reasons(other.id)).toEqual([`1 worker(s) take queue ${queue}, none runs type thumbnail (they run: resize)`]);

    const { job: child } = await client.submit({ queue, type: 'thumbnail', dependsOn: [second.id] });
    expect(await codes(child.id)).toEqual(['WAITING_ON_PARENTS', 'NO_WORKER_FOR_TYPE']);
    expect((await reasons(child.id))[0]).toBe(`waits for its parents to complete: ${second.id} (PENDING); \`evora get <parent>\` says why each has not`);

    const { job: later } = await client.submit({ queue, type: 'resize', runAt: new Date(Date.now() + 3_600_000) });
    expect((await reasons(later.id))[0]).toMatch(/^scheduled: not before \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(in (59m\d+s|1h)\)$/);

    await client.upsertQueue(queue, { maxConcurrency: 1 });
    await waitFor(async () => (await codes(second.id)).includes('QUEUE_CONCURRENCY_FULL'), { what: 'the RUNNING count in the stats', timeoutMs: 15_000 });
    expect(await reasons(second.id)).toContain(`queue ${queue} runs at most 1 jobs at once and 1 are RUNNING: \`evora list --queue ${queue} --state running\``);

    release();
    await jobInState(client, second.id, 'COMPLETED');
  });

  it('a job its handler snoozed is named snoozed, not a retry after a failure (backoff), nor scheduled', async () => {
    const queue = queueName('why');
    await client.upsertQueue(queue, { backoff: { kind: 'fixed', baseSeconds: 0, capSeconds: 0, jitter: 0 } });
    const w = worker({ queues: [queue], slots: 1 });
    w.handle('resize', async (job) => {
      // The first job fails once and is then snoozed; the second is snoozed on its first attempt.
      if (job.payload.failFirst === true && job.attempt === 1) throw new Error('flaky');
      throw new SnoozeError(new Date(Date.now() + 3_600_000));
    });
    await w.start();
    const { job: failedThenSnoozed } = await client.submit({ queue, type: 'resize', payload: { failFirst: true } });
    const { job: snoozed } = await client.submit({ queue, type: 'resize' });
    for (const id of [failedThenSnoozed.id, snoozed.id]) {
      await waitFor(async () => (await client.getDetails(id)).attempts.at(-1)?.outcome === 'SNOOZED', { what: `job ${id} snoozed` });
      expect((await reasons(id))[0]).toMatch(/^snoozed by its handler: not before \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(in (59m\d+s|1h)\)$/);
    }
  });
});

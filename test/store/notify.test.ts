import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANNEL_JOB_AVAILABLE, CHANNEL_JOB_CANCEL, type Store } from '../../src/store/store.js';
import { NotificationListener, type Notification } from '../../src/store/listener.js';
import { jobInput, jobInputs, queueName } from '../helpers/factories.js';
import { sqlFor, storeSetup } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';

let store: Store;
let url: string;
let listener: NotificationListener;
const received: Notification[] = [];

beforeAll(async () => {
  const setup = await storeSetup();
  store = setup.store;
  url = setup.url;
  listener = new NotificationListener({
    connectionString: setup.url,
    channels: [CHANNEL_JOB_AVAILABLE, CHANNEL_JOB_CANCEL],
    onNotification: (n) => received.push(n),
  });
  await listener.start();
});
afterAll(async () => {
  await listener.stop();
  await listener.stop(); // safe twice
});

const forQueue = (queue: string) => received.filter((n) => n.channel === CHANNEL_JOB_AVAILABLE && n.payload === queue);

describe('wake-ups', () => {
  it('a submit of claimable work notifies its queue once per statement, not once per row', async () => {
    const queue = queueName();
    await store.jobSubmitMany({ jobs: jobInputs(queue, 100) });
    await waitFor(() => forQueue(queue).length === 1, { what: 'a notification' });
    // A marker sent after the batch arrives after it, so nothing else is still on the way.
    const marker = queueName('marker');
    await store.jobSubmit({ job: jobInput({ queue: marker }) });
    await waitFor(() => forQueue(marker).length === 1);
    expect(forQueue(queue)).toHaveLength(1);
  });

  it('a submit scheduled for later does not notify', async () => {
    const queue = queueName();
    await store.jobSubmit({ job: jobInput({ queue, runAt: new Date(Date.now() + 3_600_000) }) });
    const marker = queueName('marker');
    await store.jobSubmit({ job: jobInput({ queue: marker }) });
    await waitFor(() => forQueue(marker).length === 1);
    expect(forQueue(queue)).toHaveLength(0);
  });

  it('a submit that hands its job to a worker does not notify; one that cannot (a job waits) does', async () => {
    const queue = queueName();
    await store.queueUpsert({ name: queue });
    const handed = await store.jobSubmit({ job: jobInput({ queue }), handoffWorkerId: 'w' });
    const waiting = await store.jobSubmit({ job: jobInput({ queue }) });
    const declined = await store.jobSubmit({ job: jobInput({ queue }), handoffWorkerId: 'w' });
    expect([handed.job.state, waiting.job.state, declined.job.state]).toEqual(['RUNNING', 'PENDING', 'PENDING']);
    const marker = queueName('marker');
    await store.jobSubmit({ job: jobInput({ queue: marker }) });
    await waitFor(() => forQueue(marker).length === 1);
    // The upsert's wake-up (a changed queue may have room) and the two submits that left a job waiting.
    expect(forQueue(queue)).toHaveLength(3);
  });

  it('a manual retry and a resumed queue notify; cancelling a running job names the job', async () => {
    const queue = queueName();
    const { job } = await store.jobSubmit({ job: jobInput({ queue }) });
    await store.jobCancel({ id: job.id });
    await waitFor(() => forQueue(queue).length === 1);
    await store.jobRetry({ id: job.id });
    await waitFor(() => forQueue(queue).length === 2, { what: 'retry notification' });
    await store.queueSetPaused({ name: queue, paused: true });
    await store.queueSetPaused({ name: queue, paused: false });
    await waitFor(() => forQueue(queue).length === 3, { what: 'resume notification' });

    const [claimed] = await store.jobClaim({ queues: [queue], limit: 1, workerId: 'w' });
    await store.jobCancel({ id: claimed!.id });
    await waitFor(() => received.some((n) => n.channel === CHANNEL_JOB_CANCEL && n.payload === claimed!.id));
  });
});

describe('the LISTEN connection', () => {
  // A database or role with idle_session_timeout shorter than the listener's 30 s probe
  // ended the LISTEN session each time it had been idle that long: with 4 s, three servers
  // each logged "database unavailable: terminating connection due to idle-session timeout"
  // and "available again" every 5 s, and missed the notifications of each gap.
  it('is not ended by an idle_session_timeout of the database or role: it stays connected while idle', async () => {
    const short = new URL(url);
    short.searchParams.set('options', '-c idle_session_timeout=200');
    let connected = 0;
    const errors: Error[] = [];
    const idle = new NotificationListener({
      connectionString: short.toString(),
      channels: [CHANNEL_JOB_AVAILABLE],
      onNotification: () => undefined,
      onConnected: () => connected++,
      onError: (err) => errors.push(err),
      reconnectDelayMs: 50,
    });
    await idle.start();
    try {
      // The newest LISTEN session of this database (the file's own listener is older) idle
      // for five times the timeout: without the setting turned off, each was ended at 200 ms.
      await waitFor(async () => {
        const { rows } = await sqlFor(store).query<{ idle: boolean }>(
          `SELECT now() - state_change > interval '1 second' AS idle FROM pg_stat_activity
           WHERE datname = current_database() AND application_name = 'evora-listener' ORDER BY backend_start DESC LIMIT 1`,
        );
        return rows[0]?.idle === true;
      }, { what: 'the LISTEN session idle for 1 s', timeoutMs: 5_000 });
      expect(connected).toBe(1);
      expect(errors).toEqual([]);
    } finally {
      await idle.stop();
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANNEL_JOB_AVAILABLE, CHANNEL_JOB_CANCEL, type Store } from '../../src/store/store.js';
import { NotificationListener, type Notification } from '../../src/store/listener.js';
import { jobInput, jobInputs, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';
import { waitFor } from '../helpers/wait.js';

let store: Store;
let listener: NotificationListener;
const received: Notification[] = [];

beforeAll(async () => {
  const setup = await storeSetup();
  store = setup.store;
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

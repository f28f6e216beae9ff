import { beforeAll, describe, expect, it } from 'vitest';
import { queueName } from '../helpers/factories.js';
import { httpCall } from '../http/http-setup.js';
import { POLL, countOf, dashboardSetup, textOf, visible, SKIP_BROWSER } from './helpers.js';

/**
 * The queue page's "Delete queue" in Chromium against a real server: behind a confirm dialog
 * whose safe choice deletes nothing; a queue with a job is refused with the server's line
 * saying what is in it, and stays; an empty one is deleted and gone from the queue list.
 */

let env: Awaited<ReturnType<typeof dashboardSetup>>;
beforeAll(async () => {
  if (SKIP_BROWSER) return;
  env = await dashboardSetup();
});

describe.skipIf(SKIP_BROWSER)('deleting a queue from the dashboard', () => {
  it('the dialog\'s "Keep it" deletes nothing; a queue with a job is refused, saying what is in it', async () => {
    const { page, client, httpUrl } = env;
    const queue = queueName('keep');
    await client.submit({ queue, type: 't' });
    await page.goto(`/queues/${queue}`);
    await page.getByTestId('queue-delete').click();
    await visible(page.getByTestId('delete-queue-dialog'));
    await page.getByTestId('delete-queue-cancel').click();
    await expect.poll(() => page.getByTestId('delete-queue-dialog').isVisible(), POLL).toBe(false);
    await page.getByTestId('queue-delete').click();
    await page.getByTestId('delete-queue-confirm').click();
    await expect.poll(textOf(page.getByTestId('queue-action-status')), POLL).toMatch(
      new RegExp(`^FAILED_PRECONDITION: queue "${queue}" is not empty: it has 1 job \\(1 PENDING\\)`),
    );
    expect((await httpCall(httpUrl, 'GET', `/v1/queues/${queue}`)).status).toBe(200);
  });

  it('an empty queue is deleted on confirm, and the queue list no longer shows it', async () => {
    const { page, client, httpUrl } = env;
    const queue = queueName('gone');
    await client.upsertQueue(queue, { maxAttempts: 3 });
    await page.goto(`/queues/${queue}`);
    await page.getByTestId('queue-delete').click();
    await page.getByTestId('delete-queue-confirm').click();
    await expect.poll(() => new URL(page.url()).pathname, POLL).toBe('/queues');
    await visible(page.getByTestId('queues-table'));
    await expect.poll(countOf(page.getByTestId(`queues-row-${queue}`)), POLL).toBe(0);
    expect((await httpCall(httpUrl, 'GET', `/v1/queues/${queue}`)).status).toBe(404);
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { NonRetryableError } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { POLL, countOf, dashboardSetup, textOf, visible, SKIP_BROWSER } from './helpers.js';

/**
 * The dead letters page in Chromium against a real server: a group whose error has
 * characters outside the BMP (emoji) lists its jobs, a group's job list with all queues
 * shows only that group's queue, a chosen group starts with no row checked, and a truncated
 * grouping says its counts are lower bounds. Every wait is on a condition, never a sleep.
 */

let env: Awaited<ReturnType<typeof dashboardSetup>>;
beforeAll(async () => {
  if (SKIP_BROWSER) return;
  env = await dashboardSetup();
});

/**
 * Dead-letters one job per entry of `jobs` in `queue` (max attempts 1, a worker that fails
 * each with its `error`, non-retryable) and waits until all are in the DLQ; their ids.
 */
async function deadLetter(queue: string, jobs: { type: string; error: string }[]): Promise<string[]> {
  const { client } = env;
  await client.upsertQueue(queue, { maxAttempts: 1 });
  const ids: string[] = [];
  for (const j of jobs) ids.push((await client.submit({ queue, type: j.type, payload: { error: j.error } })).job.id);
  const w = env.worker([queue]);
  for (const type of new Set(jobs.map((j) => j.type))) {
    w.handle<{ error: string }>(type, async (job) => {
      throw new NonRetryableError(job.payload.error);
    });
  }
  await w.start();
  await expect.poll(async () => (await Promise.all(ids.map((id) => client.get(id)))).every((job) => job.state === 'DLQ'), POLL).toBe(true);
  return ids;
}

describe.skipIf(SKIP_BROWSER)('the dead letters page in Chromium', () => {
  it('"Show jobs" lists the jobs of a group whose error has emoji (cut to 200 code points, as the server cuts)', async () => {
    const { page } = env;
    const queue = queueName('dlqemoji');
    // 252 code points but 253 UTF-16 units on the first line: a cut by UTF-16 units keeps
    // one character fewer than the server's group key, so no job would match the group.
    const error = `💥 ${'a'.repeat(250)}\nat the second line`;
    const [id] = await deadLetter(queue, [{ type: 'boom', error }]);

    await page.goto(`/dead-letters?queue=${queue}`);
    const group = page.getByTestId('dlq-group');
    await expect.poll(textOf(group.getByTestId('dlq-group-count')), POLL).toBe('1');
    await group.first().getByTestId('dlq-group-show').click();
    await visible(page.getByTestId(`dlq-job-row-${id}`));
  });

  it('with all queues, a group\'s jobs are only its own queue\'s, and choosing a group unchecks the rows checked before', async () => {
    const { page } = env;
    const a = queueName('dlqa');
    const b = queueName('dlqb');
    const type = queueName('same');
    const error = 'the same failure in two queues';
    const [idA] = await deadLetter(a, [{ type, error }]);
    const [idB] = await deadLetter(b, [{ type, error }]);

    await page.goto('/dead-letters');
    const rowA = page.getByTestId(`dlq-job-row-${idA}`);
    const rowB = page.getByTestId(`dlq-job-row-${idB}`);
    await visible(rowA);
    await visible(rowB);
    await rowA.getByTestId('dlq-select').check();
    await expect.poll(textOf(page.getByTestId('dlq-retry-selected')), POLL).toBe('Retry selected (1)');

    const groupA = page.getByTestId('dlq-group').filter({ hasText: a });
    await expect.poll(textOf(groupA.getByTestId('dlq-group-count')), POLL).toBe('1');
    await groupA.getByTestId('dlq-group-show').click();
    await expect.poll(async () => [await countOf(rowA)(), await countOf(rowB)()], POLL).toEqual([1, 0]);
    await expect.poll(textOf(page.getByTestId('dlq-retry-selected')), POLL).toBe('Retry selected (0)');
    expect(await page.getByTestId('dlq-retry-selected').isDisabled()).toBe(true);
  });

  it('a truncated grouping says the counts cover only the newest dead letters, shows them as "at least N", and keeps them out of the retry label', async () => {
    const { page } = env;
    const queue = queueName('dlqtrunc');
    await deadLetter(queue, [
      { type: 'boom', error: 'grouped twice' },
      { type: 'boom', error: 'grouped twice' },
    ]);
    // The server marks a grouping truncated past its newest 10,000 DLQ jobs; rather than make
    // that many, the real answer is passed through with truncated set, as it would be then.
    await page.route(
      (url) => url.pathname === '/v1/dead-letters',
      async (route) => {
        const response = await route.fetch();
        const body = (await response.json()) as Record<string, unknown>;
        await route.fulfill({ response, json: { ...body, truncated: true } });
      },
    );
    try {
      await page.goto(`/dead-letters?queue=${queue}`);
      const group = page.getByTestId('dlq-group').filter({ hasText: 'grouped twice' });
      await expect.poll(textOf(group.getByTestId('dlq-group-count')), POLL).toBe('at least 2');
      await expect.poll(textOf(page.getByTestId('dlq-truncated')), POLL).toMatch(/only the newest 10,000/);
      await expect.poll(textOf(group.getByTestId('dlq-group-retry')), POLL).toBe('Retry all');
    } finally {
      await page.unrouteAll();
    }
    // Not truncated: exact counts, in the label too, and no note.
    await page.goto(`/dead-letters?queue=${queue}`);
    const group = page.getByTestId('dlq-group').filter({ hasText: 'grouped twice' });
    await expect.poll(textOf(group.getByTestId('dlq-group-count')), POLL).toBe('2');
    await expect.poll(textOf(group.getByTestId('dlq-group-retry')), POLL).toBe('Retry all 2');
    expect(await page.getByTestId('dlq-truncated').count()).toBe(0);
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { NonRetryableError } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import type { Locator } from 'playwright-core';
import { POLL, attrOf, dashboardSetup, textOf, visible, SKIP_BROWSER } from './helpers.js';

/**
 * How the dashboard lays out text it does not control, in Chromium against a real server:
 * a long unbroken error never widens the page, the timeline clips a long detail with
 * the full text in its title, a one-line error wider than the window wraps whole (title
 * too), and absolute times (and the tooltips of relative ones) name their zone. Checked by
 * measuring the page (scrollWidth), never by timing.
 */

let env: Awaited<ReturnType<typeof dashboardSetup>>;
beforeAll(async () => {
  if (SKIP_BROWSER) return;
  env = await dashboardSetup();
});

describe.skipIf(SKIP_BROWSER)('the dashboard\'s layout of long text in Chromium', () => {
  it('a job whose error is 3,000 characters with no space keeps its page as wide as the window', async () => {
    const { page, client } = env;
    const queue = queueName('longerr');
    await client.upsertQueue(queue, { maxAttempts: 1 });
    const error = 'x'.repeat(3000);
    const { job } = await client.submit({ queue, type: 'long' });
    const w = env.worker([queue]);
    w.handle('long', async () => {
      throw new NonRetryableError(error);
    });
    await w.start();
    await expect.poll(async () => (await client.get(job.id)).state, POLL).toBe('DLQ');

    await page.goto(`/jobs/${job.id}`);
    await visible(page.getByTestId('job-last-error'));
    await visible(page.getByTestId('attempt-error'));
    await visible(page.getByTestId('timeline-event').filter({ hasText: 'attempt 1' }));
    // The document's width (scrollWidth of <html>) is no more than its visible width.
    const width = await page.locator('html').evaluate((el) => ({ scroll: el.scrollWidth, visible: el.clientWidth }));
    expect(width.scroll).toBeLessThanOrEqual(width.visible);
    const detail = page.getByTestId('timeline-detail').filter({ hasText: 'xxxx' });
    await expect.poll(attrOf(detail, 'title'), POLL).toBe(error);
    // The timeline shows the start of the detail, not all 3,000 characters.
    expect((await textOf(detail)())!.length).toBeLessThan(300);
  });

  it('names and errors with no space never widen the page: a DLQ group\'s heading and purge dialog, a 128-character queue name', async () => {
    const { browser, client, httpUrl } = env;
    // The longest queue name there may be, without a space: the queue pickers list it.
    const prefix = queueName('wide');
    const queue = `${prefix}-${'x'.repeat(128 - prefix.length - 1)}`;
    await client.upsertQueue(queue, { maxAttempts: 1 });
    const { job } = await client.submit({ queue, type: 'long' });
    const w = env.worker([queue], 'w-wide');
    w.handle('long', async () => {
      throw new NonRetryableError('y'.repeat(3000));
    });
    await w.start();
    await expect.poll(async () => (await client.get(job.id)).state, POLL).toBe('DLQ');

    const context = await browser.newContext({ baseURL: httpUrl, viewport: { width: 760, height: 800 } });
    try {
      const page = await context.newPage();
      const pageWidth = () => page.locator('html').evaluate((el) => el.scrollWidth - el.clientWidth);
      for (const path of ['/', '/jobs', '/dead-letters']) {
        await page.goto(path);
        await expect.poll(() => page.locator(`option[value="${queue}"]`).count(), { ...POLL, message: path }).toBeGreaterThan(0);
        expect(await pageWidth(), path).toBeLessThanOrEqual(0);
      }
      // The long name breaks inside its cell: the counts and the state beside it stay in the window.
      const inWindow = (loc: Locator) => loc.evaluate((el) => el.getBoundingClientRect().right <= el.ownerDocument.documentElement.clientWidth);
      await page.goto('/');
      const row = page.getByTestId(`queue-row-${queue}`);
      await visible(row);
      expect(await inWindow(row.getByTestId('count-cancelled'))).toBe(true);
      await page.goto(`/jobs?queue=${queue}`);
      await visible(page.getByTestId(`job-row-${job.id}`));
      expect(await inWindow(page.getByTestId(`job-row-${job.id}`).getByTestId('job-state'))).toBe(true);
      await page.goto(`/dead-letters?queue=${queue}`);
      const group = page.getByTestId('dlq-group').filter({ hasText: 'yyyy' });
      await group.getByTestId('dlq-group-show').click();
      await visible(page.getByTestId(`dlq-job-row-${job.id}`));
      expect(await pageWidth()).toBeLessThanOrEqual(0);
      await group.getByTestId('dlq-group-purge').click();
      const dialog = page.getByTestId('purge-dialog');
      await visible(dialog.getByTestId('purge-count'));
      expect(await dialog.evaluate((el) => el.scrollWidth - el.clientWidth)).toBeLessThanOrEqual(0);
      await dialog.getByTestId('purge-cancel').click();
    } finally {
      await context.close();
    }
    // A phone-wide window: the overview's charts shrink to it.
    const phone = await browser.newContext({ baseURL: httpUrl, viewport: { width: 390, height: 800 } });
    try {
      const page = await phone.newPage();
      await page.goto('/');
      await visible(page.getByTestId('chart-throughput').locator('canvas'));
      expect(await page.locator('html').evaluate((el) => el.scrollWidth - el.clientWidth)).toBeLessThanOrEqual(0);
    } finally {
      await phone.close();
    }
  });

  it('a one-line server error wider than the window wraps whole, its text also in the title', async () => {
    const { browser, httpUrl } = env;
    const missing = '01890000-0000-7000-8000-000000000000';
    // A phone-wide window: the server's real NOT_FOUND line is wider than it.
    const context = await browser.newContext({ baseURL: httpUrl, viewport: { width: 300, height: 700 } });
    try {
      const page = await context.newPage();
      await page.goto(`/jobs/${missing}`);
      const line = page.getByTestId('error');
      await expect.poll(attrOf(line, 'title'), POLL).toMatch(new RegExp(`^NOT_FOUND: .*${missing}`));
      expect(await textOf(line)()).toBe(await attrOf(line, 'title')());
      // Nothing of it hidden past its right edge, and the page no wider than the window.
      expect(await line.evaluate((el) => el.scrollWidth <= el.clientWidth)).toBe(true);
      const width = await page.locator('html').evaluate((el) => ({ scroll: el.scrollWidth, visible: el.clientWidth }));
      expect(width.scroll).toBeLessThanOrEqual(width.visible);
    } finally {
      await context.close();
    }
  });

  it('absolute times, and the tooltips of relative ones, name their time zone', async () => {
    const { client, browser, httpUrl } = env;
    const queue = queueName('tz');
    const { job } = await client.submit({ queue, type: 'later' });
    // A browser in New York, in English: its times end in EST or EDT.
    const context = await browser.newContext({ baseURL: httpUrl, timezoneId: 'America/New_York', locale: 'en-US' });
    try {
      const page = await context.newPage();
      await page.goto(`/jobs/${job.id}`);
      const created = page.getByTestId('timeline-event').filter({ hasText: 'created' }).locator('time');
      await expect.poll(textOf(created), POLL).toMatch(/\bE[SD]T$/);
      // The jobs list says "… ago"; its tooltip is the exact time in the same zone, not UTC.
      await page.goto(`/jobs?queue=${queue}`);
      const ago = page.getByTestId(`job-row-${job.id}`).locator('time');
      await expect.poll(textOf(ago), POLL).toMatch(/ago$/);
      expect(await attrOf(ago, 'title')()).toMatch(/\bE[SD]T$/);
      // The charts' time axis has no room for a zone: their captions name it.
      await page.goto('/');
      await expect.poll(textOf(page.getByTestId('chart-throughput').locator('figcaption')), POLL).toMatch(/\(times in E[SD]T\)$/);
    } finally {
      await context.close();
    }
  });

  it('a relative time moves on with the clock while its row stays the same', async () => {
    const { client, browser, httpUrl } = env;
    const queue = queueName('ago');
    const { job } = await client.submit({ queue, type: 'later' });
    const context = await browser.newContext({ baseURL: httpUrl });
    try {
      const page = await context.newPage();
      // The page's clock, moved by the test: two minutes pass at once, the job unchanged.
      await page.clock.install();
      await page.goto(`/jobs?queue=${queue}`);
      const ago = page.getByTestId(`job-row-${job.id}`).locator('time');
      await expect.poll(textOf(ago), POLL).toMatch(/^\d+ s ago$/);
      await page.clock.fastForward(125_000);
      await expect.poll(textOf(ago), POLL).toBe('2 min ago');
    } finally {
      await context.close();
    }
  });
});

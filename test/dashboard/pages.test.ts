import { beforeAll, describe, expect, it } from 'vitest';
import { NonRetryableError } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { httpCall } from '../http/http-setup.js';
import { POLL, attrOf, countOf, dashboardSetup, textOf, visible, SKIP_BROWSER } from './helpers.js';

/**
 * The dashboard driven in Chromium against a real server (issue 19's "Must show"): counts
 * rising on the overview as a worker completes jobs, the jobs filters, a job's attempts,
 * retrying a dead letter from the page, pausing and resuming a queue, an unknown queue's
 * single error line, the page's icon, a job page whose id is no job id, and the keyboard (the
 * dependency graph's tab stops, Enter and Space on them).
 * Every wait is on a condition (locator expectations, expect.poll), never a sleep.
 */

let env: Awaited<ReturnType<typeof dashboardSetup>>;
beforeAll(async () => {
  if (SKIP_BROWSER) return;
  env = await dashboardSetup();
});

/** Runs `fn` on a page of a browser context of its own whose dependency-graph chunk cannot load. */
async function withoutGraph(fn: (page: Awaited<ReturnType<typeof env.browser.newPage>>) => Promise<void>): Promise<void> {
  const context = await env.browser.newContext({ baseURL: env.httpUrl });
  try {
    const page = await context.newPage();
    await page.route('**/assets/DepGraph-*', (route) => route.abort('connectionrefused'));
    await fn(page);
  } finally {
    await context.close();
  }
}


describe.skipIf(SKIP_BROWSER)('the dashboard in Chromium', () => {
  it('overview: a queue\'s completed count rises as a worker completes its jobs', async () => {
    const { page, client } = env;
    const queue = queueName('ov');
    await client.submitMany(Array.from({ length: 5 }, (_, i) => ({ queue, type: 'work', payload: { n: i } })));
    await page.goto('/');
    const row = page.getByTestId(`queue-row-${queue}`);
    await expect.poll(textOf(row.getByTestId('count-pending')), POLL).toBe('5');
    await expect.poll(textOf(row.getByTestId('count-completed')), POLL).toBe('0');

    const w = env.worker([queue]);
    w.handle('work', async () => ({ ok: true }));
    await w.start();
    await expect.poll(textOf(row.getByTestId('count-completed')), POLL).toBe('5');
    await expect.poll(textOf(row.getByTestId('count-pending')), POLL).toBe('0');
  });

  it('overview: a failed read shows its line at once (the next poll is the retry), and goes with the next good answer', async () => {
    const { page, client } = env;
    const queue = queueName('outage');
    await client.submit({ queue, type: 'work' });
    // The server's answers, until `failing`: then what a server whose database hangs
    // answers after its timeout (503 UNAVAILABLE), counted.
    let failing = false;
    let failures = 0;
    await page.route('**/v1/queue-stats', async (route) => {
      if (!failing) return route.continue();
      failures += 1;
      await route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ code: 'UNAVAILABLE', message: 'database unavailable: Query read timeout' }) });
    });
    try {
      await page.goto('/');
      const row = page.getByTestId(`queue-row-${queue}`);
      await expect.poll(textOf(row.getByTestId('count-pending')), POLL).toBe('1');
      failing = true;
      await expect.poll(textOf(page.getByTestId('error')), POLL).toBe('UNAVAILABLE: database unavailable: Query read timeout');
      // Shown on the first failed answer, not after the read was retried in place; the
      // last numbers stay under the line.
      expect(failures).toBe(1);
      expect(await textOf(row.getByTestId('count-pending'))()).toBe('1');
      failing = false;
      await expect.poll(countOf(page.getByTestId('error')), POLL).toBe(0);
    } finally {
      await page.unroute('**/v1/queue-stats');
    }
  });

  it('a server that cannot be reached is said once, by one banner, over the last answers; it goes when the server answers', async () => {
    const { page, client } = env;
    const queue = queueName('down');
    await client.submit({ queue, type: 'work' });
    // The connection refused, as by a server that is down: every read of the page fails alike.
    let down = false;
    await page.route('**/v1/**', (route) => (down ? route.abort('connectionrefused') : route.continue()));
    try {
      await page.goto('/');
      const row = page.getByTestId(`queue-row-${queue}`);
      await expect.poll(textOf(row.getByTestId('count-pending')), POLL).toBe('1');
      down = true;
      await expect.poll(textOf(page.getByTestId('unreachable')), POLL).toMatch(/^UNAVAILABLE: the server cannot be reached/);
      // The overview's two reads (stats, series) failed: one alert for both, the numbers kept.
      await expect.poll(countOf(page.getByTestId('series-error')), POLL).toBe(0);
      expect(await page.locator('[role="alert"]').count()).toBe(1);
      expect(await textOf(row.getByTestId('count-pending'))()).toBe('1');
      down = false;
      await expect.poll(countOf(page.getByTestId('unreachable')), POLL).toBe(0);
    } finally {
      await page.unroute('**/v1/**');
    }
  });

  it('a page opened while the server is starting gets its action buttons once the server answers who the caller is', async () => {
    const { page, client } = env;
    const queue = queueName('starting');
    await client.upsertQueue(queue, {});
    // The first three asks of the caller (the first read and its two retries) answered as a
    // starting server answers; then the server's own answers.
    let asked = 0;
    await page.route('**/v1/caller', async (route) => {
      asked += 1;
      if (asked > 3) return route.continue();
      await route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ code: 'UNAVAILABLE', message: 'the server is starting: waiting for the database' }) });
    });
    try {
      await page.goto(`/queues/${queue}`);
      await expect.poll(textOf(page.getByTestId('caller-error')), POLL).toMatch(/^UNAVAILABLE: the server is starting/);
      await visible(page.getByTestId('queue-pause'));
      await expect.poll(countOf(page.getByTestId('caller-error')), POLL).toBe(0);
    } finally {
      await page.unroute('**/v1/caller');
    }
  });

  it('jobs: the filters (queue + state, type, idempotency key) show only matching rows', async () => {
    const { page, client } = env;
    const queue = queueName('filt');
    const other = queueName('other');
    const a = await client.submit({ queue, type: 'alpha', idempotencyKey: `key-${queue}` });
    const b = await client.submit({ queue, type: 'beta' });
    const c = await client.submit({ queue: other, type: 'alpha' });
    await client.cancel(b.job.id);

    await page.goto('/jobs');
    await page.getByTestId('filter-queue').selectOption(queue);
    await page.getByTestId('filter-state-pending').check();
    await page.getByTestId('filter-apply').click();
    await visible(page.getByTestId(`job-row-${a.job.id}`));
    await expect.poll(countOf(page.locator('[data-testid^="job-row-"]')), POLL).toBe(1);
    await expect.poll(attrOf(page.getByTestId(`job-row-${a.job.id}`), 'data-state'), POLL).toMatch(/PENDING/i);
    expect(page.url()).toContain(`queue=${queue}`);

    await page.goto(`/jobs?state=JOB_STATE_CANCELLED&queue=${queue}`);
    await visible(page.getByTestId(`job-row-${b.job.id}`));
    await expect.poll(countOf(page.locator('[data-testid^="job-row-"]')), POLL).toBe(1);
    // A link with the API's short form of a state: the list and its checkbox agree.
    await page.goto(`/jobs?state=cancelled&queue=${queue}`);
    await visible(page.getByTestId(`job-row-${b.job.id}`));
    await expect.poll(countOf(page.locator('[data-testid^="job-row-"]')), POLL).toBe(1);
    expect(await page.getByTestId('filter-state-cancelled').isChecked()).toBe(true);

    await page.goto('/jobs');
    await page.getByTestId('filter-type').fill('alpha');
    await page.getByTestId('filter-type').press('Enter');
    await visible(page.getByTestId(`job-row-${a.job.id}`));
    await visible(page.getByTestId(`job-row-${c.job.id}`));
    await expect.poll(countOf(page.getByTestId(`job-row-${b.job.id}`)), POLL).toBe(0);

    await page.goto('/jobs');
    await page.getByTestId('filter-queue').selectOption(queue);
    await page.getByTestId('filter-key').fill(`key-${queue}`);
    await page.getByTestId('filter-apply').click();
    await visible(page.getByTestId(`job-row-${a.job.id}`));
    await expect.poll(countOf(page.locator('[data-testid^="job-row-"]')), POLL).toBe(1);
    await expect.poll(textOf(page.getByTestId(`job-row-${a.job.id}`).getByTestId('job-id')), POLL).toBe(a.job.id);
  });

  it('jobs: "Cancel all matching" cancels the filtered pending jobs after a count in a dialog; Escape cancels nothing; no button for finished states or a key', async () => {
    const { page, client } = env;
    const queue = queueName('cancelall');
    const pending = await client.submitMany(Array.from({ length: 3 }, (_, i) => ({ queue, type: 'bulk', payload: { n: i } })));
    const { job: other } = await client.submit({ queue, type: 'keep' });
    const dialog = page.getByTestId('cancel-dialog');

    await page.goto(`/jobs?queue=${queue}&state=cancelled`);
    await visible(page.getByTestId('jobs-table'));
    await expect.poll(countOf(page.getByTestId('jobs-cancel-all')), POLL).toBe(0);
    await page.goto(`/jobs?queue=${queue}&key=k`);
    await visible(page.getByTestId('jobs-table'));
    await expect.poll(countOf(page.getByTestId('jobs-cancel-all')), POLL).toBe(0);

    await page.goto(`/jobs?queue=${queue}&type=bulk&state=pending`);
    await visible(page.getByTestId(`job-row-${pending[0]!.job.id}`));
    await page.getByTestId('jobs-cancel-all').click();
    await expect.poll(textOf(dialog.getByTestId('cancel-count')), POLL).toMatch(/^This cancels 3 jobs \(a running one is asked to stop/);
    expect(await dialog.getByTestId('cancel-cancel').evaluate((el) => el.matches(':focus'))).toBe(true);
    await page.keyboard.press('Escape');
    await expect.poll(countOf(page.locator('dialog[open]')), POLL).toBe(0);
    expect((await client.get(pending[0]!.job.id)).state).toBe('PENDING');

    await page.getByTestId('jobs-cancel-all').click();
    await expect.poll(textOf(dialog.getByTestId('cancel-confirm')), POLL).toBe('Cancel 3');
    await dialog.getByTestId('cancel-confirm').click();
    await expect.poll(textOf(page.getByTestId('jobs-action-status')), POLL).toBe('Cancelled 3 jobs');
    // The list follows: the filtered pending jobs are gone from it.
    await expect.poll(countOf(page.locator('[data-testid^="job-row-"]')), POLL).toBe(0);
    expect(await Promise.all(pending.map(async (r) => (await client.get(r.job.id)).state))).toEqual(['CANCELLED', 'CANCELLED', 'CANCELLED']);
    expect((await client.get(other.id)).state).toBe('PENDING');
  });

  it('jobs: the page survives a reload, and Back returns to the page before', async () => {
    const { page, client } = env;
    const queue = queueName('pages');
    await client.submitMany(Array.from({ length: 60 }, (_, i) => ({ queue, type: 'paged', payload: { n: i } })));
    await page.goto(`/jobs?queue=${queue}`);
    const rows = page.locator('[data-testid^="job-row-"]');
    await expect.poll(countOf(rows), POLL).toBe(50);
    await page.getByTestId('jobs-next').click();
    await expect.poll(textOf(page.getByTestId('jobs-page')), POLL).toBe('Page 2');
    await expect.poll(countOf(rows), POLL).toBe(10);
    const second = await rows.first().getAttribute('data-testid');

    await page.reload();
    await expect.poll(textOf(page.getByTestId('jobs-page')), POLL).toBe('Page 2');
    await expect.poll(countOf(rows), POLL).toBe(10);
    expect(await rows.first().getAttribute('data-testid')).toBe(second);

    await page.goBack();
    await expect.poll(textOf(page.getByTestId('jobs-page')), POLL).toBe('Page 1');
    await expect.poll(countOf(rows), POLL).toBe(50);
    // A new filter starts at the first page.
    await page.goForward();
    await expect.poll(textOf(page.getByTestId('jobs-page')), POLL).toBe('Page 2');
    await page.getByTestId('filter-apply').click();
    await expect.poll(textOf(page.getByTestId('jobs-page')), POLL).toBe('Page 1');
  });

  it('jobs: Next waits while the next page loads, so a second click shows the third page, numbered 3', async () => {
    const { page, client, httpUrl } = env;
    const queue = queueName('slowpage');
    await client.submitMany(Array.from({ length: 110 }, (_, i) => ({ queue, type: 'paged', payload: { n: i } })));
    type Page = { jobs: { id: string }[]; nextPageToken?: string };
    const apiPage = async (token?: string) =>
      (await httpCall(httpUrl, 'GET', '/v1/jobs', { query: { queue, page_size: '50', ...(token ? { page_token: token } : {}) } })).body as Page;
    const second = await apiPage((await apiPage()).nextPageToken);
    const third = await apiPage(second.nextPageToken);
    // A page asked with a token is held until released, so a click while it loads is seen.
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    await page.route('**/v1/jobs?*', async (route) => {
      if (new URL(route.request().url()).searchParams.has('page_token')) await held;
      await route.continue();
    });
    try {
      await page.goto(`/jobs?queue=${queue}`);
      const rows = page.locator('[data-testid^="job-row-"]');
      await expect.poll(countOf(rows), POLL).toBe(50);
      await page.getByTestId('jobs-next').click();
      // The first page's rows are still shown: their next token is not the second page's.
      await expect.poll(textOf(page.getByTestId('jobs-page')), POLL).toBe('Page 2 (loading…)');
      expect(await page.getByTestId('jobs-next').isDisabled()).toBe(true);
      release();
      await expect.poll(textOf(page.getByTestId('jobs-page')), POLL).toBe('Page 2');
      await expect.poll(attrOf(rows.first(), 'data-testid'), POLL).toBe(`job-row-${second.jobs[0]!.id}`);
      await page.getByTestId('jobs-next').click();
      await expect.poll(textOf(page.getByTestId('jobs-page')), POLL).toBe('Page 3');
      await expect.poll(attrOf(rows.first(), 'data-testid'), POLL).toBe(`job-row-${third.jobs[0]!.id}`);
      await expect.poll(countOf(rows), POLL).toBe(10);
    } finally {
      await page.unroute('**/v1/jobs?*');
    }
  });

  it('a job that failed once then completed shows two attempts, the first with its error', async () => {
    const { page, client } = env;
    const queue = queueName('att');
    await client.upsertQueue(queue, { maxAttempts: 3, backoff: { kind: 'fixed', baseSeconds: 0, capSeconds: 0 } });
    const { job } = await client.submit({ queue, type: 'flaky' });
    let tries = 0;
    const w = env.worker([queue]);
    w.handle('flaky', async () => {
      tries += 1;
      if (tries === 1) throw new Error('first try breaks');
      return { ok: true };
    });
    await w.start();
    await page.goto(`/jobs/${job.id}`);
    await expect.poll(textOf(page.getByTestId('job-state')), POLL).toMatch(/completed/i);
    const attempts = page.getByTestId('attempts-table').locator('[data-testid^="attempt-row-"]');
    await expect.poll(countOf(attempts), POLL).toBe(2);
    await expect.poll(attrOf(page.getByTestId('attempt-row-1'), 'data-outcome'), POLL).toMatch(/FAILED/i);
    await expect.poll(textOf(page.getByTestId('attempt-row-1').getByTestId('attempt-error')), POLL).toContain('first try breaks');
    await expect.poll(attrOf(page.getByTestId('attempt-row-2'), 'data-outcome'), POLL).toMatch(/COMPLETED/i);
  });

  it('a dead-lettered job retried from the dead letters page completes', async () => {
    const { page, client } = env;
    const queue = queueName('dlq');
    await client.upsertQueue(queue, { maxAttempts: 1 });
    const { job } = await client.submit({ queue, type: 'once' });
    let tries = 0;
    const w = env.worker([queue]);
    w.handle('once', async () => {
      tries += 1;
      if (tries === 1) throw new NonRetryableError('broken on the first try');
      return { ok: true };
    });
    await w.start();
    await expect.poll(async () => (await client.get(job.id)).state, POLL).toBe('DLQ');

    await page.goto(`/dead-letters?queue=${queue}`);
    const group = page.getByTestId('dlq-group').filter({ hasText: 'broken on the first try' });
    await expect.poll(textOf(group.getByTestId('dlq-group-count')), POLL).toBe('1');
    await group.getByTestId('dlq-group-show').click();
    await page.getByTestId(`dlq-job-row-${job.id}`).getByTestId('dlq-retry-one').click();
    await visible(page.getByTestId('dlq-action-status'));
    await expect.poll(async () => (await client.get(job.id)).state, POLL).toBe('COMPLETED');
    await page.goto(`/jobs/${job.id}`);
    await expect.poll(textOf(page.getByTestId('job-state')), POLL).toMatch(/completed/i);
  });

  it('pause and resume a queue from its page; the overview marks it paused meanwhile', async () => {
    const { page, client, httpUrl } = env;
    const queue = queueName('pause');
    await client.upsertQueue(queue, {});
    await page.goto(`/queues/${queue}`);
    await expect.poll(textOf(page.getByTestId('queue-state')), POLL).toBe('active');
    await page.getByTestId('queue-pause').click();
    await expect.poll(textOf(page.getByTestId('queue-state')), POLL).toBe('paused');
    expect((await httpCall(httpUrl, 'GET', `/v1/queues/${queue}`)).body.queue.paused).toBe(true);
    // The overview marks the paused queue's row, and only it.
    const badge = (q: string) => page.getByTestId(`queue-row-${q}`).getByTestId('queue-paused-badge');
    const other = queueName('active');
    await client.upsertQueue(other, {});
    await page.goto('/');
    await visible(badge(queue));
    await visible(page.getByTestId(`queue-row-${other}`));
    expect(await badge(other).count()).toBe(0);
    await page.goto(`/queues/${queue}`);
    await page.getByTestId('queue-resume').click();
    await expect.poll(textOf(page.getByTestId('queue-state')), POLL).toBe('active');
    expect((await client.getQueue(queue)).paused).toBe(false);
    await page.goto('/');
    await visible(page.getByTestId(`queue-row-${queue}`));
    await expect.poll(countOf(badge(queue)), POLL).toBe(0);
  });

  it('a queue whose name has a dot opens from the queue list and again on reload, its name in the tab\'s title', async () => {
    const { page, client } = env;
    const queue = `${queueName('billing')}.invoices`;
    await client.upsertQueue(queue, {});
    await page.goto('/queues');
    // Each view names the tab, so that open tabs can be told apart.
    await expect.poll(() => page.title(), POLL).toBe('Queues · Evora');
    await page.getByTestId(`queues-row-${queue}`).getByRole('link', { name: queue }).click();
    await expect.poll(textOf(page.getByTestId('queue-state')), POLL).toBe('active');
    await expect.poll(() => page.title(), POLL).toBe(`Queue ${queue} · Evora`);
    await page.reload();
    await expect.poll(textOf(page.getByTestId('queue-state')), POLL).toBe('active');
    await expect.poll(() => page.title(), POLL).toBe(`Queue ${queue} · Evora`);
    await page.goto('/dead-letters');
    await expect.poll(() => page.title(), POLL).toBe('Dead letters · Evora');
  });

  it('an unknown queue\'s page says NOT_FOUND once (its stats fail the same way and add no second line)', async () => {
    const { page } = env;
    const queue = queueName('nope');
    const path = `/v1/queues/${queue}/stats`;
    // The stats' second answer (the next poll) comes after the first one is on the page.
    let statsAnswers = 0;
    const counted = (response: { url(): string }) => {
      if (new URL(response.url()).pathname === path) statsAnswers += 1;
    };
    page.on('response', counted);
    try {
      await page.goto(`/queues/${queue}`);
      await expect.poll(textOf(page.getByTestId('error')), POLL).toBe(`NOT_FOUND: queue "${queue}" not found`);
      await expect.poll(() => statsAnswers, POLL).toBeGreaterThanOrEqual(2);
      expect(await countOf(page.getByRole('alert'))()).toBe(1);
      expect(await countOf(page.getByTestId('stats-error'))()).toBe(0);
    } finally {
      page.off('response', counted);
    }
  });

  it('a job page stops asking once the job does not exist; a job that exists goes on being polled', async () => {
    const { browser, httpUrl, client } = env;
    const missing = '01890000-0000-7000-8000-0000000000aa';
    const { job } = await client.submit({ queue: queueName('poll'), type: 'later' });
    // The page's timers on a clock the test moves: ten seconds of polling pass at once.
    const context = await browser.newContext({ baseURL: httpUrl });
    try {
      const page = await context.newPage();
      await page.clock.install();
      const asked = new Map<string, number>();
      page.on('request', (request) => {
        const path = new URL(request.url()).pathname;
        asked.set(path, (asked.get(path) ?? 0) + 1);
      });
      await page.goto(`/jobs/${missing}`);
      await expect.poll(textOf(page.getByTestId('error')), POLL).toMatch(/^NOT_FOUND: /);
      await page.clock.runFor(10_000);
      await page.waitForLoadState('networkidle');
      expect(asked.get(`/v1/jobs/${missing}`)).toBe(1);

      await page.goto(`/jobs/${job.id}`);
      await expect.poll(textOf(page.getByTestId('job-state')), POLL).toBe('pending');
      await page.clock.runFor(10_000);
      await expect.poll(() => asked.get(`/v1/jobs/${job.id}`) ?? 0, POLL).toBeGreaterThanOrEqual(3);
    } finally {
      await context.close();
    }
  });

  /** A new queue of max attempts 5, its page open with the settings form loaded. */
  async function queueSettingsOpen(prefix: string): Promise<string> {
    const { page, client } = env;
    const queue = queueName(prefix);
    await client.upsertQueue(queue, { maxAttempts: 5 });
    await page.goto(`/queues/${queue}`);
    await expect.poll(() => page.getByTestId('setting-maxAttempts').inputValue(), POLL).toBe('5');
    return queue;
  }

  it('queue settings saved from the page reach the server: limits, retentions (in days), the attempt timeout, delete at completion', async () => {
    const { page, client } = env;
    const queue = await queueSettingsOpen('set');
    await page.getByTestId('setting-maxAttempts').fill('7');
    await page.getByTestId('setting-maxConcurrency').fill('3');
    // The defaults shown: retentions in days (7, 7, 30), no timeout, jobs kept at completion.
    expect(await page.getByTestId('setting-completedDays').inputValue()).toBe('7');
    expect(await page.getByTestId('setting-dlqDays').inputValue()).toBe('30');
    expect(await page.getByTestId('setting-attemptTimeout').inputValue()).toBe('0');
    expect(await page.getByTestId('setting-deleteOnComplete').isChecked()).toBe(false);
    await page.getByTestId('setting-completedDays').fill('0.5');
    await page.getByTestId('setting-cancelledDays').fill('0');
    await page.getByTestId('setting-dlqDays').fill('90');
    await page.getByTestId('setting-attemptTimeout').fill('45');
    await page.getByTestId('setting-deleteOnComplete').check();
    await page.getByTestId('queue-save').click();
    await visible(page.getByTestId('queue-save-status'));
    await expect.poll(async () => (await client.getQueue(queue)).maxAttempts, POLL).toBe(7);
    const saved = await client.getQueue(queue);
    expect(saved).toMatchObject({
      maxConcurrency: 3,
      completedRetentionSeconds: 43_200,
      cancelledRetentionSeconds: 0,
      dlqRetentionSeconds: 90 * 86_400,
      attemptTimeoutSeconds: 45,
      deleteOnComplete: true,
    });
  });

  it('a settings field left empty is refused on the form, never saved as "keep the old value"', async () => {
    const { page, client } = env;
    const queue = await queueSettingsOpen('empty');
    let puts = 0;
    const counted = (request: { method(): string }) => void (request.method() === 'PUT' && (puts += 1));
    page.on('request', counted);
    try {
      await page.getByTestId('setting-maxAttempts').fill('');
      await page.getByTestId('queue-save').click();
      expect(await page.getByTestId('setting-maxAttempts').evaluate((el) => (el as unknown as { validity: { valueMissing: boolean } }).validity.valueMissing)).toBe(true);
      // Then a value: that save is the only one sent.
      await page.getByTestId('setting-maxAttempts').fill('6');
      await page.getByTestId('queue-save').click();
      await expect.poll(async () => (await client.getQueue(queue)).maxAttempts, POLL).toBe(6);
      expect(puts).toBe(1);
    } finally {
      page.off('request', counted);
    }
  });

  it('a settings edit not yet saved survives pausing the queue, and then saves', async () => {
    const { page, client } = env;
    const queue = await queueSettingsOpen('edit');
    await page.getByTestId('setting-maxAttempts').fill('9');
    await page.getByTestId('queue-pause').click();
    // The page shows the paused queue as read again, and the field still holds the edit.
    await expect.poll(textOf(page.getByTestId('queue-state')), POLL).toBe('paused');
    expect(await page.getByTestId('setting-maxAttempts').inputValue()).toBe('9');
    await page.getByTestId('queue-save').click();
    await expect.poll(async () => (await client.getQueue(queue)).maxAttempts, POLL).toBe(9);
    expect((await client.getQueue(queue)).paused).toBe(true);
  });

  it('the page links an icon, and the browser gets it (no more 404 for /favicon.ico in the console)', async () => {
    const { page } = env;
    const icon = page.waitForResponse((response) => new URL(response.url()).pathname.startsWith('/favicon.'), POLL);
    await page.goto('/');
    const answer = await icon;
    expect(new URL(answer.url()).pathname).toBe('/favicon.svg');
    expect(answer.status()).toBe(200);
  });

  it('a dependency graph whose code cannot be loaded (the server down or upgraded) says so in one line; the rest of the page stays', async () => {
    const { client } = env;
    const queue = queueName('nograph');
    const [parent, child] = await client.submitMany([
      { queue, type: 'first', ref: 'first' },
      { queue, type: 'then', dependsOnRefs: ['first'] },
    ]);
    // The graph's chunk (loaded on demand) refused, as by a server that is down at that moment.
    await withoutGraph(async (page) => {
      await page.goto(`/jobs/${child!.job.id}`);
      await expect.poll(textOf(page.getByTestId('boundary-error')), POLL).toMatch(/^The dependency graph could not be shown/);
      await expect.poll(textOf(page.getByTestId('job-parent')), POLL).toBe(parent!.job.id);
      await visible(page.getByTestId('job-state'));
      await visible(page.getByTestId('nav-jobs'));
    });
  });

  it('a job with as many children as the server lists (1,000) says it may have more; one with fewer does not', async () => {
    const { client } = env;
    const queue = queueName('kids');
    const [parent] = await client.submitMany([
      { queue, type: 'first', ref: 'first' },
      ...Array.from({ length: 1000 }, () => ({ queue, type: 'then', dependsOnRefs: ['first'] })),
    ]);
    const [small] = await client.submitMany([
      { queue, type: 'first', ref: 'first' },
      { queue, type: 'then', dependsOnRefs: ['first'] },
    ]);
    // Not the graph of 1,000 nodes: the list is what this is about.
    await withoutGraph(async (page) => {
      await page.goto(`/jobs/${parent!.job.id}`);
      await expect.poll(countOf(page.getByTestId('job-child')), POLL).toBe(1000);
      await expect.poll(textOf(page.getByTestId('job-children-cut')), POLL).toBe('The server lists at most 1,000 children: this job may have more.');
      await page.goto(`/jobs/${small!.job.id}`);
      await expect.poll(countOf(page.getByTestId('job-child')), POLL).toBe(1);
      expect(await page.getByTestId('job-children-cut').count()).toBe(0);
    });
  });

  it('an action\'s result line stays with its job: opening another job from the page shows none', async () => {
    const { page, client } = env;
    const queue = queueName('carry');
    const [parent, child] = await client.submitMany([
      { queue, type: 'first', ref: 'first' },
      { queue, type: 'then', dependsOnRefs: ['first'] },
    ]);
    await page.goto(`/jobs/${child!.job.id}`);
    await page.getByTestId('job-cancel').click();
    await expect.poll(textOf(page.getByTestId('job-action-status')), POLL).toBe('Cancel: the job is now cancelled');
    // The parent, from the child's list of parents (a link within the app): not cancelled, no line.
    await page.getByTestId('job-parent').click();
    await expect.poll(textOf(page.getByTestId('job-page-id')), POLL).toBe(parent!.job.id);
    await expect.poll(textOf(page.getByTestId('job-state')), POLL).toBe('pending');
    expect(await textOf(page.getByTestId('job-action-status'))()).toBe('');
  });

  it('a job\'s dependency graph: its other jobs are tab stops that Enter or Space opens; this job\'s node and the edges are not', async () => {
    const { page, client } = env;
    const queue = queueName('graph');
    const [parent, child] = await client.submitMany([
      { queue, type: 'first', ref: 'first' },
      { queue, type: 'then', dependsOnRefs: ['first'] },
    ]);
    const parentId = parent!.job.id;
    const childId = child!.job.id;
    await page.goto(`/jobs/${parentId}`);
    const graph = page.getByTestId('job-graph');
    await expect.poll(countOf(graph.locator('.react-flow__node')), POLL).toBe(2);
    await expect.poll(countOf(graph.locator('.react-flow__edge')), POLL).toBe(1);
    // Every element of the graph that Tab stops at (tabIndex >= 0): the child's node alone,
    // a link; this job's node opens nothing, so it is none.
    const stops = () =>
      graph.evaluate((el) =>
        [...el.querySelectorAll('*')]
          .filter((e) => e.tabIndex >= 0)
          .map((e) => `${e.classList.contains('react-flow__node') ? 'node' : e.classList.contains('react-flow__edge') ? 'edge' : e.tagName} ${e.getAttribute('data-id')} ${e.getAttribute('role')}`),
      );
    expect(await stops()).toEqual([`node ${childId} link`]);
    await graph.locator(`.react-flow__node[data-id="${childId}"]`).focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.url(), POLL).toMatch(new RegExp(`/jobs/${childId}$`));
    // The child's page: its parent is the tab stop now, and Space opens it.
    await expect.poll(stops, POLL).toEqual([`node ${parentId} link`]);
    await graph.locator(`.react-flow__node[data-id="${parentId}"]`).focus();
    await page.keyboard.press(' ');
    await expect.poll(() => page.url(), POLL).toMatch(new RegExp(`/jobs/${parentId}$`));
    await expect.poll(textOf(page.getByTestId('job-page-id')), POLL).toBe(parentId);
  });

  it('a job page whose id is not a job id says why, and offers no copy button; a real id has one', async () => {
    const { page, client } = env;
    await page.goto('/jobs/notauuid');
    await expect.poll(textOf(page.getByTestId('error')), POLL).toMatch(/^INVALID_ARGUMENT: /);
    expect(await page.getByTestId('job-page-id').textContent()).toBe('notauuid');
    expect(await page.getByTestId('copy-id').count()).toBe(0);
    const { job } = await client.submit({ queue: queueName('copy'), type: 'later' });
    await page.goto(`/jobs/${job.id}`);
    await expect.poll(textOf(page.getByTestId('job-state')), POLL).toBe('pending');
    expect(await page.locator('h1').getByTestId('copy-id').count()).toBe(1);
  });

  it('schedules: each row\'s buttons say which schedule they act on; pause and run now act on it', async () => {
    const { page, client } = env;
    const queue = queueName('sched');
    const name = `nightly-${queue}`;
    await client.upsertSchedule({ name, cron: '0 3 * * *', queue, type: 'report' });
    await client.upsertSchedule({ name: `${name}-other`, cron: '0 4 * * *', queue, type: 'report' });
    await page.goto('/schedules');
    const row = page.getByTestId(`schedule-row-${name}`);
    await visible(row);
    expect(await attrOf(row.getByTestId('schedule-pause'), 'aria-label')()).toBe(`Pause ${name}`);
    expect(await attrOf(row.getByTestId('schedule-trigger'), 'aria-label')()).toBe(`Run ${name} now`);
    await page.getByRole('button', { name: `Pause ${name}`, exact: true }).click();
    await expect.poll(textOf(row.getByTestId('schedule-state')), POLL).toBe('paused');
    expect(await attrOf(row.getByTestId('schedule-resume'), 'aria-label')()).toBe(`Resume ${name}`);
    expect(await textOf(page.getByTestId(`schedule-row-${name}-other`).getByTestId('schedule-state'))()).toBe('active');
    await page.getByRole('button', { name: `Run ${name} now`, exact: true }).click();
    await expect.poll(textOf(page.getByTestId('schedule-action-status')), POLL).toMatch(new RegExp(`^${name}: ran now, job [0-9a-f-]{36}`));
  });

  it('with auth off the header says so', async () => {
    const { page } = env;
    await page.goto('/workers');
    await expect.poll(textOf(page.getByTestId('caller-role')), POLL).toBe('auth off');
  });

  it('keyboard: Tab from the page start reaches a nav link with a visible focus ring, Enter follows it', async () => {
    const { page } = env;
    await page.goto('/');
    await expect.poll(attrOf(page.getByTestId('nav-overview'), 'aria-current'), POLL).toBe('page');
    const target = page.getByTestId('nav-queues');
    for (let i = 0; i < 20; i++) {
      await page.keyboard.press('Tab');
      if (await target.evaluate((el) => el.matches(':focus'))) break;
    }
    expect(await target.evaluate((el) => el.matches(':focus'))).toBe(true);
    const outline = await target.evaluate((el) => {
      const s = el.ownerDocument.defaultView!.getComputedStyle(el);
      return { style: s.outlineStyle, width: s.outlineWidth };
    });
    expect(outline.style).not.toBe('none');
    expect(outline.width).not.toBe('0px');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.url(), POLL).toMatch(/\/queues$/);
    await expect.poll(attrOf(target, 'aria-current'), POLL).toBe('page');
  });
});

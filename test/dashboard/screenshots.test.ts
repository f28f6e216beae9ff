import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NonRetryableError } from '../../src/sdk/index.js';
import { httpCall } from '../http/http-setup.js';
import { waitFor } from '../helpers/wait.js';
import { POLL, dashboardSetup, textOf, visible, SKIP_BROWSER } from './helpers.js';

/**
 * Screenshots of every page with real data in it (queues with completed, failed, waiting and
 * dead-lettered jobs, a live worker, schedules, a job with attempts and dependents), 1280x800,
 * light and (overview) dark. They go to a temporary folder and are checked to be PNGs; with
 * EVORA_SCREENSHOTS=1 they replace docs/screenshots/*.png (how the docs' images are made:
 * `EVORA_SCREENSHOTS=1 npx vitest run test/dashboard/screenshots.test.ts`).
 */

const DOCS = fileURLToPath(new URL('../../docs/screenshots/', import.meta.url));
const toDocs = process.env.EVORA_SCREENSHOTS === '1';
const outDir = toDocs ? DOCS : mkdtempSync(join(tmpdir(), 'evora-shots-'));
afterAll(() => {
  if (!toDocs) rmSync(outDir, { recursive: true, force: true });
});

let env: Awaited<ReturnType<typeof dashboardSetup>>;
let flakyId = '';
beforeAll(async () => {
  if (SKIP_BROWSER) return;
  mkdirSync(outDir, { recursive: true });
  env = await dashboardSetup();
  await env.page.setViewportSize({ width: 1280, height: 800 });
  const { client } = env;
  await client.upsertQueue('emails', { maxAttempts: 2, backoff: { kind: 'fixed', baseSeconds: 0, capSeconds: 0 } });
  await client.upsertQueue('reports', { maxAttempts: 3, backoff: { kind: 'fixed', baseSeconds: 0, capSeconds: 0 }, maxConcurrency: 4, rateLimit: { perSecond: 20, burst: 40 } });
  await client.upsertQueue('billing', { maxAttempts: 1 });
  await client.submitMany(Array.from({ length: 40 }, (_, i) => ({ queue: 'emails', type: 'welcome-email', payload: { user: `user-${i}@example.com` } })));
  await client.submitMany(Array.from({ length: 6 }, (_, i) => ({ queue: 'emails', type: 'bounce-check', payload: { n: i } })));
  await client.submitMany(Array.from({ length: 12 }, (_, i) => ({ queue: 'reports', type: 'monthly-report', payload: { month: i + 1 }, runAt: new Date(Date.now() + 3_600_000) })));
  await client.submitMany(Array.from({ length: 5 }, (_, i) => ({ queue: 'billing', type: 'charge-card', payload: { invoice: `INV-${1000 + i}` } })));
  await client.submitMany(Array.from({ length: 3 }, (_, i) => ({ queue: 'billing', type: 'send-receipt', payload: { invoice: `INV-${2000 + i}` } })));
  const [parent] = await client.submitMany([
    { queue: 'reports', type: 'export-csv', payload: { report: 'q3' }, ref: 'export' },
    { queue: 'reports', type: 'email-report', payload: { report: 'q3' }, dependsOnRefs: ['export'] },
  ]);
  flakyId = parent!.job.id;
  await client.upsertSchedule({ name: 'nightly-report', cron: '0 3 * * *', queue: 'reports', type: 'monthly-report' });
  await client.upsertSchedule({ name: 'hourly-digest', cron: '0 * * * *', queue: 'emails', type: 'digest' });
  await client.pauseSchedule('hourly-digest');

  const tried = new Set<string>();
  const w = env.worker(['emails', 'billing', 'reports'], 'worker-1.example.internal');
  w.handle('welcome-email', async () => ({ sent: true }));
  w.handle('bounce-check', async (job) => {
    if (!tried.has(job.id)) {
      tried.add(job.id);
      throw new Error('SMTP 451: try again later');
    }
    return { ok: true };
  });
  w.handle('charge-card', async () => {
    throw new NonRetryableError('card_declined: insufficient funds');
  });
  w.handle('send-receipt', async () => {
    throw new NonRetryableError('template "receipt" not found');
  });
  w.handle('export-csv', async (job) => {
    if (!tried.has(job.id)) {
      tried.add(job.id);
      throw new Error('storage timeout after 30s');
    }
    return { rows: 1234, url: 's3://exports/q3.csv' };
  });
  w.handle('email-report', async () => ({ sent: true }));
  await w.start();
  await waitFor(async () => (await client.get(flakyId)).state === 'COMPLETED', { what: 'the export job to complete', timeoutMs: 20_000 });
  await waitFor(async () => (await client.list({ queue: 'billing', states: 'DLQ' })).jobs.length === 8, { what: 'the billing DLQ', timeoutMs: 20_000 });
});

/** Opens `path`, waits for every test id of `ready` and writes `<name>.png`. */
async function shot(name: string, path: string, ready: string | string[]): Promise<void> {
  const { page } = env;
  await page.goto(path);
  for (const id of [ready].flat()) await visible(page.getByTestId(id));
  await page.screenshot({ path: join(outDir, `${name}.png`) });
  expect(readFileSync(join(outDir, `${name}.png`)).subarray(1, 4).toString()).toBe('PNG');
}

describe.skipIf(SKIP_BROWSER)('screenshots of every page', () => {
  it('overview (light and dark), queues, a queue, jobs, a job, dead letters, workers, schedules', async () => {
    const { page, browser, httpUrl } = env;
    // The charts draw what the telemetry projection has counted: wait until it has the completions.
    await waitFor(
      async () => {
        const res = await httpCall(httpUrl, 'GET', '/v1/queue-series', { query: { minutes: '60' } });
        return (res.body?.points ?? []).some((p: { completed?: string }) => Number(p.completed ?? 0) > 0);
      },
      { what: 'the per-minute series to show completions' },
    );
    await page.goto('/');
    await expect.poll(textOf(page.getByTestId('queue-row-emails').getByTestId('count-completed')), POLL).toBe('46');
    await visible(page.getByTestId('chart-throughput').locator('canvas'));
    // The table too, not only the charts: the page is opened again, and its reads are separate.
    await shot('overview', '/', ['chart-throughput', 'queue-row-emails']);

    const dark = await browser.newContext({ colorScheme: 'dark', baseURL: httpUrl, viewport: { width: 1280, height: 800 } });
    const darkPage = await dark.newPage();
    await darkPage.goto('/');
    await expect.poll(textOf(darkPage.getByTestId('queue-row-emails').getByTestId('count-completed')), POLL).toBe('46');
    await visible(darkPage.getByTestId('chart-throughput').locator('canvas'));
    await darkPage.screenshot({ path: join(outDir, 'overview-dark.png') });
    await dark.close();

    await shot('queues', '/queues', 'queues-row-emails');
    await shot('queue', '/queues/reports', 'queue-settings');
    await shot('jobs', '/jobs', 'jobs-next');
    await shot('job', `/jobs/${flakyId}`, 'attempt-row-2');
    await shot('dead-letters', '/dead-letters?queue=billing', 'dlq-group');
    await shot('workers', '/workers', 'worker-row-worker-1.example.internal');
    await shot('schedules', '/schedules', 'schedule-row-nightly-report');
  });
});

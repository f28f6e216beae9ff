import { beforeAll, describe, expect, it } from 'vitest';
import { tokenSecretGenerate } from '../../src/domain/auth.js';
import { NonRetryableError } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';
import { tokenInsert, type TestToken } from '../helpers/tokens.js';
import { POLL, countOf, dashboardSetup, textOf, visible, SKIP_BROWSER } from './helpers.js';

/**
 * With auth on (a bootstrap admin token), the dashboard asks for a token: a wrong one is
 * refused on the form; a viewer signs in and sees every page without a single action
 * button (`[data-action]`), while the admin sees them on the pages that act (a queue, a
 * job, the dead letters, the schedules). A token limited to a queue opens the jobs and
 * dead letters of its queue (those lists must name one), not the server's refusal, whether
 * or not its role may list the queues (a viewer may, a producer may not).
 */

const ADMIN = tokenSecretGenerate();
let env: Awaited<ReturnType<typeof dashboardSetup>>;
let viewer: TestToken;
const queue = queueName('auth');
const schedule = `sched-${queue}`;
let jobId = '';
let deadId = '';

beforeAll(async () => {
  if (SKIP_BROWSER) return;
  env = await dashboardSetup({ bootstrapAdminToken: ADMIN });
  viewer = await tokenInsert(env.databaseUrl, { role: 'viewer', name: 'dash-viewer' });
  const { client } = env;
  await client.upsertQueue(queue, { maxAttempts: 1 });
  jobId = (await client.submit({ queue, type: 'wait', runAt: new Date(Date.now() + 3_600_000) })).job.id;
  deadId = (await client.submit({ queue, type: 'broken' })).job.id;
  await client.upsertSchedule({ name: schedule, cron: '0 3 * * *', queue, type: 'nightly' });
  const w = env.worker([queue]);
  w.handle('broken', async () => {
    throw new NonRetryableError('always broken');
  });
  await w.start();
  await waitFor(async () => (await client.get(deadId)).state === 'DLQ', { what: 'the broken job in the DLQ' });
});

/** Each page and an element that shows its data has loaded (so a count of 0 means something). */
const pages = () => [
  { path: '/', ready: `queue-row-${queue}` },
  { path: '/queues', ready: `queues-row-${queue}` },
  { path: `/queues/${queue}`, ready: 'queue-state' },
  { path: `/jobs?queue=${queue}`, ready: `job-row-${jobId}` },
  { path: `/jobs/${deadId}`, ready: 'attempts-table' },
  { path: `/dead-letters?queue=${queue}`, ready: 'dlq-group' },
  { path: '/workers', ready: `worker-row-w-${queue}` },
  { path: '/schedules', ready: `schedule-row-${schedule}` },
];

async function signIn(secret: string): Promise<void> {
  const { page } = env;
  await page.goto('/');
  await visible(page.getByTestId('token-form'));
  await page.getByTestId('token-input').fill(secret);
  await page.getByTestId('token-submit').click();
}

describe.skipIf(SKIP_BROWSER)('the dashboard with auth on', () => {
  it('asks for a token and refuses a wrong one', async () => {
    await signIn(tokenSecretGenerate());
    await visible(env.page.getByTestId('token-refused'));
    // A character a browser cannot send in a header (a typographic quote pasted with it):
    // said on the form, rather than every page saying the server cannot be reached.
    await env.page.getByTestId('token-input').fill(`${tokenSecretGenerate()}\u2019`);
    await env.page.getByTestId('token-submit').click();
    await visible(env.page.getByTestId('token-invalid'));
    expect(await env.page.getByTestId('token-form').count()).toBe(1);
  });

  it('a viewer signs in and sees no action buttons on any page', async () => {
    const { page } = env;
    await signIn(viewer.secret);
    await expect.poll(textOf(page.getByTestId('caller-role')), POLL).toMatch(/viewer/i);
    for (const { path, ready } of pages()) {
      await page.goto(path);
      await visible(page.getByTestId(ready));
      expect(await page.locator('[data-action]').count(), path).toBe(0);
    }
    await page.getByTestId('sign-out').click();
    await visible(page.getByTestId('token-form'));
  });

  it('a token revoked while its page is open brings back the form, and the header no longer names it', async () => {
    const { page, client } = env;
    const doomed = await tokenInsert(env.databaseUrl, { role: 'viewer', name: 'dash-doomed' });
    await signIn(doomed.secret);
    await expect.poll(textOf(page.getByTestId('caller-role')), POLL).toMatch(/dash-doomed/);
    await page.goto('/workers');
    await visible(page.getByTestId(`worker-row-w-${queue}`));
    await client.revokeToken(doomed.id);
    await visible(page.getByTestId('token-refused'));
    expect(await page.getByTestId('caller-role').count()).toBe(0);
    expect(await page.getByTestId('sign-out').count()).toBe(0);
  });

  // A producer may list its queues' jobs and dead letters but not the queues themselves
  // (ListQueues): its picker offers the queue its limits name.
  it.each(['viewer', 'producer'] as const)('a %s limited to one queue opens the jobs and the dead letters of that queue, not a refusal', async (role) => {
    const { page } = env;
    const limited = await tokenInsert(env.databaseUrl, { role, name: `dash-limited-${role}`, queues: [queue] });
    await signIn(limited.secret);
    await expect.poll(textOf(page.getByTestId('caller-role')), POLL).toMatch(new RegExp(`dash-limited-${role}`));
    // Its lists must name one of its queues: "any" is its own queue, and no page offers "any".
    await page.getByTestId('nav-jobs').click();
    await visible(page.getByTestId(`job-row-${jobId}`));
    expect(await page.getByTestId('error').count()).toBe(0);
    expect(await page.getByTestId('filter-queue').inputValue()).toBe(queue);
    expect(await page.getByTestId('filter-queue').locator('option[value=""]').count()).toBe(0);
    await page.getByTestId('nav-dead-letters').click();
    await visible(page.getByTestId(`dlq-job-row-${deadId}`));
    await visible(page.getByTestId('dlq-group'));
    expect(await page.getByTestId('error').count()).toBe(0);
    expect(await page.getByTestId('jobs-error').count()).toBe(0);
    expect(await page.getByTestId('dlq-queue').inputValue()).toBe(queue);
    // A reload (the caller and the queues asked afresh) lands on the same lists.
    await page.reload();
    await visible(page.getByTestId(`dlq-job-row-${deadId}`));
    expect(await page.getByTestId('error').count()).toBe(0);
    await page.getByTestId('sign-out').click();
    await visible(page.getByTestId('token-form'));
  });

  it('the admin sees the action buttons on the pages that have them', async () => {
    const { page } = env;
    await signIn(ADMIN);
    await expect.poll(textOf(page.getByTestId('caller-role')), POLL).toMatch(/admin/i);
    for (const { path, ready } of pages().filter((p) => /^\/(queues\/|jobs\/|dead-letters|schedules)/.test(p.path))) {
      await page.goto(path);
      await visible(page.getByTestId(ready));
      await expect.poll(countOf(page.locator('[data-action]')), { ...POLL, message: path }).toBeGreaterThan(0);
    }
  });
});

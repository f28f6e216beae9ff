import { beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { Request } from 'playwright-core';
import { NonRetryableError } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { POLL, countOf, dashboardSetup, textOf, visible, SKIP_BROWSER } from './helpers.js';

/**
 * The dead letters page in Chromium against a real server: a group whose error has
 * characters outside the BMP (emoji) lists its jobs, so do a group whose jobs are past the
 * DLQ's first page and the group of jobs without an error, a group's job list with all queues
 * shows only that group's queue (each group's buttons name their group: aria-label), a chosen
 * group starts with no row checked, the bulk retries ask first (dry-run count, focus on
 * "Keep them", Escape retries nothing, the confirm bounded to the jobs counted and saying
 * when it did fewer), and a truncated
 * grouping (real: 10,001 dead letters) says its counts are lower bounds and a list cut at the
 * group limit says so. Every wait is on a condition, never a sleep.
 */

let env: Awaited<ReturnType<typeof dashboardSetup>>;
beforeAll(async () => {
  if (SKIP_BROWSER) return;
  env = await dashboardSetup();
});

/**
 * Dead-letters one job per entry of `jobs` in `queue` (max attempts 1, a worker that fails
 * each with its `error`, non-retryable), waits until all are in the DLQ and stops the worker
 * (so a job retried later stays PENDING); their ids.
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
  await expect.poll(async () => (await statesOf(ids)).every((state) => state === 'DLQ'), POLL).toBe(true);
  await w.stop();
  return ids;
}

/**
 * Submits `count` jobs of type `bulk` to `queue` and dead-letters them all in two statements
 * (a worker failing each would take minutes for many), each with the last error `errorSql`
 * makes of its position `r.n` (1 = the oldest); their ids, oldest first.
 */
async function deadLetterInSql(queue: string, count: number, errorSql: string): Promise<string[]> {
  const { client, databaseUrl } = env;
  await client.upsertQueue(queue, { maxAttempts: 1 });
  for (let left = count; left > 0; left -= 10_000) {
    await client.submitMany(Array.from({ length: Math.min(left, 10_000) }, () => ({ queue, type: 'bulk' })));
  }
  const sql = new pg.Client({ connectionString: databaseUrl });
  await sql.connect();
  try {
    // Through RUNNING (with a lease), as a claim then a failure would: the table allows only
    // the transitions the server makes.
    await sql.query(
      `UPDATE evora.jobs SET state = 'RUNNING', attempt = 1, lease_token = gen_random_uuid(), locked_until = now() + interval '1 hour'
       WHERE queue = $1`,
      [queue],
    );
    await sql.query(
      `UPDATE evora.jobs j SET state = 'DLQ', finished_at = now(), locked_until = NULL, last_error = ${errorSql}
       FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM evora.jobs WHERE queue = $1) r WHERE j.id = r.id`,
      [queue],
    );
    return (await sql.query<{ id: string }>('SELECT id FROM evora.jobs WHERE queue = $1 ORDER BY id', [queue])).rows.map((r) => r.id);
  } finally {
    await sql.end();
  }
}

/** The jobs' states, in the order of `ids`. */
async function statesOf(ids: string[]): Promise<string[]> {
  return (await Promise.all(ids.map((id) => env.client.get(id)))).map((job) => job.state);
}

describe.skipIf(SKIP_BROWSER)('the dead letters page in Chromium', () => {
  it('a queue of the URL that the queue list does not hold is the one the picker shows, not "all queues"', async () => {
    const { page } = env;
    const queue = queueName('unlisted');
    await page.goto(`/dead-letters?queue=${queue}`);
    await expect.poll(() => page.getByTestId('dlq-queue').inputValue(), POLL).toBe(queue);
    await visible(page.getByTestId('dlq-purge-all'));
  });

  it('"Show jobs" lists the jobs of a group whose error has emoji (cut to 200 code points, as the server cuts)', async () => {
    const { page } = env;
    const queue = queueName('dlqemoji');
    // 252 code points but 253 UTF-16 units on the first line: a key cut by UTF-16 units
    // would keep one character fewer than the server's, and match no job.
    const error = `💥 ${'a'.repeat(250)}\nat the second line`;
    const [id] = await deadLetter(queue, [{ type: 'boom', error }]);

    await page.goto(`/dead-letters?queue=${queue}`);
    const group = page.getByTestId('dlq-group');
    await expect.poll(textOf(group.getByTestId('dlq-group-count')), POLL).toBe('1');
    await group.first().getByTestId('dlq-group-show').click();
    await visible(page.getByTestId(`dlq-job-row-${id}`));
  });

  it('"Show jobs" lists a group whose jobs are past the first page of the DLQ, and the group of jobs without an error', async () => {
    const { page } = env;
    const queue = queueName('dlqpaged');
    // 60 dead letters, oldest first: two 'rare failure', one without an error, then 57
    // 'common failure' (more than the page's 50 newest, so the others are on a later page).
    const ids = await deadLetterInSql(queue, 60, `CASE WHEN r.n <= 2 THEN 'rare failure' WHEN r.n = 3 THEN NULL ELSE E'common failure\\nat line ' || r.n END`);
    const rows = page.locator('[data-testid^="dlq-job-row-"]');

    await page.goto(`/dead-letters?queue=${queue}`);
    await expect.poll(countOf(rows), POLL).toBe(50);
    expect(await countOf(page.getByTestId(`dlq-job-row-${ids[0]}`))()).toBe(0);

    const rare = page.getByTestId('dlq-group').filter({ hasText: 'rare failure' });
    await expect.poll(textOf(rare.getByTestId('dlq-group-count')), POLL).toBe('2');
    await rare.getByTestId('dlq-group-show').click();
    await visible(page.getByTestId(`dlq-job-row-${ids[0]}`));
    await visible(page.getByTestId(`dlq-job-row-${ids[1]}`));
    await expect.poll(countOf(rows), POLL).toBe(2);
    expect(await page.getByTestId('dlq-next').isDisabled()).toBe(true);

    const none = page.getByTestId('dlq-group').filter({ hasText: '(no error text)' });
    await none.getByTestId('dlq-group-show').click();
    await visible(page.getByTestId(`dlq-job-row-${ids[2]}`));
    await expect.poll(countOf(rows), POLL).toBe(1);
  });

  it('with all queues, a group\'s jobs are only its own queue\'s, its buttons name it, and choosing a group unchecks the rows checked before', async () => {
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
    // The two rows differ only by queue, and so do their buttons' names (aria-label): each
    // names its own group, found by name alone, once.
    for (const q of [a, b]) {
      const group = `the ${type} group "${error}" of ${q}`;
      for (const name of [`Show jobs of ${group}`, `Retry all 1 of ${group}`, `Purge ${group}`]) {
        expect(await countOf(page.getByRole('button', { name, exact: true }))(), name).toBe(1);
      }
    }
    await page.getByRole('button', { name: `Show jobs of the ${type} group "${error}" of ${a}`, exact: true }).click();
    await expect.poll(async () => [await countOf(rowA)(), await countOf(rowB)()], POLL).toEqual([1, 0]);
    await expect.poll(textOf(page.getByTestId('dlq-retry-selected')), POLL).toBe('Retry selected (0)');
    expect(await page.getByTestId('dlq-retry-selected').isDisabled()).toBe(true);
  });

  it('"Retry all matching" and "Retry all N" only open a dialog with the dry-run count, on "Keep them"; Escape retries nothing, confirm retries the counted jobs', async () => {
    const { page } = env;
    const queue = queueName('dlqretry');
    const charges = await deadLetter(queue, Array.from({ length: 3 }, () => ({ type: 'charge', error: 'card declined' })));
    const [mail] = await deadLetter(queue, [{ type: 'mail', error: 'smtp down' }]);
    const all = [...charges, mail!];
    // Every RetryJobs the page sends, dry runs included, in order.
    const retries: { dryRun?: boolean; filter?: { errorGroup?: string; finishedBefore?: string } }[] = [];
    const onRequest = (request: Request) => {
      if (request.method() === 'POST' && new URL(request.url()).pathname === '/v1/jobs/retry') retries.push(request.postDataJSON());
    };
    page.on('request', onRequest);
    try {
      await page.goto(`/dead-letters?queue=${queue}`);
      const group = page.getByTestId('dlq-group').filter({ hasText: 'card declined' });
      await expect.poll(textOf(group.getByTestId('dlq-group-count')), POLL).toBe('3');
      const dialog = page.getByTestId('retry-dialog');
      const cancelFocused = () => dialog.getByTestId('retry-cancel').evaluate((el) => el.matches(':focus'));

      // Everything matching: the first click only asks, with the server's count.
      await page.getByTestId('dlq-retry-all').click();
      await expect.poll(textOf(dialog.getByTestId('retry-count')), POLL).toMatch(/^This runs 4 jobs again/);
      expect(await cancelFocused()).toBe(true);
      expect(await statesOf(all)).toEqual(['DLQ', 'DLQ', 'DLQ', 'DLQ']);
      await page.keyboard.press('Escape');
      await expect.poll(countOf(page.locator('dialog[open]')), POLL).toBe(0);

      // A group: confirmed, it retries at most the jobs the dry run counted.
      await group.getByTestId('dlq-group-retry').click();
      await expect.poll(textOf(dialog.getByTestId('retry-count')), POLL).toMatch(/^This runs 3 jobs again/);
      expect(await cancelFocused()).toBe(true);
      expect(await textOf(dialog.getByTestId('retry-confirm'))()).toBe('Retry 3');
      // The newest finishedAt of the three counted (to the millisecond, as the API gives it).
      const countedBy = Math.max(...(await Promise.all(charges.map(async (id) => (await env.client.get(id)).finishedAt!.getTime()))));
      // While the dialog is open the group fills up (a new dead letter) and someone retries one of the three.
      const [late] = await deadLetter(queue, [{ type: 'charge', error: 'card declined' }]);
      await env.client.retry(charges[0]!);
      await dialog.getByTestId('retry-confirm').click();
      await expect.poll(textOf(page.getByTestId('dlq-action-status')), POLL).toBe(
        'Retried 2 of the 3 jobs counted: the other 1 changed meanwhile or was busy; count again to see what is left',
      );
      expect(await statesOf([...all, late!])).toEqual(['PENDING', 'PENDING', 'PENDING', 'DLQ', 'DLQ']);
      // Escape sent no retry: the only one that was not a dry run is the confirmed group's,
      // bounded by its dry run's finishedBefore, which the later dead letter is not before.
      const confirmed = retries.filter((r) => r.dryRun !== true);
      expect(confirmed.map((r) => r.filter?.errorGroup)).toEqual(['card declined']);
      const bound = Date.parse(confirmed[0]!.filter?.finishedBefore ?? '');
      expect(bound).toBeGreaterThan(countedBy);
      expect((await env.client.get(late!)).finishedAt!.getTime()).toBeGreaterThanOrEqual(bound);

      // A group of one reads in the singular.
      const single = page.getByTestId('dlq-group').filter({ hasText: 'smtp down' });
      await single.getByTestId('dlq-group-retry').click();
      await expect.poll(textOf(dialog.getByTestId('retry-count')), POLL).toMatch(/^This runs 1 job again/);
      await dialog.getByTestId('retry-confirm').click();
      await expect.poll(textOf(page.getByTestId('dlq-action-status')), POLL).toBe('Retried 1 job');
      expect(await statesOf(all)).toEqual(['PENDING', 'PENDING', 'PENDING', 'PENDING']);
    } finally {
      page.off('request', onRequest);
    }
  });

  it('past the newest 10,000 dead letters the counts read "at least N" with a note and stay out of the retry label; a list cut at 50 groups says so', async () => {
    const { page, databaseUrl } = env;
    const small = queueName('dlqexact');
    await deadLetter(small, [
      { type: 'boom', error: 'grouped twice' },
      { type: 'boom', error: 'grouped twice' },
    ]);
    // Not truncated: exact counts, in the label too, and no note.
    await page.goto(`/dead-letters?queue=${small}`);
    const exact = page.getByTestId('dlq-group').filter({ hasText: 'grouped twice' });
    await expect.poll(textOf(exact.getByTestId('dlq-group-count')), POLL).toBe('2');
    await expect.poll(textOf(exact.getByTestId('dlq-group-retry')), POLL).toBe('Retry all 2');
    expect(await page.getByTestId('dlq-truncated').count()).toBe(0);
    expect(await page.getByTestId('dlq-limited').count()).toBe(0);

    // 10,001 real jobs with 51 different errors: more than the server groups, and more
    // groups than listed.
    const big = queueName('dlqbig');
    await deadLetterInSql(big, 10_001, `'failure ' || (r.n % 51)`);
    const sql = new pg.Client({ connectionString: databaseUrl });
    await sql.connect();
    try {
      await page.goto(`/dead-letters?queue=${big}`);
      await expect.poll(textOf(page.getByTestId('dlq-truncated')), POLL).toMatch(/only the newest 10,000/);
      await expect.poll(textOf(page.getByTestId('dlq-limited')), POLL).toMatch(/Only the 50 largest of 51 groups/);
      const first = page.getByTestId('dlq-group').first();
      await expect.poll(textOf(first.getByTestId('dlq-group-count')), POLL).toMatch(/^at least \d+$/);
      expect(await textOf(first.getByTestId('dlq-group-retry'))()).toBe('Retry all');
      await page.goto('/dead-letters');
      await expect.poll(textOf(page.getByTestId('dlq-limited')), POLL).toMatch(/Pick a queue/);
    } finally {
      await sql.query('DELETE FROM evora.jobs WHERE queue = $1', [big]);
      await sql.end();
    }
  });
});

import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { fileURLToPath } from 'node:url';
import { teardownAdd } from '../helpers/teardown.js';
import { skipUnless, type Tool } from '../interop/toolchain.js';
import { EvoraClient, EvoraWorker } from '../../src/sdk/index.js';
import { serverSetup } from '../helpers/server-setup.js';

/**
 * Where the browser tests find Chromium: EVORA_CHROMIUM, else Debian's package
 * (/usr/bin/chromium). playwright-core never downloads a browser, so one must be installed.
 */
export function chromiumPath(): string | null {
  const path = process.env.EVORA_CHROMIUM ?? '/usr/bin/chromium';
  return existsSync(path) ? path : null;
}

/** Chromium as a toolchain (test/interop/toolchain.ts): the browser tests skip without it, unless required. */
export function findChromium(): Tool {
  const path = chromiumPath();
  return path ? { ok: true, path } : { ok: false, reason: 'no Chromium at /usr/bin/chromium or EVORA_CHROMIUM (apt-get install chromium)' };
}

/**
 * Whether a browser test file skips: only without Chromium, and never under
 * EVORA_INTEROP_REQUIRED=1 (`npm run test:all`, which installs it first), where it fails.
 */
export const SKIP_BROWSER = skipUnless('the dashboard browser tests', findChromium());

/**
 * One test file's browser: a headless Chromium (playwright-core) with one context and page,
 * closed after the file's tests (teardownAdd), or earlier by `close()` (safe to call twice),
 * so a file leaves no browser process behind. `colorScheme` sets prefers-color-scheme for
 * the light/dark checks; the clipboard is granted so the copy buttons can be checked.
 */
export async function browserSetup(opts: { colorScheme?: 'light' | 'dark'; baseURL?: string } = {}): Promise<{
  browser: Browser;
  context: BrowserContext;
  page: Page;
  close: () => Promise<void>;
}> {
  const executablePath = chromiumPath();
  if (!executablePath) throw new Error('no Chromium: install Debian\'s chromium package or set EVORA_CHROMIUM');
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    // Chromium refuses its sandbox as root (containers, CI).
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
  });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await browser.close();
  };
  teardownAdd(close);
  const context = await browser.newContext({
    colorScheme: opts.colorScheme ?? 'light',
    baseURL: opts.baseURL,
    viewport: { width: 1280, height: 900 },
    permissions: ['clipboard-read', 'clipboard-write'],
  });
  const page = await context.newPage();
  return { browser, context, page, close };
}

/** The built dashboard the server serves (`npm run build:dashboard` writes it). */
export const DASHBOARD_DIST = fileURLToPath(new URL('../../dist/dashboard/assets/', import.meta.url));

/**
 * Fails with how to build it when dist/dashboard is missing: the server would fall back to
 * the sources in dashboard/, which a browser cannot run.
 */
export function dashboardBuiltCheck(): void {
  if (!existsSync(DASHBOARD_DIST)) {
    throw new Error('dist/dashboard is not built: run `npm run build:dashboard` (or `npm run build`) first');
  }
}

/**
 * One browser test file's world: the built dashboard checked, a real server with its HTTP
 * port on (serverSetup; `overrides` as there), an SDK client on its gRPC port, and a
 * Chromium page whose baseURL is the server's HTTP origin. Everything is closed after the
 * file's tests (teardownAdd), workers started through `worker()` included.
 */
export async function dashboardSetup(overrides: Parameters<typeof serverSetup>[0] = {}, browserOpts: { colorScheme?: 'light' | 'dark' } = {}) {
  dashboardBuiltCheck();
  const setup = await serverSetup({ ...overrides, http: true });
  const token = overrides.bootstrapAdminToken;
  const client = new EvoraClient({ address: setup.address, token });
  const workers: EvoraWorker[] = [];
  teardownAdd(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    client.close();
  });
  /** An SDK worker on `queues`, stopped after the file. */
  const worker = (queues: string[], workerId = `w-${queues[0]}`) => {
    const w = new EvoraWorker({ address: setup.address, token, workerId, queues, slots: 10 });
    workers.push(w);
    return w;
  };
  const browser = await browserSetup({ ...browserOpts, baseURL: setup.httpUrl });
  return { ...setup, ...browser, client, worker };
}

/** How long a page expectation waits for its condition. */
export const POLL = { timeout: 15_000 };

/**
 * Readers for expect.poll (playwright-core has no expect of its own): each reads the
 * locator's first match now, null when there is none yet, so
 * `await expect.poll(textOf(loc), POLL).toBe('5')` waits for the condition.
 */
export function textOf(loc: Locator): () => Promise<string | null> {
  return () => loc.first().textContent({ timeout: 500 }).then((t) => t?.trim() ?? null, () => null);
}

/** An attribute of the locator's first match (see textOf). */
export function attrOf(loc: Locator, name: string): () => Promise<string | null> {
  return () => loc.first().getAttribute(name, { timeout: 500 }).catch(() => null);
}

/** How many elements match now. */
export function countOf(loc: Locator): () => Promise<number> {
  return () => loc.count();
}

/** Waits until the locator's first match is visible. */
export async function visible(loc: Locator): Promise<void> {
  await loc.first().waitFor({ state: 'visible', timeout: POLL.timeout });
}

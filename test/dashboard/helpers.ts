import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll } from 'vitest';

/**
 * Where the browser tests find Chromium: EVORA_CHROMIUM, else Debian's package
 * (/usr/bin/chromium). playwright-core never downloads a browser, so one must be installed.
 */
export function chromiumPath(): string | null {
  const path = process.env.EVORA_CHROMIUM ?? '/usr/bin/chromium';
  return existsSync(path) ? path : null;
}

/**
 * One test file's browser: a headless Chromium (playwright-core) with one context and page,
 * closed after the file's tests (afterAll), or earlier by `close()` (safe to call twice),
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
  afterAll(close);
  const context = await browser.newContext({
    colorScheme: opts.colorScheme ?? 'light',
    baseURL: opts.baseURL,
    viewport: { width: 1280, height: 900 },
    permissions: ['clipboard-read', 'clipboard-write'],
  });
  const page = await context.newPage();
  return { browser, context, page, close };
}

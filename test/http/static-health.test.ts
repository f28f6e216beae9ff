import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { httpSetup } from './http-setup.js';

/**
 * The HTTP port's other answers: the dashboard at / (its built files, and index.html for
 * any client route), /healthz, /readyz and /metrics; /v1 paths never fall back to the page.
 */

const ROOT = join(import.meta.dirname, '../..');
const DASHBOARD = join(ROOT, 'dist/dashboard');
let api: Awaited<ReturnType<typeof httpSetup>>['api'];
beforeAll(async () => {
  // The server serves the built dashboard (dist/dashboard); build it once if it is not there.
  if (!existsSync(join(DASHBOARD, 'index.html'))) execFileSync('npm', ['run', 'build:dashboard'], { cwd: ROOT, stdio: 'ignore' });
  ({ api } = await httpSetup());
}, 180_000);

describe('the dashboard', () => {
  it('/ and any client route answer index.html; a built asset and the icon are served; a missing file is 404', async () => {
    const root = await api('GET', '/');
    expect(root.status).toBe(200);
    expect(root.headers.get('content-type')).toMatch(/text\/html/);
    expect(root.text).toMatch(/<div id="root">/);
    const route = await api('GET', '/jobs/0b7e0c54-0000-4000-8000-000000000000');
    expect(route.status).toBe(200);
    expect(route.text).toBe(root.text);
    // A client route whose last segment has a dot (a queue named billing.invoices) is the
    // page too; only a top-level name with a dot or a path under /assets/ is a file.
    const dotted = await api('GET', '/queues/billing.invoices');
    expect(dotted.status).toBe(200);
    expect(dotted.text).toBe(root.text);
    expect((await api('GET', '/robots.txt')).status).toBe(404);
    // The icon the page links, and /favicon.ico (what a browser asks on any other page of the port) pointing at it.
    const icon = await api('GET', '/favicon.svg');
    expect(icon.status).toBe(200);
    expect(icon.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
    expect(root.text).toMatch(/<link rel="icon" href="\/favicon.svg"/);
    const ico = await api('GET', '/favicon.ico'); // fetch follows the redirect
    expect(ico.status).toBe(200);
    expect(ico.text).toBe(icon.text);
    const asset = readdirSync(join(DASHBOARD, 'assets')).find((f) => f.endsWith('.js'));
    const js = await api('GET', `/assets/${asset}`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toMatch(/javascript/);
    expect((await api('GET', '/assets/missing.js')).status).toBe(404);
    // A dotfile a deploy left in the folder (.env, .git/) is not served: a missing file (404),
    // or for a path under a dotted folder the page, never the file's content.
    const dot = join(DASHBOARD, `.evora-test-${process.pid}`);
    mkdirSync(dot);
    try {
      writeFileSync(join(dot, 'config.txt'), 'dotfile-content');
      writeFileSync(`${dot}.env`, 'dotfile-content');
      for (const path of [`/.evora-test-${process.pid}.env`, `/.evora-test-${process.pid}/config.txt`, `/assets/../.evora-test-${process.pid}.env`]) {
        const res = await api('GET', path);
        expect(res.text, path).not.toContain('dotfile-content');
        if (path.endsWith('.env')) expect(res.status, path).toBe(404);
      }
    } finally {
      rmSync(dot, { recursive: true, force: true });
      rmSync(`${dot}.env`, { force: true });
    }
    const v1 = await api('GET', '/v1/unknown');
    expect(v1.status).toBe(404);
    expect(v1.body).toMatchObject({ code: 'NOT_FOUND' });
    // A name past any escaped one is refused as without a dashboard (400), though the
    // dashboard's wildcard route takes the GET the router could not match.
    const tooLong = await api('GET', `/v1/queues/${'q'.repeat(500)}`);
    expect(tooLong.status, tooLong.text).toBe(400);
    expect(tooLong.body).toEqual({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^a path segment is over 384 characters/) });
  });
});

describe('health and metrics', () => {
  it('/healthz, /readyz, /metrics', async () => {
    expect((await api('GET', '/healthz')).status).toBe(200);
    const ready = await api('GET', '/readyz');
    expect(ready.status).toBe(200);
    const metrics = await api('GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.text).toMatch(/^# HELP evora_/m);
  });
});

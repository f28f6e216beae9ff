/**
 * Installs the bench's own dependencies (the peers: graphile-worker, pg-boss, BullMQ) from
 * bench/package-lock.json when bench/node_modules is missing or older than that lock, so
 * that `npm run bench` at the root works on a fresh clone while the root's `npm install`
 * never pulls the peers. Plain JavaScript: it runs before anything the bench imports.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('.', import.meta.url));
const lock = fileURLToPath(new URL('package-lock.json', import.meta.url));
// npm writes this copy of the lock on every install: its age is the install's.
const installed = fileURLToPath(new URL('node_modules/.package-lock.json', import.meta.url));

if (!existsSync(installed) || statSync(installed).mtimeMs < statSync(lock).mtimeMs) {
  process.stderr.write('[bench] installing the bench dependencies (npm ci in bench/)\n');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const r = spawnSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: dir, stdio: ['ignore', 2, 2], shell: process.platform === 'win32' });
  if (r.status !== 0) {
    process.stderr.write(`[bench] npm ci in bench/ failed (${r.error?.message ?? `exit ${r.status}`})\n`);
    process.exit(1);
  }
}

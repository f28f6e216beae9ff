/**
 * Loaded before every test file (vitest.config.ts `setupFiles`): registers, while the file is
 * collected, the one `afterAll` that runs the teardowns helpers registered with teardownAdd,
 * then fails the file if a database it made is still there (its server or pool was left
 * running too). Registered before the file's own hooks, it runs after them (vitest runs
 * `after*` hooks newest first), so a file's workers stop before the server they talk to.
 */
import { afterAll } from 'vitest';
import { testDatabasesUndropped } from './db.js';
import { teardownRun } from './teardown.js';

afterAll(async () => {
  await teardownRun();
  const left = testDatabasesUndropped();
  if (left.length > 0) throw new Error(`test database(s) left behind, not dropped by the file's teardown: ${left.join(', ')}`);
});

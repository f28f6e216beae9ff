import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    // Runs the teardowns setup helpers register (test/helpers/teardown.ts).
    setupFiles: ['test/helpers/teardown-hook.ts'],
    // The default output, then which toolchain groups were skipped and how to run them.
    reporters: ['default', './test/helpers/skip-summary.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each file gets its own database; files run in parallel processes, at least two at a
    // time (vitest's default on 2 cores is one): the suite mostly waits on servers, databases
    // and child processes. Each worker has a PostgreSQL cluster of its own
    // (test/helpers/global-setup.ts says why).
    pool: 'forks',
    maxWorkers: Math.max(2, availableParallelism() - 1),
  },
});

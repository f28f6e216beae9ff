/**
 * Teardowns that setup helpers register wherever they are called. Vitest runs an `afterAll`
 * only when it is registered while the file is collected: one registered from a `beforeAll`
 * or a test body is silently dropped. Helpers such as serverSetup are called from
 * `beforeAll` and from tests, so they register here instead, and the `afterAll` that
 * test/helpers/teardown-hook.ts registers for every file (vitest.config.ts `setupFiles`)
 * runs them after the file's own hooks.
 * Must stay true: each teardown runs once, newest first (a server stops before the database
 * it uses is dropped); one that throws does not stop the rest, and the file fails with it.
 */
const pending: Array<() => unknown> = [];

/** Registers `fn` to run after the current test file's tests. */
export function teardownAdd(fn: () => unknown): void {
  pending.push(fn);
}

/** Runs every registered teardown, newest first; throws what failed once all have run. */
export async function teardownRun(): Promise<void> {
  const failed: unknown[] = [];
  for (let fn = pending.pop(); fn; fn = pending.pop()) {
    try {
      await fn();
    } catch (err) {
      failed.push(err);
    }
  }
  if (failed.length === 1) throw failed[0];
  if (failed.length > 1) throw new AggregateError(failed, `${failed.length} teardowns failed`);
}

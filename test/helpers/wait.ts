/**
 * Waits until `check` returns a truthy value (or stops throwing), polling every few
 * milliseconds; fails after `timeoutMs` with the last error. Tests wait on conditions,
 * never on fixed sleeps.
 */
export async function waitFor<T>(check: () => T | Promise<T>, opts: { timeoutMs?: number; what?: string } = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${opts.what ?? 'condition'}`, { cause: lastError });
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

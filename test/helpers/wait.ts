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

/**
 * Waits until the job reads `state` through `client` (the SDK's EvoraClient, or anything
 * with its get), and returns it as read then.
 */
export async function jobInState<J extends { state: string }>(client: { get(id: string): Promise<J> }, id: string, state: string): Promise<J> {
  return waitFor<J | null>(
    async () => {
      const job = await client.get(id);
      return job.state === state ? job : null;
    },
    { what: `job ${id} to be ${state}` },
  ) as Promise<J>;
}

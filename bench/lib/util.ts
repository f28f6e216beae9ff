/**
 * Small helpers shared by the harness (bench/run.ts) and the worker processes
 * (bench/worker.ts).
 */

/**
 * Wall-clock milliseconds with sub-millisecond resolution, comparable across processes on
 * this machine: every process derives it from its own start time on the system clock plus
 * its monotonic clock. The harness stamps payloads with it; worker processes compare.
 */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Progress and diagnostics: stderr only (stdout carries nothing but the JSON result lines). */
export function log(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

/** Nearest-rank percentile of an ascending-sorted array. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function round(x: number, digits = 0): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Resolves when check() is true (polled every `everyMs`); rejects after `timeoutMs` with `what`. */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string, everyMs = 5): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Runs `total` calls of `fn(i)` with at most `concurrency` in flight. */
export async function pool(total: number, concurrency: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(concurrency, total) }, async () => {
    while (next < total) await fn(next++);
  });
  await Promise.all(lanes);
}

export function errorText(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(/\s*\n\s*/g, ' ');
}

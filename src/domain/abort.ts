/**
 * `work`, or a rejection with `reason()` as soon as `signal` aborts; `work` then settles
 * unobserved (its rejection is swallowed, so it is never an unhandled one). For awaits that
 * cannot take a signal themselves (a connection being made, a start step), so that shutdown
 * never waits on them. Without a signal, `work` itself.
 */
export function abortRace<T>(work: Promise<T>, signal: AbortSignal | undefined, reason: () => Error): Promise<T> {
  if (!signal) return work;
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.reject(reason());
  }
  return new Promise<T>((resolve, reject) => {
    const abort = () => {
      work.catch(() => undefined);
      reject(reason());
    };
    signal.addEventListener('abort', abort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', abort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', abort);
        reject(err as Error);
      },
    );
  });
}

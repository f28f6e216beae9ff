/**
 * A relative time ("2 min ago", "in 5 s") whose tooltip is the exact time in the browser's
 * zone, named like every absolute time of the dashboard (format.ts `time`), never the raw
 * UTC string an operator elsewhere could read as local.
 *
 * It counts from a clock that ticks every second (`useNow`), not from its last render: a
 * list polled every 2 s re-renders only when its answer changes, so a relative time drawn
 * once would say "5 s ago" for as long as the job stays as it is.
 */
import { useSyncExternalStore } from 'react';
import { ago, time } from '../format';

/** How often relative times are brought up to date (they show seconds). */
const TICK_MS = 1000;

let now = Date.now();
let timer: ReturnType<typeof setInterval> | undefined;
const listeners = new Set<() => void>();

/** Subscribes to the shared clock: it ticks only while something shows a relative time. */
function subscribeNow(listener: () => void): () => void {
  listeners.add(listener);
  if (timer === undefined) {
    now = Date.now();
    timer = setInterval(() => {
      now = Date.now();
      for (const l of listeners) l();
    }, TICK_MS);
  }
  return () => {
    listeners.delete(listener);
    if (listeners.size === 0 && timer !== undefined) {
      clearInterval(timer);
      timer = undefined;
    }
  };
}

/** The time now (ms), re-rendering the caller every TICK_MS: what relative times count from. */
export function useNow(): number {
  return useSyncExternalStore(subscribeNow, () => now);
}

export function Ago({ at }: { at: string | undefined }) {
  const current = useNow();
  if (!at) return <>{ago(at, current)}</>;
  return (
    <time dateTime={at} title={time(at)}>
      {ago(at, current)}
    </time>
  );
}

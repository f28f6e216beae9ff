/**
 * A relative time ("2 min ago", "in 5 s") whose tooltip is the exact time in the browser's
 * zone, named like every absolute time of the dashboard (format.ts `time`), never the raw
 * UTC string an operator elsewhere could read as local.
 */
import { ago, time } from '../format';

export function Ago({ at }: { at: string | undefined }) {
  if (!at) return <>{ago(at)}</>;
  return (
    <time dateTime={at} title={time(at)}>
      {ago(at)}
    </time>
  );
}

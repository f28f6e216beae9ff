/**
 * A job's event timeline, derived from the job and its attempts (no event log is read):
 * created, each attempt's start and end with its outcome, and the final state.
 */
import { enumLabel, stateLabel, time } from '../format';
import type { Job, JobAttempt } from '../types';

/** How many characters (code points) of an event's detail the timeline shows; the rest is in its title. */
const DETAIL_CHARS = 200;

/** A detail cut to DETAIL_CHARS code points (never inside a surrogate pair), with "…" when cut. */
function clipDetail(detail: string): string {
  const chars = Array.from(detail);
  return chars.length > DETAIL_CHARS ? `${chars.slice(0, DETAIL_CHARS).join('')}…` : detail;
}

interface Event {
  at: string;
  what: string;
  detail?: string;
  kind: 'created' | 'start' | 'end' | 'finished' | 'scheduled';
}

/** The events in time order (equal times keep their derivation order). */
export function jobEvents(job: Job, attempts: readonly JobAttempt[]): Event[] {
  const events: Event[] = [];
  if (job.createdAt) events.push({ at: job.createdAt, what: 'created', kind: 'created', detail: job.queue ? `in ${job.queue}` : undefined });
  for (const a of attempts) {
    if (a.startedAt) events.push({ at: a.startedAt, what: `attempt ${a.attempt ?? '?'} started`, kind: 'start', detail: a.workerId ? `on ${a.workerId}` : undefined });
    if (a.finishedAt)
      events.push({
        at: a.finishedAt,
        what: `attempt ${a.attempt ?? '?'} ${enumLabel(a.outcome, 'ATTEMPT_OUTCOME_')}`,
        kind: 'end',
        detail: a.error?.split('\n')[0],
      });
  }
  if (job.finishedAt) events.push({ at: job.finishedAt, what: `finished: ${stateLabel(job.state)}`, kind: 'finished' });
  else if (job.state === 'JOB_STATE_PENDING' && job.runAt) events.push({ at: job.runAt, what: 'runs at', kind: 'scheduled' });
  return events
    .map((event, index) => ({ event, index, t: new Date(event.at).getTime() }))
    .sort((a, b) => a.t - b.t || a.index - b.index)
    .map(({ event }) => event);
}

/** The job page's timeline: one list item per event, a long detail clipped with the full text in its title. */
export function Timeline({ job, attempts }: { job: Job; attempts: readonly JobAttempt[] }) {
  const events = jobEvents(job, attempts);
  return (
    <ol className="timeline" data-testid="job-timeline">
      {events.map((event, i) => (
        <li key={i} className={`event-${event.kind}`} data-testid="timeline-event">
          <time dateTime={event.at}>{time(event.at)}</time> <strong>{event.what}</strong>
          {event.detail && (
            <span className="muted" title={event.detail} data-testid="timeline-detail">
              {' '}
              — {clipDetail(event.detail)}
            </span>
          )}
        </li>
      ))}
    </ol>
  );
}

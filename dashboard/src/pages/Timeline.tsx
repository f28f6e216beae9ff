/**
 * A job's event timeline, derived from the job and its attempts (no event log is read):
 * created, each attempt's start and end with its outcome, and the final state.
 */
import { enumLabel, stateLabel, time } from '../format';
import type { Job, JobAttempt } from '../types';

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

export function Timeline({ job, attempts }: { job: Job; attempts: readonly JobAttempt[] }) {
  const events = jobEvents(job, attempts);
  return (
    <ol className="timeline" data-testid="job-timeline">
      {events.map((event, i) => (
        <li key={i} className={`event-${event.kind}`} data-testid="timeline-event">
          <time dateTime={event.at}>{time(event.at)}</time> <strong>{event.what}</strong>
          {event.detail && <span className="muted"> — {event.detail}</span>}
        </li>
      ))}
    </ol>
  );
}

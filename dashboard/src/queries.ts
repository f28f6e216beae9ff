/**
 * The read queries the pages share, with their keys (actions invalidate by these prefixes).
 * Live views poll every LIVE_MS; every list asks for at most 100 rows (no full scans).
 */
import { useQuery } from '@tanstack/react-query';
import { api, ApiError } from './api';
import { useCaller } from './auth';
import type { GetJobResponse, ListDeadLetterGroupsResponse, ListJobsResponse, Queue, QueueStats, Schedule, SeriesPoint, Worker } from './types';

/** How often live views refresh. */
export const LIVE_MS = 2000;

/**
 * The options of a live view's query: polled every LIVE_MS, and a failed read not retried in
 * place, since the next poll is the retry. Retried reads kept the last answer on the page with
 * no word for three of the server's timeouts (a database that hangs: 30 s each); the line
 * now shows with the first failure and goes with the next good answer.
 */
export const LIVE = { refetchInterval: LIVE_MS, retry: false } as const;
/** The largest page the dashboard asks for. */
export const MAX_PAGE = 100;

export const keys = {
  queues: ['queues'] as const,
  queue: (name: string) => ['queues', name] as const,
  stats: ['queue-stats'] as const,
  series: (queue: string) => ['queue-series', queue] as const,
  jobs: ['jobs'] as const,
  job: (id: string) => ['job', id] as const,
  deadLetters: ['dead-letters'] as const,
  workers: ['workers'] as const,
  schedules: ['schedules'] as const,
};

export function useQueues() {
  return useQuery({
    queryKey: keys.queues,
    queryFn: ({ signal }) => api<{ queues?: Queue[] }>('GET', '/queues', { signal }),
    ...LIVE,
  });
}

export function useQueue(name: string) {
  return useQuery({
    queryKey: keys.queue(name),
    queryFn: ({ signal }) => api<{ queue: Queue }>('GET', `/queues/${encodeURIComponent(name)}`, { signal }),
    ...LIVE,
  });
}

export function useQueueStats() {
  return useQuery({
    queryKey: keys.stats,
    queryFn: ({ signal }) => api<{ stats?: QueueStats[] }>('GET', '/queue-stats', { signal }),
    ...LIVE,
  });
}

/** The last hour per minute, of one queue or ('') all queues summed. */
export function useQueueSeries(queue: string) {
  return useQuery({
    queryKey: keys.series(queue),
    queryFn: ({ signal }) => api<{ points?: SeriesPoint[] }>('GET', '/queue-series', { query: { queue, minutes: 60 }, signal }),
    ...LIVE,
  });
}

/**
 * The queue a jobs or dead-letters list asks for, given the one chosen ('' = any), and the
 * queues its picker offers (`names`). A token limited to queues (GetCaller.queues) must name
 * one of its queues in those lists (the server answers PERMISSION_DENIED otherwise), so for
 * it "any" means the first of its queues, and `limited` tells the page to offer no "any"
 * choice. The queues are ListQueues' (which lists only a limited token's own); when the
 * token may not list queues (a producer), they are the queue names its limits spell out (a
 * prefix such as `billing.*` names none), since a producer may list those queues' jobs.
 * `queue` is null while that is not known yet (the caller, then its queues): ask for
 * nothing meanwhile. When the token has no queue to name (none exists yet, or its limits
 * are prefixes only and its role may not list queues), '' is asked for and the server's
 * line says why it is refused.
 */
export function useListQueue(chosen: string): { queue: string | null; limited: boolean; names: string[] } {
  const caller = useCaller();
  const queues = useQueues();
  const listed = queues.data ? (queues.data.queues ?? []).map((q) => q.name) : undefined;
  const spelled = queues.error && caller.data ? (caller.data.queues ?? []).filter((p) => !p.endsWith('*')) : undefined;
  const names = listed ?? spelled;
  const first = names?.[0];
  const scoped = (caller.data?.queues?.length ?? 0) > 0;
  const limited = scoped && first !== undefined;
  const out = (queue: string | null) => ({ queue, limited, names: names ?? [] });
  if (caller.isPending) return out(null);
  if (chosen || !scoped) return out(chosen);
  if (first !== undefined) return out(first);
  return out(names === undefined ? null : '');
}

/** One page of jobs; `params` are ListJobs' query parameters; nothing is asked while `enabled` is false. */
export function useJobs(
  params: { queue?: string; states?: readonly string[]; type?: string; idempotency_key?: string; error_group?: string; page_token?: string; page_size: number },
  enabled = true,
) {
  return useQuery({
    queryKey: [...keys.jobs, params],
    queryFn: ({ signal }) => api<ListJobsResponse>('GET', '/jobs', { query: { ...params, page_size: Math.min(params.page_size, MAX_PAGE) }, signal }),
    ...LIVE,
    placeholderData: (previous) => previous,
    enabled,
  });
}

/**
 * The answers after which a job's page stops polling: a malformed id, or a job that does not
 * exist (ids are made by the server and never reused, so a purged or unknown job does not
 * come back). Any other failure (UNAVAILABLE, a timeout) is polled again, as in every live view.
 */
const JOB_FINAL_CODES: ReadonlySet<string> = new Set(['NOT_FOUND', 'INVALID_ARGUMENT']);

/** One job, polled every LIVE_MS until it is known not to exist (JOB_FINAL_CODES). */
export function useJob(id: string) {
  return useQuery({
    queryKey: keys.job(id),
    queryFn: ({ signal }) => api<GetJobResponse>('GET', `/jobs/${encodeURIComponent(id)}`, { signal }),
    ...LIVE,
    refetchInterval: (query) => {
      const error = query.state.error;
      return error instanceof ApiError && JOB_FINAL_CODES.has(error.code) ? false : LIVE_MS;
    },
  });
}

/** How many error groups the dead letters page asks for (the server's default, said out loud). */
export const DEAD_LETTER_GROUPS = 50;

/**
 * The DLQ of one queue (or, with '', every queue) grouped by error, largest first, at most
 * DEAD_LETTER_GROUPS groups, with `truncated` when only the newest dead letters were grouped
 * (the counts are then lower bounds).
 */
export function useDeadLetters(queue: string, enabled = true) {
  return useQuery({
    queryKey: [...keys.deadLetters, queue],
    queryFn: ({ signal }) => api<ListDeadLetterGroupsResponse>('GET', '/dead-letters', { query: { queue, limit: DEAD_LETTER_GROUPS }, signal }),
    ...LIVE,
    enabled,
  });
}

export function useWorkers() {
  return useQuery({
    queryKey: keys.workers,
    queryFn: ({ signal }) => api<{ workers?: Worker[] }>('GET', '/workers', { signal }),
    ...LIVE,
  });
}

export function useSchedules() {
  return useQuery({
    queryKey: keys.schedules,
    queryFn: ({ signal }) => api<{ schedules?: Schedule[] }>('GET', '/schedules', { signal }),
    ...LIVE,
  });
}


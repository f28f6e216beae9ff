import type { AttemptOutcomeName, EvoraClient, Job, JobAttempt, Queue, QueueStats, WorkerInfo } from '../sdk/index.js';
import { duration, rateText, time } from './format.js';

/**
 * "Why is job X not running?": on-call's most common question, answered by `evora get` for a
 * PENDING or WAITING job. Nothing in a job's row says why it has not started; the reasons
 * live in its queue (paused, limits), its parents, and the workers connected across the
 * cluster. This module reads those (GetQueue, GetQueueStats, ListWorkers, GetJob of the
 * parents) and names each reason that applies, with the command that acts on it.
 *
 * Must stay true: it only reads; a read that fails (a token that may not call it, a server
 * too old) is named as a reason it could not check, never hides the job; each reason has a
 * stable `code` for scripts (`--json`), the text is for people. The stats it uses are
 * telemetry (a second or so behind), the clock the CLI's: limits are reported as "at or over",
 * never as a certainty about the next claim.
 */

/** Why a job does not start, as a code a script can act on. */
export type HoldCode =
  | 'RUN_AT_FUTURE'
  | 'QUEUE_PAUSED'
  | 'WAITING_ON_PARENTS'
  | 'QUEUE_CONCURRENCY_FULL'
  | 'KEY_CONCURRENCY_LIMIT'
  | 'RATE_LIMITED'
  | 'NO_WORKER_FOR_QUEUE'
  | 'NO_WORKER_FOR_TYPE'
  | 'WORKER_SLOTS_FULL'
  | 'BEHIND_OTHER_JOBS'
  | 'UNCHECKED';

/** One reason, with what the operator can do about it. */
export interface HoldReason {
  code: HoldCode;
  text: string;
}

/** What the explanation is computed from; `null` parts could not be read (`errors` says why). */
export interface HoldFacts {
  job: Job;
  queue: Queue | null;
  stats: QueueStats | null;
  workers: WorkerInfo[] | null;
  /** The job's parents that have not COMPLETED (at most PARENTS_READ of them read). */
  openParents: { id: string; state: string }[] | null;
  /**
   * How the job's latest attempt ended (its attempts as GetJob answers them; null: none ran):
   * a SNOOZED one gave its attempt back and set run_at itself, which no backoff did.
   */
  lastOutcome: AttemptOutcomeName | null;
  errors: string[];
  now: Date;
}

/** Parents read for a WAITING job: enough to name what it waits on, bounded for a wide fan-in. */
export const PARENTS_READ = 20;

/**
 * The reasons a PENDING or WAITING job is not running, most decisive first; empty for a job
 * in any other state. Pure: `jobHoldFacts` reads what it needs.
 */
export function jobHoldReasons(f: HoldFacts): HoldReason[] {
  const { job, queue, stats, workers } = f;
  if (job.state !== 'PENDING' && job.state !== 'WAITING') return [];
  const out: HoldReason[] = [];
  const q = job.queue;
  if (job.state === 'WAITING') {
    const open = f.openParents ?? [];
    const named = open.map((p) => `${p.id} (${p.state})`).join(', ');
    const more = job.dependsOn.length > PARENTS_READ ? ` (first ${PARENTS_READ} of ${job.dependsOn.length} parents read)` : '';
    out.push({
      code: 'WAITING_ON_PARENTS',
      text: `waits for its parents to complete: ${named || 'parents not yet seen COMPLETED'}${more}; \`evora get <parent>\` says why each has not`,
    });
  }
  if (job.runAt && job.runAt.getTime() > f.now.getTime()) {
    // A snooze gives the attempt back (the count may be 0 or that of an earlier failure): its
    // run_at is the handler's, not a backoff's nor the submitter's.
    const why =
      f.lastOutcome === 'SNOOZED'
        ? 'snoozed by its handler'
        : job.attempt > 0
          ? `retry after attempt ${job.attempt} of ${job.maxAttempts} failed (backoff)`
          : 'scheduled';
    out.push({
      code: 'RUN_AT_FUTURE',
      text: `${why}: not before ${time(job.runAt)} (in ${duration(Math.ceil((job.runAt.getTime() - f.now.getTime()) / 1000))})`,
    });
  }
  if (queue?.paused) out.push({ code: 'QUEUE_PAUSED', text: `queue ${q} is paused: \`evora queue resume ${q}\`` });
  const running = stats?.counts.RUNNING ?? null;
  if (queue && queue.maxConcurrency > 0 && running !== null && running >= queue.maxConcurrency) {
    out.push({
      code: 'QUEUE_CONCURRENCY_FULL',
      text: `queue ${q} runs at most ${queue.maxConcurrency} jobs at once and ${running} are RUNNING: \`evora list --queue ${q} --state running\``,
    });
  }
  if (queue && queue.maxConcurrencyPerKey > 0 && job.concurrencyKey !== null) {
    out.push({
      code: 'KEY_CONCURRENCY_LIMIT',
      text: `queue ${q} runs at most ${queue.maxConcurrencyPerKey} jobs per concurrency key at once (this job's key: ${job.concurrencyKey}); other jobs of that key may hold them`,
    });
  }
  if (queue?.rateLimit) {
    out.push({ code: 'RATE_LIMITED', text: `queue ${q} starts at most ${rateText(queue)}: a backlog waits its turn` });
  }
  if (workers) {
    const onQueue = workers.filter((w) => w.queues.includes(q));
    const forType = onQueue.filter((w) => w.jobTypes.length === 0 || w.jobTypes.includes(job.type));
    if (onQueue.length === 0) {
      out.push({ code: 'NO_WORKER_FOR_QUEUE', text: `no worker connected to any server takes queue ${q}: \`evora workers\`` });
    } else if (forType.length === 0) {
      const types = [...new Set(onQueue.flatMap((w) => w.jobTypes))].sort().join(', ');
      out.push({
        code: 'NO_WORKER_FOR_TYPE',
        text: `${onQueue.length} worker(s) take queue ${q}, none runs type ${job.type} (they run: ${types})`,
      });
    } else if (forType.every((w) => w.heldJobs >= w.slots)) {
      const slots = forType.reduce((n, w) => n + w.slots, 0);
      out.push({
        code: 'WORKER_SLOTS_FULL',
        text: `every worker that runs ${job.type} on queue ${q} is busy: ${slots} of ${slots} slots held (${forType.length} worker(s))`,
      });
    }
  }
  for (const e of f.errors) out.push({ code: 'UNCHECKED', text: e });
  if (out.length === 0 && job.state === 'PENDING') {
    const pending = stats?.counts.PENDING ?? null;
    out.push({
      code: 'BEHIND_OTHER_JOBS',
      text: `nothing holds it back: it is claimable now${pending !== null && pending > 1 ? `, one of ${pending} PENDING jobs of queue ${q} (claimed by priority, then age)` : ''}`,
    });
  }
  return out;
}

/**
 * Reads what jobHoldReasons needs about `job` (nothing for a job that is neither PENDING nor
 * WAITING); `attempts` are the job's as GetJob answered them, oldest first.
 */
export async function jobHoldFacts(client: EvoraClient, details: { job: Job; attempts: readonly JobAttempt[] }, now = new Date()): Promise<HoldFacts> {
  const { job } = details;
  const lastOutcome = details.attempts.at(-1)?.outcome ?? null;
  const facts: HoldFacts = { job, queue: null, stats: null, workers: null, openParents: null, lastOutcome, errors: [], now };
  if (job.state !== 'PENDING' && job.state !== 'WAITING') return facts;
  const unchecked = (what: string) => (err: unknown) => {
    facts.errors.push(`could not check ${what}: ${err instanceof Error ? err.message : String(err)}`);
    return null;
  };
  const parents = job.state === 'WAITING' ? job.dependsOn.slice(0, PARENTS_READ) : [];
  const [queue, stats, workers, parentJobs] = await Promise.all([
    client.getQueue(job.queue).catch(unchecked(`queue ${job.queue}`)),
    client.queueStats(job.queue).catch(unchecked(`the running jobs of queue ${job.queue}`)),
    client.listWorkers({ queue: job.queue }).catch(unchecked('the connected workers')),
    Promise.all(parents.map((id) => client.get(id).then((p): { id: string; state: string } => p, () => ({ id, state: 'not readable (deleted?)' })))),
  ]);
  facts.queue = queue;
  facts.stats = stats;
  facts.workers = workers;
  facts.openParents = parentJobs ? parentJobs.filter((p) => p.state !== 'COMPLETED').map((p) => ({ id: p.id, state: p.state })) : null;
  return facts;
}

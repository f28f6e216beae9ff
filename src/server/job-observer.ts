import type { DispatcherObserver, WorkerSession } from '../dispatcher/dispatcher.js';
import type { Job, JobWritten } from '../domain/job.js';
import type { Logger } from '../logger.js';
import type { ServerMetrics } from '../telemetry/metrics.js';

/** How a job's new state came about: a worker's write, or the sweeper (its lease expired, or its attempt timed out). */
export type JobWrite = 'complete' | 'fail' | 'snooze' | 'expire' | 'timeout';

/** The fields every job log line carries. */
function jobLogFields(job: JobWritten, workerId: string | null) {
  return { job_id: job.id, queue: job.queue, type: job.type, worker_id: workerId, attempt: job.attempt };
}

/**
 * What this server process tells about the jobs it moves: Prometheus counters and
 * histograms, and one log line per change of state (pushes and completions at debug,
 * retries at info, dead letters at warn, so a busy server logs per failure, not per job).
 * It is the dispatcher's observer and hears of the sweeper's expiries and timeouts too
 * (`written` with `expire` or `timeout`), so every state change this process makes is counted in one place.
 */
export class JobObserver implements DispatcherObserver {
  constructor(
    private readonly metrics: ServerMetrics,
    private readonly logger: Logger,
  ) {}

  claimed(queue: string, _asked: number, got: number, ms: number): void {
    if (got > 0) this.metrics.claimSeconds.observe({ queue }, ms / 1000);
  }

  pushed(session: WorkerSession, job: Job): void {
    this.metrics.pushSeconds.observe({ queue: job.queue }, Math.max(0, Date.now() - job.runAt.getTime()) / 1000);
    this.logger.debug(jobLogFields(job, session.workerId), 'job pushed');
  }

  /** Counts and logs a job's new state after a worker's write or a sweep. */
  written(write: JobWrite, job: JobWritten): void {
    const fields = jobLogFields(job, job.workerId);
    if (job.state === 'COMPLETED') {
      this.metrics.jobsCompleted.inc({ queue: job.queue });
      this.logger.debug(fields, 'job completed');
    } else if (job.state === 'DLQ') {
      this.metrics.jobsFailed.inc({ queue: job.queue });
      this.metrics.jobsDeadLettered.inc({ queue: job.queue });
      this.logger.warn({ ...fields, error: job.lastError }, 'job dead-lettered');
    } else if (write === 'snooze' && job.state === 'PENDING') {
      this.logger.debug({ ...fields, run_at: job.runAt }, 'job snoozed');
    } else if (job.state === 'PENDING') {
      this.metrics.jobsFailed.inc({ queue: job.queue });
      const what = write === 'expire' ? 'lease expired' : write === 'timeout' ? 'attempt timed out' : 'job failed';
      this.logger.info({ ...fields, error: job.lastError, retry_at: job.runAt }, `${what}; will retry`);
    } else if (write === 'expire' && job.state === 'CANCELLED') {
      // An operator's cancel its worker never acted on: the lease ran out (heartbeats stop
      // extending it one lease length after the cancel), because the worker died or its
      // handler ignores the cancel; then the handler may still run in that worker's process,
      // holding its resources, while its slot counts as free: on-call's only signal of it.
      this.logger.warn(fields, "cancelled job's lease ran out before its worker gave it up: the worker is gone, or its handler ignores cancels and may still be running there");
    } else {
      this.logger.info(fields, `job ${job.state.toLowerCase()}`);
    }
  }
}

import { dateCheck, finiteCheck } from '../checks.js';
import { NonRetryableError, RetryAtError, SnoozeError } from '../errors.js';
import { progressToPb, toJsonObjectSized, type Job, type JsonObject, type ProgressInput } from '../types.js';
import type { WorkRequest } from '../../gen/evora/v1/worker.js';
import type { HeldJob, Report } from './held-job.js';
import { MAX_ERROR_CHARS } from './limits.js';
import type { JobContext, JobHandler, WorkerLog } from './types.js';

/**
 * Runs the user's handlers: one execution per pushed job, with its JobContext and
 * ctx.signal, and turns what the handler did (returned, threw, snoozed, was aborted) into
 * the report the worker sends. It knows nothing of the stream: the worker gets the report
 * through `done` and decides what to do with it (e.g. nothing, if the lease was lost).
 *
 * What must stay true: a handler that throws or never settles cannot break the worker;
 * `executions` counts every handler still running, including those whose lease was lost,
 * and an execution leaves it before `done` is called for it.
 */
export class HandlerRunner {
  private readonly handlers = new Map<string, JobHandler>();
  private readonly active = new Set<HeldJob>();

  constructor(
    private readonly deps: {
      workerId: string;
      log: WorkerLog;
      /** The handler is about to run (the `jobStarted` event). */
      started: (job: Job) => void;
      /** The execution ended with this report; called synchronously after it left `executions`. */
      done: (h: HeldJob, report: Report) => void;
      /** A handler's progress report (ctx.progress) for the worker to send. */
      progress: (h: HeldJob, msg: WorkRequest) => void;
    },
  ) {}

  /** Registers the handler for a job type (replacing an earlier one). */
  register(type: string, handler: JobHandler): void {
    this.handlers.set(type, handler);
  }

  get registered(): number {
    return this.handlers.size;
  }

  /** The registered job types, sorted: what the worker declares in hello.job_types. */
  types(): string[] {
    return [...this.handlers.keys()].sort();
  }

  /** Handler executions in progress. */
  get executions(): ReadonlySet<HeldJob> {
    return this.active;
  }

  /** Runs the job's handler; never rejects. */
  async run(h: HeldJob): Promise<void> {
    const handler = this.handlers.get(h.job.type);
    let report: Report;
    if (!handler) {
      const error = `no handler for job type "${h.job.type}" on worker ${this.deps.workerId} (it handles: ${[...this.handlers.keys()].join(', ')})`;
      this.deps.log.error({ job_id: h.job.id, type: h.job.type }, error);
      report = failReport(h, error, { nonRetryable: true });
    } else {
      this.active.add(h);
      this.deps.started(h.job);
      try {
        const result = resultOf(await handler(h.job, new Context(h, this.deps.workerId, this.deps.progress)));
        report = {
          outcome: 'completed',
          error: null,
          msg: { $case: 'complete', value: { jobId: h.job.id, leaseToken: h.token, result: result?.json } },
          // A protobuf Struct takes at most ~6 bytes per character of its JSON text (short numbers).
          bytes: 200 + 6 * (result?.length ?? 0),
          ...(result ? { resultText: result.text } : {}),
        };
      } catch (err) {
        report = this.failureOf(h, err);
      }
      this.active.delete(h);
    }
    this.deps.done(h, report);
  }

  /** The report for a handler that threw. */
  private failureOf(h: HeldJob, err: unknown): Report {
    if (err instanceof SnoozeError) return snoozeReport(h, err.runAt);
    const aborted = h.aborted?.kind ?? null;
    // Interrupted by our own stop: not the job's fault. Give it back to run elsewhere, now.
    if (aborted === 'shutdown') return snoozeReport(h, null);
    const error = errorText(err);
    if (err instanceof RetryAtError) return failReport(h, error, { nonRetryable: false, retryAt: err.retryAt });
    // A cancelled job becomes CANCELLED whatever we say; non_retryable keeps that true even if the flag were gone.
    const nonRetryable = err instanceof NonRetryableError || aborted === 'cancelled';
    if (!(err instanceof NonRetryableError) && !aborted) this.deps.log.debug({ job_id: h.job.id, error }, 'handler failed; the job will be retried');
    return failReport(h, error, { nonRetryable });
  }
}

/**
 * A handler's JobContext. A class, not an object literal: a literal with getters is built
 * slowly on every job, and most handlers read only `job`, if anything. `signal` and
 * `leaseExpiresAt` read the held job at the time they are read.
 */
class Context implements JobContext {
  readonly job: Job;
  readonly leaseToken: string;

  constructor(
    private readonly held: HeldJob,
    readonly workerId: string,
    private readonly send: (h: HeldJob, msg: WorkRequest) => void,
  ) {
    this.job = held.job;
    this.leaseToken = held.token;
  }

  get checkpoint(): JsonObject | null {
    return this.held.checkpoint;
  }

  progress(report: ProgressInput): void {
    const value = { jobId: this.held.job.id, leaseToken: this.held.token, ...progressToPb(report) };
    this.send(this.held, { msg: { $case: 'progress', value } });
  }

  get signal(): AbortSignal {
    return this.held.signal;
  }

  get leaseExpiresAt(): Date | null {
    return this.held.leaseExpiresAt;
  }

  get parentResults(): Readonly<Record<string, JsonObject>> {
    return this.held.parentResults;
  }

  snooze(when: Date | number): never {
    return ctxSnooze(when);
  }

  retryAt(when: Date | number, message?: string): never {
    return ctxRetryAt(when, message);
  }
}

/**
 * A snooze report: give the job back to run at `runAt`, or (null) now by the server's clock:
 * run_at is left unset, so the worker's clock, which may run ahead of the database's, never
 * delays a give-back. Also used for jobs pushed while the worker stops.
 */
export function snoozeReport(h: HeldJob, runAt: Date | null): Report {
  return {
    outcome: 'snoozed',
    error: null,
    msg: { $case: 'snooze', value: { jobId: h.job.id, leaseToken: h.token, runAt: runAt ?? undefined } },
    bytes: 200,
  };
}

/**
 * A fail report: the handler threw, no handler exists, or (Reports) the server refused the
 * handler's own report. The error is cut to the MAX_ERROR_CHARS the server stores (never
 * inside a surrogate pair), so that a fail always fits in a message whatever was thrown.
 */
export function failReport(h: HeldJob, fullError: string, opts: { nonRetryable: boolean; retryAt?: Date }): Report {
  const error = fullError.length > MAX_ERROR_CHARS ? [...fullError.slice(0, 2 * MAX_ERROR_CHARS)].slice(0, MAX_ERROR_CHARS).join('') : fullError;
  return {
    outcome: 'failed',
    error,
    msg: { $case: 'fail', value: { jobId: h.job.id, leaseToken: h.token, error, nonRetryable: opts.nonRetryable, retryAt: opts.retryAt } },
    bytes: 200 + 3 * error.length,
  };
}

/** ctx.snooze(): a delay of 0 ms or less is "now", by the server's clock (no run_at). */
function ctxSnooze(when: Date | number): never {
  throw new SnoozeError(typeof when === 'number' && when <= 0 ? null : dateOf(when, 'ctx.snooze'));
}

function ctxRetryAt(when: Date | number, message?: string): never {
  throw new RetryAtError(dateOf(when, 'ctx.retryAt'), message);
}

/**
 * A Date, or a delay in ms from now, as a Date; a TypeError naming the call for anything
 * else (NaN, an Invalid Date, a delay past the last Date), instead of the bare "Invalid
 * time value" the attempt failed with.
 */
function dateOf(when: Date | number, what: string): Date {
  if (typeof when === 'number') finiteCheck(when, `${what}(ms)`);
  return dateCheck(when instanceof Date ? when : new Date(Date.now() + when), `${what}'s time`);
}

function errorText(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  if (typeof err === 'string') return err;
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}

/**
 * A handler's return value as the job's result, with the length of its JSON text: an object
 * as it is, any other value but undefined (null too) as `{ value }`, undefined as none. A
 * value JSON cannot carry is a bug retrying will not fix.
 */
function resultOf(value: unknown): { json: JsonObject; length: number; text: string } | undefined {
  if (value === undefined) return undefined;
  const isObject = typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
  try {
    return toJsonObjectSized(isObject ? value : { value }, 'the handler result');
  } catch (err) {
    throw new NonRetryableError((err as Error).message, { cause: err });
  }
}

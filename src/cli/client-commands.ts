import type { Command } from 'commander';
import {
  BACKOFF_KINDS,
  JOB_STATES,
  jobStateParse,
  type Backoff,
  type BackoffKindName,
  type BulkJobFilter,
  type Job,
  type QueueSettings,
} from '../sdk/index.js';
import { UsageError, nonEmpty, parseAgeOrTime, parseDuration, parseInteger, parsePayload, parseNumber, parseRate, parseRetention, parseTime } from './flags.js';
import { attemptTable, countedText, jobDetails, jobTable, queueDetails, queueTable, statsDetails, statsTable } from './format.js';
import { MAX_ATTEMPTS_LIMIT, MAX_RATE_PER_SECOND, PRIORITY_MAX, PRIORITY_MIN } from '../domain/validate.js';
import { print, withClient, type Ctx } from './client-context.js';
import { jobHoldFacts, jobHoldReasons } from './why.js';

/**
 * The client commands of `evora`: thin wrappers over the SDK's EvoraClient. Each prints a
 * human-readable text, or with --json the SDK's objects as JSON (times as ISO strings).
 */

/** The help of --error-group (list, retry --all, purge): an empty value is a group of its own, never refused. */
const ERROR_GROUP_HELP = 'only jobs of this error group: the first line of their last error, as the commands `evora dlq` prints give it ("" = jobs without an error)';

/**
 * The values of a flag that may be repeated (--state, --depends-on), one per use of the flag
 * (`--state dlq --state cancelled`), each possibly a comma-separated list (`--state
 * dlq,cancelled`). Without it the last use wins: `--depends-on a --depends-on b` dropped a,
 * and the job ran without waiting for it. Not a variadic `<states...>`: that takes every
 * word up to the next flag, so a positional after it (`retry --state dlq <id>`) would be read
 * as a state.
 */
function repeatedCollect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** The --state flag's states; given but naming none (`--state ""`) is refused, as it would mean every state. */
function statesOf(values: string[] | undefined) {
  if (!values) return undefined;
  const names = values.flatMap((v) => v.split(',')).map((v) => v.trim()).filter(Boolean);
  if (names.length === 0) throw new UsageError('--state names no state: give one, or leave the flag out');
  try {
    return names.map(jobStateParse);
  } catch (err) {
    throw new UsageError(`--state: ${(err as Error).message}`);
  }
}

/** The --depends-on flag's job ids; given but naming none is refused, as the job would run at once instead of waiting. */
function dependsOnOf(values: string[] | undefined): string[] | undefined {
  if (values === undefined) return undefined;
  const ids = values.flatMap((v) => v.split(',')).map((s) => s.trim()).filter(Boolean);
  if (ids.length === 0) throw new UsageError('--depends-on names no job id: give the ids, or leave the flag out');
  return ids;
}

function cancelText(job: Job): string {
  if (job.state === 'RUNNING') return `job ${job.id}: cancel requested; it stays RUNNING until its worker stops it, at the latest one lease length (the queue's lease_seconds) from now`;
  return `job ${job.id}: ${job.state}`;
}

/**
 * Adds the client commands (submit, get, list, cancel, retry, purge, queues, stats, queue ...) to
 * `program` (workers, dlq and whoami: operator-commands.ts). They load no server code, so they start fast; each maps a failure to one line
 * and an exit code in main.ts.
 */
export function clientCommandsAdd(program: Command): void {
  program
    .command('submit <queue> <type>')
    .description('submit a job')
    .option('--payload <json>', 'the job payload: a JSON object, or @file to read it from a file', undefined)
    .option('--key <key>', 'idempotency key: a resubmit with the same key returns the existing job')
    .option('--priority <n>', 'smaller runs first, -1000..1000 (default 0)')
    .option('--run-at <time>', 'earliest time to run: an ISO 8601 time with its zone (2030-01-02T15:04:05Z, or +02:00), or a delay such as 10m')
    .option('--max-attempts <n>', "attempts before the DLQ (default: the queue's)")
    .option('--backoff <kind>', `this job's retry delay growth: ${BACKOFF_KINDS.join(', ')} (default: the queue's)`)
    .option('--backoff-base <duration>', "this job's delay before the first retry, e.g. 1s (default: the queue's)")
    .option('--backoff-cap <duration>', "this job's longest delay, e.g. 1m (default: the queue's)")
    .option('--jitter <fraction>', "this job's random spread of the delay, 0..1 (default 0 once any --backoff* is given)")
    // Not --timeout: that is the global deadline of each client call.
    .option('--attempt-timeout <duration>', "the longest one attempt may run, e.g. 30s; then the server fails it (default: the queue's attempt timeout, if any)")
    .option('--concurrency-key <key>', "groups the job (e.g. a tenant id) for the queue's --max-concurrency-per-key (default: none)")
    .option('--depends-on <ids>', 'job ids (comma-separated, or the flag repeated) this job runs after: WAITING until they all complete (default: none)', repeatedCollect)
    .action(
      withClient(async (ctx, queue: string, type: string, opts: { payload?: string; key?: string; priority?: string; runAt?: string; maxAttempts?: string } & BackoffFlags & { attemptTimeout?: string; concurrencyKey?: string; dependsOn?: string[] }) => {
        const res = await ctx.client.submit({
          dependsOn: dependsOnOf(opts.dependsOn),
          backoff: backoffOf(opts),
          timeoutSeconds: opts.attemptTimeout === undefined ? undefined : parseDuration(opts.attemptTimeout, '--attempt-timeout'),
          queue,
          type,
          payload: opts.payload === undefined ? undefined : parsePayload(opts.payload, '--payload'),
          idempotencyKey: nonEmpty(opts.key, '--key'),
          concurrencyKey: nonEmpty(opts.concurrencyKey, '--concurrency-key'),
          priority: opts.priority === undefined ? undefined : parseInteger(opts.priority, '--priority', PRIORITY_MIN, PRIORITY_MAX),
          runAt: opts.runAt === undefined ? undefined : parseTime(opts.runAt, '--run-at'),
          maxAttempts: opts.maxAttempts === undefined ? undefined : parseInteger(opts.maxAttempts, '--max-attempts', 1, MAX_ATTEMPTS_LIMIT),
        });
        print(ctx, res, () =>
          res.created
            ? `job ${res.job.id} submitted to queue ${res.job.queue} (type ${res.job.type}, ${res.job.state})`
            : `job ${res.job.id} already exists with key ${res.job.idempotencyKey} (${res.job.state}); nothing new submitted`,
        );
      }),
    );

  program
    .command('get <id>')
    .description('show a job; a PENDING or WAITING one with why it is not running (paused queue, limits, parents, run at, workers)')
    .action(
      withClient(async (ctx, id: string) => {
        const { job, attempts, dependents } = await ctx.client.getDetails(id);
        const notRunning = jobHoldReasons(await jobHoldFacts(ctx.client, { job, attempts }));
        const why = notRunning.length > 0 ? `\n\nnot running because:\n${notRunning.map((r) => `  - ${r.text}`).join('\n')}` : '';
        print(ctx, { ...job, attempts, dependents, notRunning }, () => `${jobDetails(job, dependents)}${why}\n\n${attemptTable(attempts)}`);
      }),
    );

  program
    .command('list')
    .description('list jobs, newest first')
    .option('--queue <queue>', 'only this queue')
    .option('--state <states>', 'only these states (waiting, pending, running, completed, dlq, cancelled; several comma-separated, or the flag repeated)', repeatedCollect)
    .option('--type <type>', 'only this job type')
    .option('--error-group <error>', ERROR_GROUP_HELP)
    .option('--limit <n>', 'at most this many jobs', '50')
    .action(
      withClient(async (ctx, opts: { queue?: string; state?: string[]; type?: string; errorGroup?: string; limit: string }) => {
        const limit = parseInteger(opts.limit, '--limit', 1);
        const jobs: Job[] = [];
        const filter = {
          queue: nonEmpty(opts.queue, '--queue'),
          states: statesOf(opts.state),
          type: nonEmpty(opts.type, '--type'),
          // '' is a group (the jobs without an error), not a flag left empty by mistake.
          errorGroup: opts.errorGroup,
        };
        // One more than asked, to say whether there are more.
        for await (const job of ctx.client.listAll({ ...filter, limit: limit + 1, pageSize: Math.min(limit + 1, 1000) })) jobs.push(job);
        const more = jobs.length > limit;
        const shown = jobs.slice(0, limit);
        print(ctx, shown, () => {
          if (shown.length === 0) return 'no jobs';
          return jobTable(shown) + (more ? `\n(showing the newest ${limit}; raise --limit to see more)` : '');
        });
      }),
    );

  program
    .command('cancel [id]')
    .description('cancel a job (a running job is stopped by its worker), or with --all every pending, waiting or running one a filter matches')
    .option('--all', 'cancel every PENDING, WAITING or RUNNING job the filter flags match (required without an id)')
    .option('--queue <queue>', 'with --all: only this queue')
    .option('--state <states>', 'with --all: only these states (pending, waiting, running; default all three; several comma-separated, or the flag repeated)', repeatedCollect)
    .option('--type <type>', 'with --all: only this job type')
    .option('--error-group <error>', `with --all: ${ERROR_GROUP_HELP}`)
    .option('--dry-run', 'with --all: only count the jobs that would be cancelled or asked to stop')
    .action(
      withClient(async (ctx, id: string | undefined, opts: Omit<BulkFlags, 'finishedBefore'> & { all?: boolean }) => {
        const filterGiven = opts.queue !== undefined || opts.state !== undefined || opts.type !== undefined || opts.errorGroup !== undefined;
        if (id !== undefined) {
          if (opts.state !== undefined && (JOB_STATES as readonly string[]).includes(id.trim().toUpperCase())) {
            throw new UsageError(`"${id}" is read as the job id: give several states comma-separated (--state pending,running) or repeat --state`);
          }
          if (opts.all || filterGiven || opts.dryRun) throw new UsageError('give a job id, or filter flags with --all, not both');
          const job = await ctx.client.cancel(id);
          print(ctx, job, () => cancelText(job));
          return;
        }
        if (!opts.all) throw new UsageError('give a job id, or filter flags (--queue, --state, --type, --error-group) with --all');
        await bulkRun(ctx, opts, 'cancel');
      }),
    );

  program
    .command('retry [id]')
    .description('run a DLQ or CANCELLED job again, or with --all every one a filter matches')
    .option('--all', 'retry every DLQ or CANCELLED job the filter flags match (required without an id)')
    .option('--queue <queue>', 'with --all: only this queue')
    .option('--state <states>', 'with --all: only these states (dlq, cancelled; default both; both: dlq,cancelled or the flag repeated)', repeatedCollect)
    .option('--type <type>', 'with --all: only this job type')
    .option('--finished-before <time>', 'with --all: only jobs that finished before this: an age such as 7d, or an ISO 8601 time with its zone')
    .option('--error-group <error>', `with --all: ${ERROR_GROUP_HELP}`)
    .option('--dry-run', 'with --all: only count the jobs that would be retried')
    .action(
      withClient(async (ctx, id: string | undefined, opts: BulkFlags & { all?: boolean }) => {
        const filterGiven =
          opts.queue !== undefined || opts.state !== undefined || opts.type !== undefined || opts.finishedBefore !== undefined || opts.errorGroup !== undefined;
        if (id !== undefined) {
          // `--state dlq cancelled`, as a variadic --state once read it: the second state is the id here.
          if (opts.state !== undefined && (JOB_STATES as readonly string[]).includes(id.trim().toUpperCase())) {
            throw new UsageError(`"${id}" is read as the job id: give several states comma-separated (--state dlq,cancelled) or repeat --state`);
          }
          if (opts.all || filterGiven || opts.dryRun) throw new UsageError('give a job id, or filter flags with --all, not both');
          const job = await ctx.client.retry(id);
          print(ctx, job, () => `job ${job.id}: ${job.state}, will run again`);
          return;
        }
        if (!opts.all) throw new UsageError('give a job id, or filter flags (--queue, --state, --type, --finished-before, --error-group) with --all');
        await bulkRun(ctx, opts, 'retry');
      }),
    );

  program
    .command('purge')
    .description('delete finished jobs (COMPLETED, DLQ, CANCELLED) a filter matches; never pending or running ones')
    .option('--queue <queue>', 'only this queue')
    .option('--state <states>', 'only these states (completed, dlq, cancelled; default all three; several comma-separated, or the flag repeated)', repeatedCollect)
    .option('--type <type>', 'only this job type')
    .option('--finished-before <time>', 'only jobs that finished before this: an age such as 7d, or an ISO 8601 time with its zone')
    .option('--error-group <error>', ERROR_GROUP_HELP)
    .option('--dry-run', 'only count the jobs that would be deleted')
    .action(
      withClient(async (ctx, opts: BulkFlags) => {
        await bulkRun(ctx, opts, 'purge');
      }),
    );

  program
    .command('queues')
    .description('list queues')
    .action(
      withClient(async (ctx) => {
        const queues = await ctx.client.listQueues();
        print(ctx, queues, () => (queues.length === 0 ? 'no queues' : queueTable(queues)));
      }),
    );

  program
    .command('stats [queue]')
    .description('queue telemetry: counts by state, throughput, latency percentiles, failure rate, workers')
    .action(
      withClient(async (ctx, name: string | undefined) => {
        if (name) {
          const stats = await ctx.client.queueStats(name);
          print(ctx, stats, () => statsDetails(stats));
        } else {
          const stats = await ctx.client.listQueueStats();
          print(ctx, stats, () => (stats.length === 0 ? 'no queues' : statsTable(stats)));
        }
      }),
    );

  const queue = program.command('queue').description('show, configure, pause, resume or delete a queue');
  queue
    .command('get <name>')
    .description("show a queue's settings")
    .action(
      withClient(async (ctx, name: string) => {
        const q = await ctx.client.getQueue(name);
        print(ctx, q, () => queueDetails(q));
      }),
    );
  queue
    .command('pause <name>')
    .description('stop workers from taking jobs from the queue (submits are still accepted)')
    .action(
      withClient(async (ctx, name: string) => {
        const q = await ctx.client.pauseQueue(name);
        print(ctx, q, () => `queue ${q.name}: paused`);
      }),
    );
  queue
    .command('resume <name>')
    .description('let workers take jobs from the queue again')
    .action(
      withClient(async (ctx, name: string) => {
        const q = await ctx.client.resumeQueue(name);
        print(ctx, q, () => `queue ${q.name}: resumed`);
      }),
    );
  queue
    .command('delete <name>')
    .description('delete an empty queue and its settings (refused while it has jobs of any state or schedules)')
    .action(
      withClient(async (ctx, name: string) => {
        await ctx.client.deleteQueue(name);
        print(ctx, { name, deleted: true }, () => `queue ${name}: deleted`);
      }),
    );
  queue
    .command('set <name>')
    .description('create a queue or change its settings (settings not given keep their value)')
    .option('--max-attempts <n>', 'default attempts before the DLQ')
    .option('--lease-seconds <n>', 'lease length in seconds')
    .option('--backoff <kind>', `retry delay growth: ${BACKOFF_KINDS.join(', ')}`)
    .option('--backoff-base <duration>', 'delay before the first retry, e.g. 5s')
    .option('--backoff-cap <duration>', 'longest delay, e.g. 1h')
    .option('--jitter <fraction>', 'random spread of the delay, 0..1 (0.2 = ±20%)')
    .option('--max-concurrency <n>', 'most RUNNING jobs across all workers and servers; 0 = unlimited')
    .option('--max-concurrency-per-key <n>', 'most RUNNING jobs per concurrency key, claims rotating across keys; 0 = no per-key limit')
    .option('--rate <rate>', 'most job starts across all servers, e.g. 5/s, 300/m, 10/h (a number alone is per second); 0 or none: no limit')
    .option('--burst <n>', 'with --rate: most starts at once (default: one second of the rate, at least 1)')
    .option('--completed-retention <duration>', 'how long COMPLETED jobs are kept after they finish, e.g. 7d; 0 or forever: never deleted')
    .option('--cancelled-retention <duration>', 'how long CANCELLED jobs are kept, e.g. 7d; 0 or forever: never deleted')
    .option('--dlq-retention <duration>', 'how long DLQ jobs are kept (a deleted one cannot be retried), e.g. 30d; 0 or forever: never deleted')
    .option('--attempt-timeout <duration>', 'the attempt timeout of jobs submitted without one, e.g. 5m; 0: none')
    .option('--delete-on-complete', 'delete jobs at completion instead of keeping them COMPLETED (results not kept; jobs with dependents are kept)')
    .option('--no-delete-on-complete', 'keep completed jobs for --completed-retention (the default)')
    .action(
      withClient(
        async (
          ctx,
          name: string,
          opts: {
            maxAttempts?: string;
            leaseSeconds?: string;
            backoff?: string;
            backoffBase?: string;
            backoffCap?: string;
            jitter?: string;
            maxConcurrency?: string;
            maxConcurrencyPerKey?: string;
            rate?: string;
            burst?: string;
            completedRetention?: string;
            cancelledRetention?: string;
            dlqRetention?: string;
            attemptTimeout?: string;
            deleteOnComplete?: boolean;
          },
        ) => {
          const settings: QueueSettings = {};
          if (opts.maxAttempts !== undefined) settings.maxAttempts = parseInteger(opts.maxAttempts, '--max-attempts', 1, MAX_ATTEMPTS_LIMIT);
          if (opts.leaseSeconds !== undefined) settings.leaseSeconds = parseInteger(opts.leaseSeconds, '--lease-seconds', 1);
          if (opts.maxConcurrency !== undefined) settings.maxConcurrency = parseInteger(opts.maxConcurrency, '--max-concurrency', 0);
          if (opts.maxConcurrencyPerKey !== undefined) {
            settings.maxConcurrencyPerKey = parseInteger(opts.maxConcurrencyPerKey, '--max-concurrency-per-key', 0);
          }
          if (opts.burst !== undefined && opts.rate === undefined) throw new UsageError('--burst needs --rate');
          if (opts.rate !== undefined) {
            const perSecond = parseRate(opts.rate, '--rate');
            if (perSecond === 0 && opts.burst !== undefined) throw new UsageError('--burst has no meaning with --rate 0 or none (they clear the limit)');
            // Checked here, or the default burst (a second of the rate) would be refused by the SDK first, by its field's name.
            if (perSecond > MAX_RATE_PER_SECOND) throw new UsageError(`--rate must be at most ${MAX_RATE_PER_SECOND}/s, got "${opts.rate}"`);
            const burst = opts.burst === undefined ? Math.max(1, Math.ceil(perSecond)) : parseInteger(opts.burst, '--burst', 1, MAX_RATE_PER_SECOND);
            settings.rateLimit = perSecond === 0 ? { perSecond: 0, burst: 0 } : { perSecond, burst };
          }
          if (opts.completedRetention !== undefined) settings.completedRetentionSeconds = parseRetention(opts.completedRetention, '--completed-retention');
          if (opts.cancelledRetention !== undefined) settings.cancelledRetentionSeconds = parseRetention(opts.cancelledRetention, '--cancelled-retention');
          if (opts.dlqRetention !== undefined) settings.dlqRetentionSeconds = parseRetention(opts.dlqRetention, '--dlq-retention');
          if (opts.attemptTimeout !== undefined) settings.attemptTimeoutSeconds = parseDuration(opts.attemptTimeout, '--attempt-timeout');
          if (opts.deleteOnComplete !== undefined) settings.deleteOnComplete = opts.deleteOnComplete;
          settings.backoff = backoffOf(opts);
          const res = await ctx.client.upsertQueue(name, settings);
          print(ctx, res, () => `queue ${res.queue.name} ${res.created ? 'created' : 'updated'}\n${queueDetails(res.queue)}`);
        },
      ),
    );
}

/** The filter flags of `retry --all`, `cancel --all` (no --finished-before) and `purge`. */
interface BulkFlags {
  queue?: string;
  state?: string[];
  type?: string;
  finishedBefore?: string;
  /** Taken as given: '' is a group (jobs without an error), not "unset". */
  errorGroup?: string;
  dryRun?: boolean;
}

/** The filter the flags give; the server refuses an empty one. */
function bulkFilterOf(opts: BulkFlags): BulkJobFilter {
  return {
    queue: nonEmpty(opts.queue, '--queue'),
    states: statesOf(opts.state),
    type: nonEmpty(opts.type, '--type'),
    finishedBefore: opts.finishedBefore === undefined ? undefined : parseAgeOrTime(opts.finishedBefore, '--finished-before'),
    errorGroup: opts.errorGroup,
  };
}

/**
 * `retry --all`, `cancel --all` and `purge`: the dry run prints the count, for a retry or a
 * purge with the --finished-before that keeps a run to the jobs counted (countedText;
 * --json: `{ count, finishedBefore, dryRun }`; a cancel: `{ count, dryRun }`), the run
 * prints how many it changed (`{ count, dryRun }`).
 */
async function bulkRun(ctx: Ctx, opts: BulkFlags, action: 'retry' | 'purge' | 'cancel'): Promise<void> {
  const filter = bulkFilterOf(opts);
  if (action === 'cancel') {
    const count = await ctx.client.cancelJobs(filter, { dryRun: opts.dryRun ?? false });
    print(ctx, { count, dryRun: opts.dryRun ?? false }, () => `${jobsText(count)} ${opts.dryRun ? 'would be ' : ''}cancelled or asked to stop`);
    return;
  }
  const [done, verb] = action === 'retry' ? (['retried', 'retry'] as const) : (['deleted', 'delete'] as const);
  if (opts.dryRun) {
    const counted = await (action === 'retry' ? ctx.client.retryJobsCount(filter) : ctx.client.purgeJobsCount(filter));
    print(ctx, { ...counted, dryRun: true }, () => countedText(counted, done, verb));
    return;
  }
  const count = await (action === 'retry' ? ctx.client.retryJobs(filter) : ctx.client.purgeJobs(filter));
  print(ctx, { count, dryRun: false }, () => `${jobsText(count)} ${done}`);
}

/** `1 job`, `3 jobs`. */
function jobsText(count: number): string {
  return `${count} job${count === 1 ? '' : 's'}`;
}

/** The --backoff, --backoff-base, --backoff-cap and --jitter flags of `queue set` and `submit`. */
interface BackoffFlags {
  backoff?: string;
  backoffBase?: string;
  backoffCap?: string;
  jitter?: string;
}

/** The backoff the flags give (only the parts given), or undefined when none is. */
function backoffOf(opts: BackoffFlags): Partial<Backoff> | undefined {
  const backoff: Partial<Backoff> = {};
  if (opts.backoff !== undefined) {
    const kind = opts.backoff.toLowerCase() as BackoffKindName;
    if (!BACKOFF_KINDS.includes(kind)) throw new UsageError(`--backoff must be one of ${BACKOFF_KINDS.join(', ')}, got "${opts.backoff}"`);
    backoff.kind = kind;
  }
  if (opts.backoffBase !== undefined) backoff.baseSeconds = parseDuration(opts.backoffBase, '--backoff-base');
  if (opts.backoffCap !== undefined) backoff.capSeconds = parseDuration(opts.backoffCap, '--backoff-cap');
  if (opts.jitter !== undefined) backoff.jitter = parseNumber(opts.jitter, '--jitter', 0, 1);
  return Object.keys(backoff).length > 0 ? backoff : undefined;
}

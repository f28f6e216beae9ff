import type { Command } from 'commander';
import { MISFIRE_POLICIES, type MisfirePolicyName, type Schedule } from '../sdk/index.js';
import { UsageError, nonEmpty, parseInteger, parsePayload } from './flags.js';
import { fields, table, time } from './format.js';
import { print, withClient } from './client-context.js';

/**
 * `evora schedule set|get|list|delete|pause|resume|trigger`: thin wrappers over the SDK's
 * schedule methods. Human-readable text, or with --json the SDK's objects as JSON.
 */

function misfireParse(text: string): MisfirePolicyName {
  const name = text.toLowerCase().replace(/-/g, '_') as MisfirePolicyName;
  if (!MISFIRE_POLICIES.includes(name)) throw new UsageError(`--misfire must be one of ${MISFIRE_POLICIES.join(', ')}, got "${text}"`);
  return name;
}

/** One schedule, field per line. */
function scheduleDetails(s: Schedule): string {
  return fields([
    ['name', s.name],
    ['status', s.paused ? 'paused' : 'active'],
    ['cron', s.cron],
    ['timezone', s.timezone],
    ['queue', s.queue],
    ['type', s.type],
    ['payload', JSON.stringify(s.payload)],
    ['priority', String(s.priority)],
    ['max attempts', s.maxAttempts === 0 ? "queue's" : String(s.maxAttempts)],
    ['misfire', s.misfirePolicy === 'run_each' ? `run_each (at most ${s.misfireCap})` : s.misfirePolicy],
    ['next run', s.paused ? '- (paused)' : time(s.nextRunAt)],
    ['last run', time(s.lastRunAt)],
    ['last job', s.lastJobId ?? '-'],
    ['created', time(s.createdAt)],
    ['updated', time(s.updatedAt)],
  ]);
}

/** One line per schedule. */
function scheduleTable(schedules: Schedule[]): string {
  return table(
    ['NAME', 'STATUS', 'CRON', 'TIMEZONE', 'QUEUE', 'TYPE', 'NEXT RUN', 'LAST JOB'],
    schedules.map((s) => [
      s.name,
      s.paused ? 'paused' : 'active',
      s.cron,
      s.timezone,
      s.queue,
      s.type,
      s.paused ? '-' : time(s.nextRunAt),
      s.lastJobId ?? '-',
    ]),
  );
}

/** Adds `evora schedule ...` to the program. */
export function scheduleCommandsAdd(program: Command): void {
  const schedule = program.command('schedule').description('recurring jobs: create, show, pause, resume, run now or delete a schedule');
  schedule
    .command('set <name> <cron> <queue> <type>')
    .description('create a schedule or replace its settings (cron: 5 fields, or 6 with leading seconds)')
    .option('--timezone <tz>', 'IANA time zone the cron expression is read in', 'UTC')
    .option('--payload <json>', 'JSON object payload of each job, or @file', '{}')
    .option('--priority <n>', 'smaller runs first, -1000..1000', '0')
    .option('--max-attempts <n>', "attempts before the DLQ (default: the queue's)")
    .option('--misfire <policy>', `fire times reached late: ${MISFIRE_POLICIES.join(', ')}`, 'run_once')
    .option('--misfire-cap <n>', 'run_each: most missed fires submitted', '100')
    .action(
      withClient(
        async (
          ctx,
          name: string,
          cron: string,
          queue: string,
          type: string,
          opts: { timezone: string; payload: string; priority: string; maxAttempts?: string; misfire: string; misfireCap: string },
        ) => {
          const res = await ctx.client.upsertSchedule({
            name,
            cron,
            queue,
            type,
            timezone: opts.timezone,
            payload: parsePayload(opts.payload, '--payload'),
            priority: parseInteger(opts.priority, '--priority', -1000, 1000),
            maxAttempts: opts.maxAttempts === undefined ? 0 : parseInteger(opts.maxAttempts, '--max-attempts', 1, 1000),
            misfirePolicy: misfireParse(opts.misfire),
            misfireCap: parseInteger(opts.misfireCap, '--misfire-cap', 1, 1000),
          });
          // An upsert keeps a schedule paused: its next_run_at is not when it fires (get and list show none).
          const next = res.schedule.paused ? 'paused: no run until `evora schedule resume`' : `next run ${time(res.schedule.nextRunAt)}`;
          print(ctx, res, () => `schedule ${res.schedule.name} ${res.created ? 'created' : 'updated'}; ${next}`);
        },
      ),
    );
  schedule
    .command('get <name>')
    .description("show a schedule's settings and its last and next run")
    .action(
      withClient(async (ctx, name: string) => {
        const s = await ctx.client.getSchedule(name);
        print(ctx, s, () => scheduleDetails(s));
      }),
    );
  schedule
    .command('list')
    .description('list schedules')
    .action(
      withClient(async (ctx) => {
        const all = await ctx.client.listSchedules();
        print(ctx, all, () => (all.length === 0 ? 'no schedules' : scheduleTable(all)));
      }),
    );
  schedule
    .command('delete <name>')
    .description('delete a schedule (its jobs stay)')
    .action(
      withClient(async (ctx, name: string) => {
        await ctx.client.deleteSchedule(name);
        print(ctx, { name, deleted: true }, () => `schedule ${name}: deleted`);
      }),
    );
  schedule
    .command('pause <name>')
    .description('stop a schedule from firing')
    .action(
      withClient(async (ctx, name: string) => {
        const s = await ctx.client.pauseSchedule(name);
        print(ctx, s, () => `schedule ${s.name}: paused`);
      }),
    );
  schedule
    .command('resume <name>')
    .description('let a paused schedule fire again (fire times missed while paused are skipped)')
    .action(
      withClient(async (ctx, name: string) => {
        const s = await ctx.client.resumeSchedule(name);
        print(ctx, s, () => `schedule ${s.name}: resumed; next run ${time(s.nextRunAt)}`);
      }),
    );
  schedule
    .command('trigger <name>')
    .description('submit one job of the schedule now, even while it is paused')
    .option('--id <trigger-id>', 'makes a retry safe: the same id returns the same job')
    .action(
      withClient(async (ctx, name: string, opts: { id?: string }) => {
        const res = await ctx.client.triggerSchedule(name, { triggerId: nonEmpty(opts.id, '--id') });
        print(ctx, res, () => `job ${res.jobId} ${res.created ? 'submitted' : 'already submitted'} (key ${res.idempotencyKey})`);
      }),
    );
}

import type { Command } from 'commander';
import type { Caller, DeadLetterGroup, DeadLetterGroupList, WorkerInfo } from '../sdk/index.js';
import { evoraCommand, print, withClient } from './client-context.js';
import { UsageError, nonEmpty, parseInteger } from './flags.js';
import { fields, oneLine, shellWord, table, time } from './format.js';

/**
 * `evora workers`, `evora dlq` and `evora whoami`: what an operator looks at before acting
 * (which workers are connected, what the dead-letter queue holds by error, who the current
 * token is), thin wrappers over the SDK's listWorkers, deadLetterGroups and whoAmI. Human
 * text, or with --json the SDK's objects as JSON (times as ISO strings).
 */

/** The filter flags that name exactly one dead-letter group: its queue, type, DLQ and error group. */
function groupFlags(g: DeadLetterGroup): string[] {
  return ['--queue', g.queue, '--type', g.type, '--state', 'dlq', '--error-group', g.error];
}

/**
 * The command that retries exactly one dead-letter group (RetryJobs with its filter);
 * `evora` is the program and the connection flags to repeat (evoraCommand).
 */
export function retryGroupCommand(g: DeadLetterGroup, evora = 'evora'): string {
  return [evora, ...['retry', '--all', ...groupFlags(g)].map(shellWord)].join(' ');
}

/** The command that lists one dead-letter group's jobs (ListJobs with its filter; list's own --limit applies). */
function listGroupCommand(g: DeadLetterGroup, evora: string): string {
  return [evora, ...['list', ...groupFlags(g)].map(shellWord)].join(' ');
}

/** Workers, one line each: the session's first 8 characters (--json has it whole), held/slots, and the server holding its stream. */
function workerTable(workers: WorkerInfo[]): string {
  return table(
    ['WORKER', 'SESSION', 'QUEUES', 'TYPES', 'HELD/SLOTS', 'CONNECTED', 'LAST SEEN', 'SERVER'],
    workers.map((w) => [
      w.workerId,
      w.sessionId.slice(0, 8),
      w.queues.join(','),
      w.jobTypes.length > 0 ? w.jobTypes.join(',') : '*',
      `${w.heldJobs}/${w.slots}`,
      time(w.connectedAt),
      time(w.lastSeenAt),
      w.serverAddress,
    ]),
  );
}

/**
 * Dead-letter groups, largest first, what the answer left out, then the commands retrying and
 * listing each (after the retries, per queue, how to re-drive gradually: a rate limit), with this command's connection flags (`evora` from evoraCommand) and, when a
 * --token value was left out of them, how to give the token.
 */
function deadLetterText(res: DeadLetterGroupList, limit: number, evora: { command: string; tokenNote: string }): string {
  const rows = table(
    ['QUEUE', 'TYPE', 'COUNT', 'NEWEST', 'ERROR'],
    res.groups.map((g) => [g.queue, g.type, String(g.count), time(g.newestFinishedAt), g.error === '' ? '(no error)' : oneLine(g.error, 80)]),
  );
  const notes: string[] = [];
  if (res.totalGroups > res.groups.length) {
    notes.push(`(the largest ${res.groups.length} of ${res.totalGroups} groups${limit < 200 ? '; raise --limit, at most 200, to see more' : ''})`);
  }
  if (res.truncated) notes.push('(only the newest 10,000 DLQ jobs were grouped: the counts cover those)');
  const tokenNote = evora.tokenNote ? [`(run them with ${evora.tokenNote})`] : [];
  return [
    rows,
    ...notes,
    '',
    'retry a group (add --dry-run to count it first; purge takes the same flags):',
    ...res.groups.map((g) => `  ${retryGroupCommand(g, evora.command)}`),
    ...[...new Set(res.groups.map((g) => g.queue))].map(
      (q) => `(retried jobs start as fast as workers take them; to re-drive gradually, limit the queue's starts first: ${evora.command} queue set ${q} --rate 10/s, and --rate none once drained)`,
    ),
    '',
    "list a group's jobs (newest first; add --limit for more than 50):",
    ...res.groups.map((g) => `  ${listGroupCommand(g, evora.command)}`),
    ...tokenNote,
  ].join('\n');
}

/** Who the caller is, a field per line; a token sent while auth is off is said to be unchecked. */
function callerText(c: Caller, tokenGiven: boolean): string {
  if (!c.authOn) {
    return fields([
      ['auth', 'off: no token exists, every caller is anonymous and may call every method'],
      ['caller', `anonymous${tokenGiven ? ' (the token given is not checked while auth is off)' : ''}`],
      ['role', c.role ?? '?'],
    ]);
  }
  return fields([
    ['auth', 'on'],
    ['caller', c.kind === 'token' ? `token ${c.name ?? '?'}` : (c.kind ?? '?')],
    ['token id', c.tokenId ?? '-'],
    ['role', c.role ?? '? (unknown to this CLI)'],
    ['queues', c.queues.length > 0 ? c.queues.join(',') : '* (every queue)'],
    ['expires', c.expiresAt ? time(c.expiresAt) : 'never'],
  ]);
}

/** Adds `evora workers`, `evora dlq` and `evora whoami` to the program. */
export function operatorCommandsAdd(program: Command): void {
  program
    .command('workers')
    .description('list the workers connected to any server (one line per Work stream, as recorded at most 5 s ago)')
    .option('--queue <queue>', 'only workers taking jobs from this queue')
    .action(
      withClient(async (ctx, opts: { queue?: string }) => {
        const queue = nonEmpty(opts.queue, '--queue');
        const workers = await ctx.client.listWorkers({ queue });
        print(ctx, workers, () => {
          if (workers.length === 0) return queue ? `no workers take jobs from queue ${queue}` : 'no workers connected';
          return workerTable(workers);
        });
      }),
    );

  program
    .command('dlq [queue]')
    .description(
      'dead letters grouped by job type and error (first line), largest first, each with the commands that retry it and list its jobs; ' +
        'of one queue, or of every queue (a token limited to queues must name one)',
    )
    .option('--limit <n>', 'at most this many groups (1..200)', '50')
    .action(
      withClient(async (ctx, queue: string | undefined, opts: { limit: string }) => {
        const limit = parseInteger(opts.limit, '--limit', 1, 200);
        // An empty name (a script's unset variable) must not widen the view to every queue.
        if (queue !== undefined && queue.trim() === '') throw new UsageError('the queue is empty: name one, or leave it out for every queue');
        const res = await ctx.client.deadLetterGroups({ queue, limit });
        print(ctx, res, () => {
          if (res.groups.length === 0) return queue ? `no dead letters in queue ${queue}` : 'no dead letters';
          return deadLetterText(res, limit, evoraCommand(ctx.connection));
        });
      }),
    );

  program
    .command('whoami')
    .description("who the server takes you for: whether auth is on, and your token's name, role, queues and expiry")
    .action(
      withClient(async (ctx) => {
        const caller = await ctx.client.whoAmI();
        print(ctx, caller, () => callerText(caller, ctx.tokenGiven));
      }),
    );
}

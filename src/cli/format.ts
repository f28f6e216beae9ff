import type { Job, JobAttempt, JobProgress, Queue, QueueStats } from '../sdk/index.js';
import { MAX_DEPENDENTS } from '../domain/validate.js';

/**
 * Human-readable rendering for the client commands: times, durations, tables, a job's and a
 * queue's details, and the lines that print a command for the user to paste (flags.ts parses
 * what the user typed).
 */

/** A rate limit as the CLI shows it: `5/s, burst 1`, or `none`. */
export function rateText(q: Queue): string {
  if (!q.rateLimit) return 'none';
  return `${String(+q.rateLimit.perSecond.toPrecision(6))}/s, burst ${q.rateLimit.burst}`;
}

/** `2030-01-02 15:04:05Z`, or `-`. */
export function time(d: Date | null): string {
  return d ? d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '-';
}

/**
 * Seconds as `1h30m`, `5s`, `250ms`, `1s500ms`: to the millisecond, as the duration flags
 * read it back (parseDuration), so a setting is shown as it was stored (`--completed-retention
 * 1.5s` was shown `2s`).
 */
export function duration(seconds: number): string {
  if (seconds === 0) return '0s';
  let left = Math.round(seconds * 1000);
  const out: string[] = [];
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000], ['ms', 1]] as const) {
    if (left >= size) {
      out.push(`${Math.floor(left / size)}${unit}`);
      left %= size;
    }
  }
  return out.length > 0 ? out.join('') : '0ms';
}

/** Rows as columns padded to the widest cell. */
export function table(headers: string[], rowsGiven: string[][]): string {
  // Cells may hold a worker's text (a job's error): its control characters shown, not acted on.
  const rows = rowsGiven.map((r) => r.map(printable));
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/**
 * Label/value lines. A value of several lines (a stack trace in a last error) continues
 * under its first line, indented past the labels, so that no line of it reads as a field.
 */
export function fields(pairs: [string, string][]): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  const indent = ' '.repeat(width + 2);
  return pairs.map(([k, v]) => `${k.padEnd(width)}  ${printable(v.replace(/\r\n/g, '\n')).replace(/\n/g, `\n${indent}`)}`).join('\n');
}

/** C0 control characters but the line feed, DEL, and the C1 controls: what a terminal acts on instead of showing. */
const CONTROL_CHARS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g;

/** CONTROL_CHARS and the line feed: a shell word ($'…') escapes every one. */
const CONTROL_CHARS_AND_LF = /[\u0000-\u001f\u007f-\u009f]/g;

/** A control character's escape, as C and the shell's $'…' write it: `\r`, `\t`, else `\xHH` per UTF-8 byte (`\x1b`, `\xc2\x85`). */
function controlEscape(c: string): string {
  if (c === '\n') return '\\n';
  if (c === '\r') return '\\r';
  if (c === '\t') return '\\t';
  return [...Buffer.from(c, 'utf8')].map((b) => `\\x${b.toString(16).padStart(2, '0')}`).join('');
}

/**
 * `text` with every control character but the line feed shown as its escape (`\r`, `\t`,
 * `\x1b`). What a worker wrote (a job's error, a progress message) reaches the operator's
 * terminal through the CLI's text: printed as it is, an ESC sequence would recolour, move or
 * rewrite what the screen shows, and a carriage return would send the rest of its line over the
 * start of it. Line feeds are the caller's (fields indents them, oneLine joins them).
 */
export function printable(text: string): string {
  return text.replace(CONTROL_CHARS, controlEscape);
}

/**
 * `text` on one line (runs of white space as one space, other control characters as their
 * escapes: printable), cut to `max` characters with an ellipsis.
 */
export function oneLine(text: string, max: number): string {
  const t = printable(text.replace(/\s+/g, ' '));
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/**
 * A bulk dry run's line: how many jobs the action would touch and, when any, the
 * --finished-before that keeps the action to them (the dry run's bound, as an ISO time the
 * flag reads back exactly), so that jobs failing after the count are not taken unseen.
 */
export function countedText(counted: { count: number; finishedBefore: Date | null }, done: 'retried' | 'deleted', verb: 'retry' | 'delete'): string {
  const jobs = `${counted.count} job${counted.count === 1 ? '' : 's'}`;
  if (counted.count === 0 || !counted.finishedBefore) return `${jobs} would be ${done}`;
  const bound = counted.finishedBefore.toISOString();
  return `${jobs} would be ${done}; to ${verb} ${counted.count === 1 ? 'it' : 'these'} and none that finish later, add --finished-before ${bound}`;
}

/**
 * `text` as one shell word a POSIX shell reads back exactly: as it is when it holds only
 * characters no shell treats specially, else in single quotes (a ' inside as '\''), or, when
 * it holds a control character (a line break, a carriage return or an ESC in a worker's error,
 * which names its dead-letter group), in $'…' with each control character as its escape
 * (`$'HTTP 503\r'`; bash, zsh, ksh, BusyBox sh and POSIX.1-2024 sh read it): inside '…' it would
 * be printed raw, acted on by the terminal, and lost from a copy. Used for the commands the CLI
 * prints for copying (`dlq`'s retry and list of a group, the check after a timed-out write),
 * so that a copied one names exactly what was meant.
 */
export function shellWord(text: string): string {
  if (/^[A-Za-z0-9_.,:/@%+=-]+$/.test(text)) return text;
  // search, not test: it ignores the g flag's lastIndex.
  if (text.search(CONTROL_CHARS_AND_LF) >= 0) return `$'${text.replace(/[\\']/g, (c) => `\\${c}`).replace(CONTROL_CHARS_AND_LF, controlEscape)}'`;
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** Children listed by `evora get` before "and N more". */
const CHILDREN_SHOWN = 10;

/**
 * One job, a field per line (`evora get`), with the ids of its direct children (GetJob's
 * dependents). GetJob lists at most MAX_DEPENDENTS: a full list may stand for more children,
 * so its count is "at least", never a number the job may exceed (1,500 children were "and 990 more").
 */
export function jobDetails(job: Job, dependents: readonly string[] = []): string {
  const more = dependents.length - CHILDREN_SHOWN;
  const children =
    dependents.length === 0
      ? '-'
      : dependents.slice(0, CHILDREN_SHOWN).join(', ') + (more > 0 ? `, and ${dependents.length >= MAX_DEPENDENTS ? 'at least ' : ''}${more} more` : '');
  return fields([
    ['id', job.id],
    ['queue', job.queue],
    ['type', job.type],
    ['state', job.state + (job.cancelRequested && job.state === 'RUNNING' ? ' (cancel requested)' : '')],
    ['attempt', `${job.attempt} of ${job.maxAttempts}`],
    ['priority', String(job.priority)],
    ['run at', time(job.runAt)],
    ['created', time(job.createdAt)],
    ['started', time(job.startedAt)],
    ['finished', time(job.finishedAt)],
    ['lease until', time(job.leaseExpiresAt)],
    ['worker', job.workerId ?? '-'],
    ['idempotency key', job.idempotencyKey ?? '-'],
    ['concurrency key', job.concurrencyKey ?? '-'],
    ['depends on', job.dependsOn.length > 0 ? job.dependsOn.join(', ') : '-'],
    ['children', children],
    ['last error', job.lastError ?? '-'],
    ['progress', job.progress ? progressText(job.progress) : '-'],
    ['payload', JSON.stringify(job.payload)],
    ['result', job.result ? JSON.stringify(job.result) : '-'],
  ]);
}

/** A progress report on one line: `40% (attempt 2, 2026-11-26 10:00:00) copying`. */
function progressText(p: JobProgress): string {
  const amount = p.percent !== null ? `${p.percent}%` : p.done !== null ? `${p.done}/${p.total ?? '?'}` : '-';
  return `${amount} (attempt ${p.attempt}, ${time(p.reportedAt)})${p.message ? ` ${oneLine(p.message, 80)}` : ''}`;
}

/** A job's attempts, one line each, oldest first (`evora get`); a long error is cut to one short line. */
export function attemptTable(attempts: JobAttempt[]): string {
  if (attempts.length === 0) return 'attempts: none yet';
  return table(
    ['ATTEMPT', 'OUTCOME', 'WORKER', 'STARTED', 'ENDED', 'ERROR'],
    attempts.map((a) => [
      String(a.attempt),
      a.outcome,
      a.workerId ?? '-',
      time(a.startedAt),
      time(a.finishedAt),
      a.error ? oneLine(a.error, 60) : '-',
    ]),
  );
}

/** Jobs, one line each (`evora list`); a long last error is cut to one short line. */
export function jobTable(jobs: Job[]): string {
  return table(
    ['ID', 'QUEUE', 'TYPE', 'STATE', 'ATTEMPT', 'PRIO', 'RUN AT', 'CREATED', 'LAST ERROR'],
    jobs.map((j) => [
      j.id,
      j.queue,
      j.type,
      j.state,
      `${j.attempt}/${j.maxAttempts}`,
      String(j.priority),
      time(j.runAt),
      time(j.createdAt),
      j.lastError ? oneLine(j.lastError, 60) : '-',
    ]),
  );
}

function backoffText(q: Queue): string {
  const b = q.backoff;
  return `${b.kind} ${duration(b.baseSeconds)}..${duration(b.capSeconds)}${b.jitter ? ` ±${Math.round(b.jitter * 100)}%` : ''}`;
}

/** A retention in seconds as shown: `7d`, or `forever` for 0. */
function retentionText(seconds: number): string {
  return seconds === 0 ? 'forever' : duration(seconds);
}


/** Queues and their settings, one line each (`evora queues`); a queue that deletes its jobs at completion keeps completed ones "deleted". */
export function queueTable(queues: Queue[]): string {
  return table(
    ['NAME', 'STATUS', 'MAX ATTEMPTS', 'LEASE', 'BACKOFF', 'MAX CONCURRENCY', 'KEEP COMPLETED/CANCELLED/DLQ'],
    queues.map((q) => [
      q.name,
      q.paused ? 'paused' : 'active',
      String(q.maxAttempts),
      duration(q.leaseSeconds),
      backoffText(q),
      q.maxConcurrency === 0 ? 'unlimited' : String(q.maxConcurrency),
      [q.deleteOnComplete ? 'deleted' : retentionText(q.completedRetentionSeconds), ...[q.cancelledRetentionSeconds, q.dlqRetentionSeconds].map(retentionText)].join('/'),
    ]),
  );
}

const ms = (v: number) => (v === 0 ? '-' : v < 10 ? `${v.toFixed(1)}ms` : `${Math.round(v)}ms`);
const rate = (v: number) => (v === 0 ? '0' : v < 10 ? v.toFixed(2) : String(Math.round(v)));

/** One line per queue: counts, throughput, latency, failure rate, workers. */
export function statsTable(stats: QueueStats[]): string {
  return table(
    ['QUEUE', 'PENDING', 'RUNNING', 'COMPLETED', 'DLQ', 'CANCELLED', 'JOBS/S 1M', 'WAIT P50/P99', 'RUN P50/P99', 'FAIL %', 'WORKERS'],
    stats.map((s) => [
      s.queue,
      String(s.counts.PENDING),
      String(s.counts.RUNNING),
      String(s.counts.COMPLETED),
      String(s.counts.DLQ),
      String(s.counts.CANCELLED),
      rate(s.throughput.last1m),
      `${ms(s.wait.p50Ms)}/${ms(s.wait.p99Ms)}`,
      `${ms(s.run.p50Ms)}/${ms(s.run.p99Ms)}`,
      (s.failureRate * 100).toFixed(1),
      `${s.connectedWorkers} (${s.freeSlots} free)`,
    ]),
  );
}

/** All of one queue's stats. */
export function statsDetails(s: QueueStats): string {
  return fields([
    ['queue', s.queue],
    ['pending / running', `${s.counts.PENDING} / ${s.counts.RUNNING}`],
    ['waiting (for parents)', String(s.counts.WAITING)],
    ['completed / dlq / cancelled', `${s.counts.COMPLETED} / ${s.counts.DLQ} / ${s.counts.CANCELLED}`],
    ['jobs/s (1m, 5m, 60m)', `${rate(s.throughput.last1m)}, ${rate(s.throughput.last5m)}, ${rate(s.throughput.last60m)}`],
    ['wait p50/p95/p99', `${ms(s.wait.p50Ms)} / ${ms(s.wait.p95Ms)} / ${ms(s.wait.p99Ms)}`],
    ['run p50/p95/p99', `${ms(s.run.p50Ms)} / ${ms(s.run.p95Ms)} / ${ms(s.run.p99Ms)}`],
    ['last 60m', `${s.submitted60m} submitted, ${s.completed60m} completed, ${s.failed60m} failed, ${s.deadLettered60m} dead-lettered`],
    ['failure rate', `${(s.failureRate * 100).toFixed(1)}%`],
    ['workers (all servers)', `${s.connectedWorkers}, ${s.freeSlots} free slots`],
    ['events not yet counted', `${s.outboxLagEstimated ? 'about ' : ''}${s.outboxLagEvents}`],
  ]);
}

/** One queue's settings, a field per line (`evora queue get`, `evora queue set`). */
export function queueDetails(q: Queue): string {
  return fields([
    ['name', q.name],
    ['status', q.paused ? 'paused' : 'active'],
    ['max attempts', String(q.maxAttempts)],
    ['lease', duration(q.leaseSeconds)],
    ['backoff', backoffText(q)],
    ['max concurrency', q.maxConcurrency === 0 ? 'unlimited' : String(q.maxConcurrency)],
    ['max per key', q.maxConcurrencyPerKey === 0 ? 'unlimited' : String(q.maxConcurrencyPerKey)],
    ['rate limit', rateText(q)],
    [
      'keep completed',
      q.deleteOnComplete
        ? `no: deleted at completion (those with dependents: ${retentionText(q.completedRetentionSeconds)})`
        : retentionText(q.completedRetentionSeconds),
    ],
    ['keep cancelled', retentionText(q.cancelledRetentionSeconds)],
    ['keep dlq', retentionText(q.dlqRetentionSeconds)],
    ['attempt timeout', q.attemptTimeoutSeconds === 0 ? 'none' : duration(q.attemptTimeoutSeconds)],
    ['created', time(q.createdAt)],
    ['updated', time(q.updatedAt)],
  ]);
}

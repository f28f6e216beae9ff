import { EvoraClient, type QueueStats } from '../../src/sdk/index.js';
import { CHAOS_QUEUES, type ChaosJob } from './jobs.js';
import { adminQuery } from './postgres.js';

/**
 * The verdict of a chaos run, read from the database (jobs, the outbox and the recent
 * events the telemetry keeps) and from the servers' GetQueueStats: never from the
 * workers' word.
 *
 *   lost            acknowledged keys with no job row, or whose acknowledged job id has no row
 *                   (with --delete-on-complete: no row and no `completed` event)
 *   duplicates      keys with more than one row, keys acknowledged with two different job
 *                   ids, and rows that no planned key explains
 *   completed_twice jobs with more than one `completed` event
 *   stale_results   COMPLETED jobs whose stored result is not from the lease the job holds
 *                   (its token, attempt or id differ): a completion under an older lease
 *                   was accepted, e.g. a zombie's
 *   not_terminal    acknowledged jobs not COMPLETED or DLQ
 *
 * With --delete-on-complete a completed job has no row: it counts as COMPLETED by its
 * `completed` event (in the counts the stats are compared with too), and its result cannot
 * be checked (stale_results covers the rows kept). Two more figures, not failures:
 *   deleted         jobs completed and deleted
 *   resubmitted     jobs that ran and were deleted while their submit's answer was lost:
 *                   the retried submit found the key free and made a new job, as
 *                   docs/api.md ("Deleting jobs at completion") says it does
 *   dlq             jobs in the DLQ / doomed jobs planned (exact: the very same jobs)
 *   stats           every server's GetQueueStats equals the database: counts by state, and
 *                   submitted / completed / failed / dead-lettered over 60 minutes equal the
 *                   events; no outbox lag; every job has one `submitted` event and every
 *                   COMPLETED job one `completed` event
 */
export interface Verdict {
  lost: number;
  duplicates: number;
  completedTwice: number;
  staleResults: number;
  notTerminal: number;
  dlq: number;
  dlqPlanned: number;
  dlqExact: boolean;
  statsExact: boolean;
  /** Why stats are not exact (empty when they are). */
  statsMismatches: string[];
  /** With --delete-on-complete: jobs completed and deleted, and those of them never acknowledged (see above). */
  deleted: number;
  resubmitted: number;
  /** A few examples of each problem, for the summary file. */
  examples: Record<string, unknown[]>;
}

interface JobRow {
  id: string;
  idempotency_key: string | null;
  queue: string;
  type: string;
  state: string;
  attempt: number;
  lease_token: string | null;
  result: { jobId?: string; attempt?: number; token?: string } | null;
}

/** Per job, the number of events of each kind and the job's queue. */
type EventCounts = Map<string, { kinds: Record<string, number>; queue: string }>;

/** Per job, the number of events of each kind (outbox rows and projected copies, each once). */
async function eventCounts(url: string): Promise<EventCounts> {
  const rows = await adminQuery<{ job_id: string; queue: string; kind: string; n: number }>(url, `
    SELECT u.job_id, min(u.queue) AS queue, u.kind::text AS kind, count(*)::int AS n
    FROM (SELECT outbox_id AS id, job_ids, queues, kinds FROM evora.telemetry_recent_events
          UNION ALL
          SELECT e.id, e.job_ids, e.queues, e.kinds FROM evora.job_events e
          WHERE NOT EXISTS (SELECT 1 FROM evora.telemetry_recent_events r WHERE r.outbox_id = e.id)) ev,
         unnest(ev.job_ids, ev.queues, ev.kinds) AS u(job_id, queue, kind)
    GROUP BY 1, 3`);
  const out: EventCounts = new Map();
  for (const r of rows) {
    const m = out.get(r.job_id) ?? { kinds: {}, queue: r.queue };
    m.kinds[r.kind] = r.n;
    out.set(r.job_id, m);
  }
  return out;
}

/**
 * Waits until every acknowledged job is terminal (or the timeout); returns how many are not.
 * With `deleteOnComplete` a completed job has no row: it waits until no row is left
 * unfinished (whether every acknowledged job has a row or an event is the verdict's to say).
 */
export async function settle(url: string, expected: number, timeoutMs: number, deleteOnComplete: boolean): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rows = await adminQuery<{ terminal: number; unfinished: number }>(url,
      `SELECT count(*) FILTER (WHERE state IN ('COMPLETED', 'DLQ'))::int AS terminal,
              count(*) FILTER (WHERE state NOT IN ('COMPLETED', 'DLQ'))::int AS unfinished FROM evora.jobs`);
    const terminal = deleteOnComplete ? expected - (rows[0]?.unfinished ?? 0) : (rows[0]?.terminal ?? 0);
    if (terminal >= expected || Date.now() > deadline) return expected - terminal;
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** Everything the line reports, from the database and the servers. */
export async function verdict(opts: {
  url: string;
  plan: ChaosJob[];
  acked: Map<string, Set<string>>;
  serverAddresses: string[];
  /** When the run started: the 60-minute stats only cover runs shorter than that. */
  runStartedAt: number;
  statsTimeoutMs: number;
  deleteOnComplete: boolean;
}): Promise<Verdict> {
  const { url, plan, acked } = opts;
  const examples: Record<string, unknown[]> = {};
  const example = (what: string, item: unknown) => {
    const list = (examples[what] ??= []);
    if (list.length < 5) list.push(item);
  };
  const jobs = await adminQuery<JobRow>(url,
    `SELECT id, idempotency_key, queue, type, state::text AS state, attempt, lease_token, result FROM evora.jobs`, [], 120_000);
  const byId = new Map(jobs.map((j) => [j.id, j]));
  const byKey = new Map<string, JobRow[]>();
  for (const j of jobs) if (j.idempotency_key) byKey.set(j.idempotency_key, [...(byKey.get(j.idempotency_key) ?? []), j]);
  const planned = new Map(plan.map((p) => [p.key, p]));
  const events = await eventCounts(url);
  /** Completed and deleted (with --delete-on-complete): no row, a `completed` event. */
  const deletedIds = new Set(
    opts.deleteOnComplete ? [...events].filter(([id, e]) => !byId.has(id) && (e.kinds.completed ?? 0) > 0).map(([id]) => id) : [],
  );

  let lost = 0;
  let duplicates = 0;
  let notTerminal = 0;
  const ackedIds = new Set<string>();
  for (const [key, ids] of acked) {
    for (const id of ids) ackedIds.add(id);
    if ([...ids].some((id) => !byId.has(id) && !deletedIds.has(id))) {
      lost++;
      example('lost', { key, ackedIds: [...ids] });
      continue;
    }
    if (ids.size > 1) {
      duplicates++;
      example('duplicates', { key, ackedIds: [...ids] });
    }
    const row = byId.get([...ids][0]!);
    if (row && row.state !== 'COMPLETED' && row.state !== 'DLQ') {
      notTerminal++;
      example('not_terminal', { key, id: row.id, state: row.state, attempt: row.attempt });
    }
  }
  for (const [key, rows] of byKey) {
    if (rows.length > 1) {
      duplicates += rows.length - 1;
      example('duplicates', { key, rows: rows.map((r) => r.id) });
    }
    if (!planned.has(key)) {
      duplicates += rows.length;
      example('duplicates', { key, unplanned: true });
    }
  }
  const keyless = jobs.filter((j) => !j.idempotency_key).length;
  duplicates += keyless;
  if (keyless) example('duplicates', { keyless });

  let completedTwice = 0;
  let staleResults = 0;
  let missingEvents = 0;
  // Every job that ever was, by its events: rows and deleted ones alike.
  for (const [id, e] of events) {
    if ((e.kinds.completed ?? 0) > 1) {
      completedTwice++;
      example('completed_twice', { id, events: e.kinds });
    }
  }
  for (const id of deletedIds) if ((events.get(id)!.kinds.submitted ?? 0) !== 1) missingEvents++;
  const resubmitted = [...deletedIds].filter((id) => !ackedIds.has(id)).length;
  for (const j of jobs) {
    const ev = events.get(j.id)?.kinds ?? {};
    if (j.state === 'COMPLETED') {
      const r = j.result;
      if (!r || r.jobId !== j.id || r.attempt !== j.attempt || r.token !== j.lease_token) {
        staleResults++;
        example('stale_results', { id: j.id, attempt: j.attempt, leaseToken: j.lease_token, result: r });
      }
      if ((ev.completed ?? 0) === 0) missingEvents++;
    }
    if ((ev.submitted ?? 0) !== 1) missingEvents++;
  }

  const doomedKeys = new Set(plan.filter((p) => p.kind === 'doomed').map((p) => p.key));
  const dlqRows = jobs.filter((j) => j.state === 'DLQ');
  const dlqExact = dlqRows.length === doomedKeys.size && dlqRows.every((j) => j.idempotency_key && doomedKeys.has(j.idempotency_key));
  if (!dlqExact) example('dlq', { inDlq: dlqRows.slice(0, 5).map((j) => [j.idempotency_key, j.type]) });

  const statsMismatches: string[] = [];
  if (missingEvents) statsMismatches.push(`${missingEvents} jobs lack their submitted or completed event`);
  statsMismatches.push(...(await statsCompare(opts, jobs, deletedIds, events)));

  return {
    lost,
    duplicates,
    completedTwice,
    staleResults,
    notTerminal,
    dlq: dlqRows.length,
    dlqPlanned: doomedKeys.size,
    dlqExact,
    statsExact: statsMismatches.length === 0,
    statsMismatches,
    deleted: deletedIds.size,
    resubmitted,
    examples,
  };
}

/**
 * Every server's GetQueueStats against the database. The telemetry is eventually
 * consistent, so it is asked again (until the timeout) while it differs; the last
 * difference is the verdict.
 */
async function statsCompare(
  opts: { serverAddresses: string[]; runStartedAt: number; statsTimeoutMs: number },
  jobs: JobRow[],
  deletedIds: Set<string>,
  events: EventCounts,
): Promise<string[]> {
  const expected = new Map<string, { counts: Record<string, number>; submitted: number; completed: number; failed: number; dead: number }>();
  for (const q of CHAOS_QUEUES) {
    expected.set(q, { counts: { PENDING: 0, RUNNING: 0, COMPLETED: 0, DLQ: 0, CANCELLED: 0 }, submitted: 0, completed: 0, failed: 0, dead: 0 });
  }
  // A deleted job counts as COMPLETED, as its events say it is.
  const everyJob = [...jobs.map((j) => ({ id: j.id, queue: j.queue, state: j.state })),
    ...[...deletedIds].map((id) => ({ id, queue: events.get(id)!.queue, state: 'COMPLETED' }))];
  for (const j of everyJob) {
    const e = expected.get(j.queue);
    if (!e) continue;
    e.counts[j.state] = (e.counts[j.state] ?? 0) + 1;
    const ev = events.get(j.id)?.kinds ?? {};
    e.submitted += ev.submitted ?? 0;
    e.completed += ev.completed ?? 0;
    e.failed += (ev.failed_retrying ?? 0) + (ev.lease_expired ?? 0) + (ev.dead_lettered ?? 0);
    e.dead += ev.dead_lettered ?? 0;
  }
  const windowOk = Date.now() - opts.runStartedAt < 55 * 60_000;
  const deadline = Date.now() + opts.statsTimeoutMs;
  let last: string[] = [];
  for (;;) {
    last = [];
    for (const address of opts.serverAddresses) {
      const client = new EvoraClient({ address, deadlineMs: 5000 });
      try {
        for (const q of CHAOS_QUEUES) {
          const s: QueueStats = await client.queueStats(q);
          const e = expected.get(q)!;
          const diff = (what: string, got: number, want: number) => {
            if (got !== want) last.push(`${address} ${q} ${what}: stats ${got}, database ${want}`);
          };
          for (const state of Object.keys(e.counts)) diff(`count ${state}`, s.counts[state as keyof QueueStats['counts']] ?? 0, e.counts[state]!);
          diff('outbox lag', s.outboxLagEvents, 0);
          if (windowOk) {
            diff('submitted60m', s.submitted60m, e.submitted);
            diff('completed60m', s.completed60m, e.completed);
            diff('failed60m', s.failed60m, e.failed);
            diff('deadLettered60m', s.deadLettered60m, e.dead);
          }
        }
      } catch (err) {
        last.push(`${address}: GetQueueStats failed: ${(err as Error).message}`);
      } finally {
        client.close();
      }
    }
    if (last.length === 0 || Date.now() > deadline) return last;
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/**
 * Why a run did not settle: the jobs still not terminal and the transactions open for
 * long (from the database), each
 * server's connected workers and free slots per queue (GetQueueStats), and each worker's
 * own view of its slots (its last WorkerStats).
 */
export async function stuckDiagnostics(url: string, serverAddresses: string[], workerStats: Map<string, object>): Promise<object> {
  const stuckJobs = await adminQuery(url,
    `SELECT id, queue, type, state::text AS state, attempt, run_at, locked_until, worker_id FROM evora.jobs
     WHERE state NOT IN ('COMPLETED', 'DLQ') ORDER BY id LIMIT 10`);
  // A transaction left open holds its row locks, and claims skip locked rows (SKIP LOCKED).
  const openTransactions = await adminQuery(url,
    `SELECT pid, application_name, state, now() - xact_start AS open_for, left(query, 200) AS last_query
     FROM pg_stat_activity WHERE xact_start < now() - interval '5 seconds' AND backend_type = 'client backend'
       AND application_name NOT LIKE 'chaos%'`);
  const servers: Record<string, unknown> = {};
  for (const address of serverAddresses) {
    const client = new EvoraClient({ address, deadlineMs: 5000 });
    try {
      const stats = await Promise.all(CHAOS_QUEUES.map((q) => client.queueStats(q)));
      servers[address] = stats.map((s) => ({ queue: s.queue, workers: s.connectedWorkers, freeSlots: s.freeSlots }));
    } catch (err) {
      servers[address] = `GetQueueStats failed: ${(err as Error).message}`;
    } finally {
      client.close();
    }
  }
  return { stuckJobs, openTransactions, servers, workers: Object.fromEntries(workerStats) };
}

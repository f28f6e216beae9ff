// Over 400 lines on purpose: the three submit paths (plain, hand-off, dependency graph) share
// their replay lookup, idempotency rules and retry loop here; apart they would drift.
import type pg from 'pg';
import type { StorePool } from './pool.js';
import { EvoraError, alreadyExists, failedPrecondition, invalidArgument, notFound, unavailable } from '../domain/errors.js';
import { uuidv7 } from '../domain/ids.js';
import type { JobState, JobSubmitIds, JobSubmitInput, JobSubmitResult } from '../domain/job.js';
import { JOB_COLUMNS, jobFromRow, type JobRow } from './rows.js';
import { inTransaction, queryConfig, statement, type PgTypes } from './statements.js';

/**
 * Submits: producers' writes. Job ids are made here (UUIDv7) so a batch knows which rows it
 * created; rows the insert skipped for an idempotency key are replays, looked up and
 * compared in a second statement (docs/store.md, "Idempotent submits").
 */

interface JobInsertManyParams {
  ids: string[];
  queues: string[];
  types: string[];
  payloads: string[];
  priorities: number[];
  runAts: (Date | null)[];
  idempotencyKeys: (string | null)[];
  maxAttempts: (number | null)[];
  policies: (string | null)[];
  now: Date | null;
}
/** The parameters of both insert statements (job-insert-many.sql and its ids-only twin). */
const JOB_INSERT_MANY_PARAMS: PgTypes<JobInsertManyParams> = {
  ids: 'uuid[]',
  queues: 'text[]',
  types: 'text[]',
  payloads: 'jsonb[]',
  priorities: 'int4[]',
  runAts: 'timestamptz[]',
  idempotencyKeys: 'text[]',
  maxAttempts: 'int4[]',
  policies: 'jsonb[]',
  now: 'timestamptz',
};
const jobInsertManySql = statement<JobInsertManyParams, JobRow>('job-insert-many', JOB_INSERT_MANY_PARAMS, JOB_COLUMNS, { prepared: true });

const jobInsertManyIdsSql = statement<JobInsertManyParams, { id: string }>(
  'job-insert-many-ids',
  JOB_INSERT_MANY_PARAMS,
  { id: 'uuid' },
  { prepared: true },
);

interface JobInsertHandoffParams {
  id: string;
  queue: string;
  type: string;
  payload: string;
  priority: number;
  runAt: Date | null;
  idempotencyKey: string | null;
  maxAttempts: number | null;
  policy: string | null;
  now: Date | null;
  handoffWorkerId: string;
}
const jobInsertHandoffSql = statement<JobInsertHandoffParams, JobRow>(
  'job-insert-handoff',
  {
    id: 'uuid',
    queue: 'text',
    type: 'text',
    payload: 'jsonb',
    priority: 'int4',
    runAt: 'timestamptz',
    idempotencyKey: 'text',
    maxAttempts: 'int4',
    policy: 'jsonb',
    now: 'timestamptz',
    handoffWorkerId: 'text',
  },
  JOB_COLUMNS,
  { prepared: true },
);

interface JobFindByKeysParams {
  queues: string[];
  idempotencyKeys: (string | null)[];
  types: string[];
  payloads: string[];
  priorities: number[];
  runAts: (Date | null)[];
  maxAttempts: (number | null)[];
  policies: (string | null)[];
}
type JobFoundRow = JobRow & { difference: string | null; key_index: number };
const jobFindByKeysSql = statement<JobFindByKeysParams, JobFoundRow>(
  'job-find-by-keys',
  {
    queues: 'text[]',
    idempotencyKeys: 'text[]',
    types: 'text[]',
    payloads: 'jsonb[]',
    priorities: 'int4[]',
    runAts: 'timestamptz[]',
    maxAttempts: 'int4[]',
    policies: 'jsonb[]',
  },
  { ...JOB_COLUMNS, difference: 'text', key_index: 'int4' },
);

interface JobInsertGraphParams extends JobInsertManyParams {
  states: JobState[];
  parentIds: (string | null)[];
  hasDependents: boolean[];
}
const jobInsertGraphSql = statement<JobInsertGraphParams, JobRow>(
  'job-insert-graph',
  {
    ...JOB_INSERT_MANY_PARAMS,
    states: 'evora.job_state[]',
    parentIds: 'jsonb[]',
    hasDependents: 'bool[]',
  },
  JOB_COLUMNS,
);

const jobParentsLockSql = statement<{ ids: string[] }, { id: string; state: JobState }>(
  'job-parents-lock',
  { ids: 'uuid[]' },
  { id: 'uuid', state: 'evora.job_state' },
);

const PG_NOT_NULL_VIOLATION = '23502';
/** invalid_text_representation and untranslatable_character: jsonb refused a payload_json. */
const PG_BAD_JSON = new Set(['22P02', '22P05']);
/** A deadlock (tried again; the parent locks are NOWAIT, so none is expected from them). */
const PG_DEADLOCK = '40P01';
/** lock_not_available: a NOWAIT lock found the row held (job-parents-lock.sql). */
const PG_LOCK_NOT_AVAILABLE = '55P03';
/** How long a dependency submit keeps trying while its parents are held by other writes. */
const PARENT_BUSY_BUDGET_MS = 5_000;

function pgCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

/**
 * A job's own policy as the submit statements take it (0007_job_policy.sql), or null for
 * none. Always the same keys, unset ones null: the idempotency comparison compares this
 * JSON as it is.
 */
function policyJson(j: JobSubmitInput): string | null {
  const b = j.backoff ?? null;
  const timeout = j.timeoutSeconds ?? null;
  const concurrencyKey = j.concurrencyKey || null;
  const dependsOn = hasDependencies(j)
    ? { ids: [...new Set(j.dependsOn ?? [])].sort(), refs: [...new Set(j.dependsOnRefs ?? [])].sort() }
    : null;
  if (b === null && timeout === null && concurrencyKey === null && dependsOn === null) return null;
  return JSON.stringify({
    backoff: b === null ? null : { kind: b.kind ?? null, base: b.baseSeconds ?? null, cap: b.capSeconds ?? null, jitter: b.jitter ?? null },
    timeout,
    // The job's concurrency key rides here too (0009_concurrency_keys.sql): the insert reads
    // it into its column and evora.job_submitted_fields records it for the comparison.
    concurrency_key: concurrencyKey,
    // The parents as submitted (0011_dependencies.sql), for the comparison only; absent
    // (not null) for a job without, so other jobs' policy JSON is what it was.
    ...(dependsOn ? { depends_on: dependsOn } : {}),
  });
}

/** A job's payload as the submit statements take it: the text as sent, or the object as JSON. */
function payloadText(j: JobSubmitInput): string {
  return j.payloadJson ?? JSON.stringify(j.payload ?? {});
}

/**
 * INVALID_ARGUMENT for a payload_json that PostgreSQL refused as jsonb (naming the first
 * job whose text JSON.parse refuses too, when there is one), else null: not that error.
 */
function badPayloadJson(err: unknown, jobs: JobSubmitInput[]): EvoraError | null {
  const code = pgCode(err);
  if (code === undefined || !PG_BAD_JSON.has(code) || !jobs.some((j) => j.payloadJson != null)) return null;
  const i = jobs.findIndex((j) => {
    if (j.payloadJson == null) return false;
    try {
      JSON.parse(j.payloadJson);
      return false;
    } catch {
      return true;
    }
  });
  const which = i >= 0 && jobs.length > 1 ? `jobs[${i}].payload_json` : 'payload_json';
  return invalidArgument(`${which} is not valid JSON for PostgreSQL: ${(err as Error).message}`);
}

/** Whether a job names parents (depends_on or depends_on_refs). */
function hasDependencies(j: JobSubmitInput): boolean {
  return (j.dependsOn?.length ?? 0) > 0 || (j.dependsOnRefs?.length ?? 0) > 0;
}

/** Internal: a submit attempt that lost a race and should simply run again. */
class RetrySubmit extends Error {}

/**
 * The jobs of a batch whose (queue, idempotency key) an earlier job of the same batch names,
 * each mapped to that earlier job's index. They are not inserted: each is answered as a
 * replay of the first (created=false, or ALREADY_EXISTS when a field differs), so the first
 * is the one created, whatever order the insert happens to take its rows in.
 */
function batchRepeats(jobs: readonly JobSubmitInput[]): Map<number, number> {
  const repeats = new Map<number, number>();
  const first = new Map<string, number>();
  jobs.forEach((j, i) => {
    if (!j.idempotencyKey) return;
    const key = replayKey(j);
    const earlier = first.get(key);
    if (earlier === undefined) first.set(key, i);
    else repeats.set(i, earlier);
  });
  return repeats;
}

/**
 * Internal: job-parents-lock.sql found a parent held (its NOWAIT lock failed). Thrown in
 * place of the driver's error, whose SQLSTATE (55P03) the pool would otherwise log and
 * answer as a lock timeout, so that the graph submit tries again quietly; the driver's error
 * is kept in `lockError`, not as the cause, for the same reason.
 */
class ParentsBusy extends Error {
  constructor(readonly lockError: unknown) {
    super('a parent job is locked by another write');
  }
}

/** Locks and reads the existing parents (job-parents-lock.sql); ParentsBusy if one is held. */
async function parentsLock(client: pg.ClientBase, ids: string[]): Promise<pg.QueryResult> {
  try {
    return await client.query(queryConfig(jobParentsLockSql, { ids }));
  } catch (err) {
    if (pgCode(err) === PG_LOCK_NOT_AVAILABLE) throw new ParentsBusy(err);
    throw err;
  }
}

/**
 * Submits jobs, all or nothing; with `handoffWorkerId` (one job only) the job may be leased
 * to that worker in the same statement (job-insert-handoff.sql). Replays of an idempotency
 * key come back with created=false, or are refused (ALREADY_EXISTS, naming the first field)
 * when any submitted field differs (evora.job_submit_difference). Results in input order.
 */
export async function jobsSubmit(
  pool: StorePool,
  jobs: JobSubmitInput[],
  now: Date | null,
  handoffWorkerId: string | null,
): Promise<JobSubmitResult[]> {
  if (jobs.length === 0) return [];
  if (jobs.some(hasDependencies)) return jobsSubmitGraph(pool, jobs, now);
  return submitWithRetries(pool, jobs, now, handoffWorkerId, jobResult);
}

/**
 * jobsSubmit without a hand-off, answering with ids only: the insert returns only the ids
 * (job-insert-many-ids.sql), so no job row is read, parsed or converted. Same guarantees.
 */
export async function jobsSubmitIds(pool: StorePool, jobs: JobSubmitInput[], now: Date | null): Promise<JobSubmitIds> {
  if (jobs.length === 0) return { ids: [], created: [] };
  if (jobs.some(hasDependencies)) {
    const results = await jobsSubmitGraph(pool, jobs, now);
    return { ids: results.map((r) => r.job.id), created: results.map((r) => r.created) };
  }
  const results = await submitWithRetries(pool, jobs, now, null, idResult);
  return { ids: results.map((r) => r.id), created: results.map((r) => r.created) };
}

/**
 * How a submit answers each job, from the row the insert or the replay lookup returned;
 * `idsOnly`: the insert returns ids only (job-insert-many-ids.sql), so `make` reads only id.
 */
interface ResultShape<R> {
  idsOnly: boolean;
  make(row: JobRow, created: boolean): R;
}
const jobResult: ResultShape<JobSubmitResult> = { idsOnly: false, make: (row, created) => ({ job: jobFromRow(row), created }) };
const idResult: ResultShape<{ id: string; created: boolean }> = { idsOnly: true, make: (row, created) => ({ id: row.id, created }) };

/** The plain submit (no dependencies): one attempt, tried again when it lost a race. */
async function submitWithRetries<R>(
  pool: StorePool,
  jobs: JobSubmitInput[],
  now: Date | null,
  handoffWorkerId: string | null,
  result: ResultShape<R>,
): Promise<R[]> {
  const ids = jobs.map(() => uuidv7());
  const payloads = jobs.map(payloadText);
  const maxAttempts = jobs.map((j) => (j.maxAttempts && j.maxAttempts > 0 ? j.maxAttempts : null));
  const policies = jobs.map(policyJson);
  const job = jobs[0]!;
  // A job whose key an earlier one of the batch names is left out of the insert: submitOn
  // finds it as a replay of the one inserted (in the batch's transaction).
  const repeats = batchRepeats(jobs);
  const inserted = <T>(values: T[]): T[] => (repeats.size === 0 ? values : values.filter((_, i) => !repeats.has(i)));
  // The hand-off statement takes one job as scalars (see its file), batches take arrays.
  const insert =
    handoffWorkerId === null
      ? queryConfig(result.idsOnly ? jobInsertManyIdsSql : jobInsertManySql, {
          ids: inserted(ids),
          queues: inserted(jobs.map((j) => j.queue)),
          types: inserted(jobs.map((j) => j.type)),
          payloads: inserted(payloads),
          priorities: inserted(jobs.map((j) => j.priority ?? 0)),
          runAts: inserted(jobs.map((j) => j.runAt ?? null)),
          idempotencyKeys: inserted(jobs.map((j) => j.idempotencyKey || null)),
          maxAttempts: inserted(maxAttempts),
          policies: inserted(policies),
          now,
        })
      : queryConfig(jobInsertHandoffSql, {
          id: ids[0]!,
          queue: job.queue,
          type: job.type,
          payload: payloads[0]!,
          priority: job.priority ?? 0,
          runAt: job.runAt ?? null,
          idempotencyKey: job.idempotencyKey || null,
          maxAttempts: maxAttempts[0]!,
          policy: policies[0]!,
          now,
          handoffWorkerId,
        });
  const anyKey = jobs.some((j) => j.idempotencyKey);
  // Without keys, or with a single job, one autocommit statement is atomic by itself. A
  // batch with keys needs a transaction: a refused replay must undo the batch's inserts.
  const transactional = anyKey && jobs.length > 1;
  // One attempt on one connection of its own (a transaction's, when the batch needs one).
  const attempt = (client: pg.PoolClient): Promise<R[]> => {
    const run = () => submitOn(client, jobs, { ids, payloads, maxAttempts, policies, insert }, false, result);
    return transactional ? inTransaction(client, run) : run();
  };
  for (let tries = 1; ; tries++) {
    try {
      return await pool.withClient(attempt);
    } catch (err) {
      // Two first submits to a new queue can race on creating its row; the loser sees
      // neither row in its snapshot and leaves max_attempts NULL. Trying again sees it.
      const retryable = err instanceof RetrySubmit || pgCode(err) === PG_NOT_NULL_VIOLATION || pgCode(err) === PG_DEADLOCK;
      if (retryable && tries < 3) continue;
      if (err instanceof EvoraError) throw err; // UNAVAILABLE included (the pool classified it)
      throw badPayloadJson(err, jobs) ?? new Error(`evora: submit failed: ${(err as Error).message}`, { cause: err });
    }
  }
}

/**
 * The job that each of `keyed`'s (queue, idempotency key) already names, with the first
 * submitted field in which that item differs from it (null: identical; job-find-by-keys.sql),
 * as `keyed` is ordered (undefined: no job). By position, not by key: a batch may name one
 * key several times, and each item is compared on its own (keyed by replayKey, the last row
 * of a key answered for all of them, so an item that differed was taken as a replay).
 * `keyed[k].i` indexes the submit's prepared payloads, maxAttempts, policies.
 */
async function replaysFind(
  client: pg.ClientBase,
  keyed: { j: JobSubmitInput; i: number }[],
  p: { payloads: string[]; maxAttempts: (number | null)[]; policies: (string | null)[] },
): Promise<(JobFoundRow | undefined)[]> {
  const found = await client.query(
    queryConfig(jobFindByKeysSql, {
      queues: keyed.map(({ j }) => j.queue),
      idempotencyKeys: keyed.map(({ j }) => j.idempotencyKey ?? null),
      types: keyed.map(({ j }) => j.type),
      payloads: keyed.map(({ i }) => p.payloads[i]!),
      priorities: keyed.map(({ j }) => j.priority ?? 0),
      runAts: keyed.map(({ j }) => j.runAt ?? null),
      maxAttempts: keyed.map(({ i }) => p.maxAttempts[i]!),
      policies: keyed.map(({ i }) => p.policies[i]!),
    }),
  );
  const rows: (JobFoundRow | undefined)[] = keyed.map(() => undefined);
  for (const r of found.rows as JobFoundRow[]) rows[r.key_index] = r;
  return rows;
}

/** A job's queue and idempotency key, as one string (batchRepeats finds a key named twice by it). */
function replayKey(j: { queue: string; idempotencyKey?: string | null }): string {
  return `${j.queue}\u0000${j.idempotencyKey}`;
}

/** ALREADY_EXISTS for a replay whose submitted fields differ from the job its key names. */
function replayDiffers(j: JobSubmitInput, row: JobFoundRow): Error {
  return alreadyExists(
    `idempotency key "${j.idempotencyKey}" in queue "${j.queue}" already names job ${row.id}, submitted with a different ${row.difference}`,
  );
}

/** A submit's statements' inputs, computed once per submit. */
interface SubmitPrepared {
  ids: string[];
  payloads: string[];
  maxAttempts: (number | null)[];
  policies: (string | null)[];
  insert: pg.QueryConfig;
}

/**
 * The insert, then the lookup of the replays, on `client` (in the caller's transaction when
 * it has one). `keepDifferentReplays`: a replay whose fields differ returns the existing job
 * (created=false) instead of being refused.
 */
async function submitOn<R>(
  client: pg.ClientBase,
  jobs: JobSubmitInput[],
  p: SubmitPrepared,
  keepDifferentReplays: boolean,
  result: ResultShape<R>,
): Promise<R[]> {
  const { ids, payloads, maxAttempts, policies } = p;
  const inserted = (await client.query(p.insert)).rows as JobRow[];
  const byId = new Map(inserted.map((r) => [r.id, r]));
  const results: (R | undefined)[] = ids.map((id) => {
    const row = byId.get(id);
    return row ? result.make(row, true) : undefined;
  });
  const missing = jobs.map((j, i) => ({ j, i })).filter(({ i }) => !results[i]);
  if (missing.length > 0) {
    const found = await replaysFind(client, missing, { payloads, maxAttempts, policies });
    for (const [k, { j, i }] of missing.entries()) {
      const row = found[k];
      if (!row) throw new RetrySubmit('the conflicting job vanished');
      if (row.difference !== null && !keepDifferentReplays) throw replayDiffers(j, row);
      results[i] = result.make(row, false);
    }
  }
  return results as R[];
}

/**
 * Submits jobs, each with an idempotency key, on `client` inside the caller's transaction
 * (the scheduler's: the jobs, their events, the NOTIFY and the caller's own writes commit
 * together). A key that already names a job returns that job with created=false, even when
 * its fields differ (a schedule recreated with another payload does not fire a time twice).
 * A lost race throws; the caller's transaction rolls back and it tries again later.
 */
export async function jobsSubmitInTransaction(client: pg.ClientBase, jobs: JobSubmitInput[], now: Date | null): Promise<JobSubmitResult[]> {
  if (jobs.length === 0) return [];
  if (jobs.some((j) => !j.idempotencyKey)) throw new Error('evora: jobsSubmitInTransaction needs an idempotency key on every job');
  const ids = jobs.map(() => uuidv7());
  const payloads = jobs.map(payloadText);
  const maxAttempts = jobs.map((j) => (j.maxAttempts && j.maxAttempts > 0 ? j.maxAttempts : null));
  const policies = jobs.map(policyJson);
  const insert = queryConfig(jobInsertManySql, {
    ids,
    queues: jobs.map((j) => j.queue),
    types: jobs.map((j) => j.type),
    payloads,
    priorities: jobs.map((j) => j.priority ?? 0),
    runAts: jobs.map((j) => j.runAt ?? null),
    idempotencyKeys: jobs.map((j) => j.idempotencyKey || null),
    maxAttempts,
    policies,
    now,
  });
  return submitOn(client, jobs, { ids, payloads, maxAttempts, policies, insert }, true, jobResult);
}

/**
 * Submits a batch in which some job names parents (depends_on ids, or depends_on_refs to
 * jobs of the batch; the refs were checked by checkDependencyRefs), all or nothing, in one
 * transaction:
 *   1. replays first: a job whose (queue, idempotency key) exists keeps that job's id, so
 *      the batch's jobs that name it by ref depend on it (a field that differs: ALREADY_EXISTS);
 *   2. the existing parents are locked and marked (job-parents-lock.sql): an id that names
 *      no job is NOT_FOUND, a parent in DLQ or CANCELLED is FAILED_PRECONDITION;
 *   3. the new jobs are inserted WAITING while a parent is unfinished (or new in this
 *      batch), else PENDING (job-insert-graph.sql).
 * A key taken by a concurrent submit between 1 and 3 runs the whole attempt again.
 */
async function jobsSubmitGraph(pool: StorePool, jobs: JobSubmitInput[], now: Date | null): Promise<JobSubmitResult[]> {
  const payloads = jobs.map(payloadText);
  const maxAttempts = jobs.map((j) => (j.maxAttempts && j.maxAttempts > 0 ? j.maxAttempts : null));
  const policies = jobs.map(policyJson);
  const refIndex = new Map<string, number>();
  jobs.forEach((j, i) => j.ref && refIndex.set(j.ref, i));

  const attempt = (client: pg.PoolClient): Promise<JobSubmitResult[]> =>
    inTransaction(client, async () => {
      const results: (JobSubmitResult | undefined)[] = jobs.map(() => undefined);
      const keyed = jobs.map((j, i) => ({ j, i })).filter(({ j }) => j.idempotencyKey);
      if (keyed.length > 0) {
        const found = await replaysFind(client, keyed, { payloads, maxAttempts, policies });
        for (const [k, { j, i }] of keyed.entries()) {
          const row = found[k];
          if (!row) continue;
          if (row.difference !== null) throw replayDiffers(j, row);
          results[i] = { job: jobFromRow(row), created: false };
        }
      }
      const ids = jobs.map((_, i) => results[i]?.job.id ?? uuidv7());
      // A new job whose key an earlier new one of the batch names is that job: same id (for
      // refs), not inserted, answered as its replay below.
      const repeats = new Map([...batchRepeats(jobs)].filter(([i]) => !results[i]));
      for (const [i, earlier] of repeats) ids[i] = ids[earlier]!;
      const parents = jobs.map((j) => [
        ...new Set([...(j.dependsOn ?? []), ...(j.dependsOnRefs ?? []).map((r) => ids[refIndex.get(r)!]!)]),
      ]);
      const fresh = jobs.map((_, i) => i).filter((i) => !results[i] && !repeats.has(i));
      if (fresh.length === 0) return results as JobSubmitResult[];
      const freshIds = new Set(fresh.map((i) => ids[i]!));
      const existing = [...new Set(fresh.flatMap((i) => parents[i]!.filter((p) => !freshIds.has(p))))];
      const states = new Map<string, JobState>();
      if (existing.length > 0) {
        for (const r of (await parentsLock(client, existing)).rows as { id: string; state: JobState }[]) {
          states.set(r.id, r.state);
        }
        for (const i of fresh) {
          for (const p of parents[i]!) {
            if (freshIds.has(p)) continue;
            const state = states.get(p);
            const which = jobs.length > 1 ? `jobs[${i}].depends_on` : 'depends_on';
            if (state === undefined) throw notFound(`${which} names job ${p}, which does not exist`);
            if (state === 'DLQ' || state === 'CANCELLED') {
              throw failedPrecondition(`${which} names job ${p}, which is ${state}: retry it first, or submit without it`);
            }
          }
        }
      }
      const named = new Set(fresh.flatMap((i) => parents[i]!));
      const inserted = (
        await client.query(
          queryConfig(jobInsertGraphSql, {
            ids: fresh.map((i) => ids[i]!),
            queues: fresh.map((i) => jobs[i]!.queue),
            types: fresh.map((i) => jobs[i]!.type),
            payloads: fresh.map((i) => payloads[i]!),
            priorities: fresh.map((i) => jobs[i]!.priority ?? 0),
            runAts: fresh.map((i) => jobs[i]!.runAt ?? null),
            idempotencyKeys: fresh.map((i) => jobs[i]!.idempotencyKey || null),
            maxAttempts: fresh.map((i) => maxAttempts[i]!),
            policies: fresh.map((i) => policies[i]!),
            now,
            states: fresh.map((i) =>
              parents[i]!.some((p) => freshIds.has(p) || states.get(p) !== 'COMPLETED') ? 'WAITING' : 'PENDING',
            ),
            parentIds: fresh.map((i) => (parents[i]!.length > 0 ? JSON.stringify(parents[i]) : null)),
            hasDependents: fresh.map((i) => named.has(ids[i]!)),
          }),
        )
      ).rows as JobRow[];
      // A key a concurrent submit took after step 1: the attempt runs again (and finds it).
      if (inserted.length < fresh.length) throw new RetrySubmit('an idempotency key was taken meanwhile');
      const byId = new Map(inserted.map((r) => [r.id, r]));
      for (const i of fresh) results[i] = { job: jobFromRow(byId.get(ids[i]!)!), created: true };
      if (repeats.size > 0) {
        const keyed = [...repeats.keys()].map((i) => ({ j: jobs[i]!, i }));
        const found = await replaysFind(client, keyed, { payloads, maxAttempts, policies });
        for (const [k, { j, i }] of keyed.entries()) {
          const row = found[k]!;
          if (row.difference !== null) throw replayDiffers(j, row);
          results[i] = { job: jobFromRow(row), created: false };
        }
      }
      return results as JobSubmitResult[];
    });

  for (let tries = 0, busyTries = 0, busyMs = 0; ; ) {
    try {
      return await pool.withClient(attempt);
    } catch (err) {
      // A parent held by another transaction (job-parents-lock.sql locks NOWAIT, so that a
      // submit never waits while holding a parent): held for one statement, so try again
      // soon, for up to about PARENT_BUSY_BUDGET_MS in all.
      if (err instanceof ParentsBusy) {
        if (busyMs >= PARENT_BUSY_BUDGET_MS) {
          throw unavailable('a parent job stayed locked by other writes; try the submit again', { cause: err.lockError });
        }
        const pause = Math.min(2 ** ++busyTries, 100);
        busyMs += pause;
        await new Promise((resolve) => setTimeout(resolve, pause));
        continue;
      }
      const retryable = err instanceof RetrySubmit || pgCode(err) === PG_NOT_NULL_VIOLATION || pgCode(err) === PG_DEADLOCK;
      if (retryable && ++tries < 3) continue;
      if (err instanceof EvoraError) throw err;
      throw badPayloadJson(err, jobs) ?? new Error(`evora: submit failed: ${(err as Error).message}`, { cause: err });
    }
  }
}

import type { StorePool } from './pool.js';
import { notFound } from '../domain/errors.js';
import { uuidv7 } from '../domain/ids.js';
import type { JobSubmitInput, JobSubmitResult, JsonObject } from '../domain/job.js';
import {
  scheduleFireKey,
  scheduleFirePlan,
  scheduleTriggerKey,
  type MisfirePolicy,
  type Schedule,
  type ScheduleUpsertInput,
} from '../domain/schedule.js';
import type { AuditActor } from '../domain/audit.js';
import { ACTOR_TYPES, actorParams, auditInsertInTransaction, type ActorParams } from './audit.js';
import { jobsSubmitInTransaction } from './jobs-submit.js';
import type { PgTypes } from './statements.js';
import { inTransaction, rowOf, rowsOf, statement, type None } from './statements.js';

/**
 * Schedules (the ScheduleService API and the leader's scheduler). A fire is one
 * transaction: the due rows are locked (SKIP LOCKED), their jobs submitted through the
 * submit statement with the per-fire idempotency key (jobs, events and the wake-up NOTIFY),
 * and next_run_at / last_run_at / last_job_id moved on, all committed together.
 */

/** A row of evora.schedules, in the table's column order. */
export interface ScheduleRow {
  name: string;
  cron: string;
  timezone: string;
  queue: string;
  type: string;
  payload: JsonObject;
  priority: number;
  max_attempts: number | null;
  misfire_policy: MisfirePolicy;
  misfire_cap: number;
  paused: boolean;
  next_run_at: Date;
  last_run_at: Date | null;
  last_job_id: string | null;
  created_at: Date;
  updated_at: Date;
}

/** The columns of evora.schedules, in table order. */
export const SCHEDULE_COLUMNS: PgTypes<ScheduleRow> = {
  name: 'text',
  cron: 'text',
  timezone: 'text',
  queue: 'text',
  type: 'text',
  payload: 'jsonb',
  priority: 'int4',
  max_attempts: 'int4',
  misfire_policy: 'text',
  misfire_cap: 'int4',
  paused: 'bool',
  next_run_at: 'timestamptz',
  last_run_at: 'timestamptz',
  last_job_id: 'uuid',
  created_at: 'timestamptz',
  updated_at: 'timestamptz',
};

/** A schedule row as the domain's Schedule. */
export function scheduleFromRow(r: ScheduleRow): Schedule {
  return {
    name: r.name,
    cron: r.cron,
    timezone: r.timezone,
    queue: r.queue,
    type: r.type,
    payload: r.payload,
    priority: r.priority,
    maxAttempts: r.max_attempts,
    misfirePolicy: r.misfire_policy,
    misfireCap: r.misfire_cap,
    paused: r.paused,
    nextRunAt: r.next_run_at,
    lastRunAt: r.last_run_at,
    lastJobId: r.last_job_id,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

interface ScheduleUpsertParams extends ActorParams {
  name: string;
  cron: string;
  timezone: string;
  queue: string;
  type: string;
  payload: string;
  priority: number;
  maxAttempts: number | null;
  misfirePolicy: string;
  misfireCap: number;
  nextRunAt: Date;
  now: Date | null;
}
const scheduleUpsertSql = statement<ScheduleUpsertParams, ScheduleRow & { created: boolean }>(
  'schedule-upsert',
  {
    name: 'text',
    cron: 'text',
    timezone: 'text',
    queue: 'text',
    type: 'text',
    payload: 'jsonb',
    priority: 'int4',
    maxAttempts: 'int4',
    misfirePolicy: 'text',
    misfireCap: 'int4',
    nextRunAt: 'timestamptz',
    now: 'timestamptz',
    ...ACTOR_TYPES,
  },
  { ...SCHEDULE_COLUMNS, created: 'bool' },
);
const scheduleGetSql = statement<{ name: string }, ScheduleRow>('schedule-get', { name: 'text' }, SCHEDULE_COLUMNS);
const scheduleListSql = statement<None, ScheduleRow>('schedule-list', {}, SCHEDULE_COLUMNS);
const scheduleDeleteSql = statement<ActorParams & { name: string; now: Date | null }, { name: string }>(
  'schedule-delete',
  { name: 'text', now: 'timestamptz', ...ACTOR_TYPES },
  { name: 'text' },
);
const scheduleSetPausedSql = statement<ActorParams & { name: string; paused: boolean; nextRunAt: Date | null; now: Date | null }, ScheduleRow>(
  'schedule-set-paused',
  { name: 'text', paused: 'bool', nextRunAt: 'timestamptz', now: 'timestamptz', ...ACTOR_TYPES },
  SCHEDULE_COLUMNS,
);
const scheduleDueLockSql = statement<{ limit: number; now: Date | null }, ScheduleRow & { clock: Date }>(
  'schedule-due-lock',
  { limit: 'int4', now: 'timestamptz' },
  { ...SCHEDULE_COLUMNS, clock: 'timestamptz' },
);
const scheduleLockSql = statement<{ name: string }, ScheduleRow>('schedule-lock', { name: 'text' }, SCHEDULE_COLUMNS);
interface ScheduleAdvanceManyParams {
  names: string[];
  nextRunAts: Date[];
  lastRunAts: (Date | null)[];
  lastJobIds: (string | null)[];
}
const scheduleAdvanceManySql = statement<ScheduleAdvanceManyParams, { name: string }>(
  'schedule-advance-many',
  { names: 'text[]', nextRunAts: 'timestamptz[]', lastRunAts: 'timestamptz[]', lastJobIds: 'uuid[]' },
  { name: 'text' },
);
const scheduleNextDueSql = statement<{ now: Date | null }, { next_run_at: Date | null; clock: Date }>(
  'schedule-next-due',
  { now: 'timestamptz' },
  { next_run_at: 'timestamptz', clock: 'timestamptz' },
);

/** The job a schedule submits, with the given idempotency key. */
function scheduleJob(s: Schedule, idempotencyKey: string): JobSubmitInput {
  return {
    queue: s.queue,
    type: s.type,
    payload: s.payload,
    priority: s.priority,
    maxAttempts: s.maxAttempts,
    idempotencyKey,
  };
}

/** Creates or replaces a schedule (Store.scheduleUpsert). */
export async function scheduleUpsert(
  pool: StorePool,
  input: ScheduleUpsertInput,
  nextRunAt: Date,
  now: Date | null,
  actor: AuditActor | undefined,
): Promise<{ schedule: Schedule; created: boolean }> {
  const row = await rowOf(pool, scheduleUpsertSql, {
    ...actorParams(actor),
    name: input.name,
    cron: input.cron,
    timezone: input.timezone,
    queue: input.queue,
    type: input.type,
    payload: JSON.stringify(input.payload),
    priority: input.priority,
    maxAttempts: input.maxAttempts,
    misfirePolicy: input.misfirePolicy,
    misfireCap: input.misfireCap,
    nextRunAt,
    now,
  });
  return { schedule: scheduleFromRow(row!), created: row!.created };
}

/** One schedule (Store.scheduleGet); NOT_FOUND when there is none. */
export async function scheduleRead(pool: StorePool, name: string): Promise<Schedule> {
  const row = await rowOf(pool, scheduleGetSql, { name });
  if (!row) throw notFound(`schedule "${name}" not found`);
  return scheduleFromRow(row);
}

/** Every schedule by name (Store.scheduleList). */
export async function schedulesList(pool: StorePool): Promise<Schedule[]> {
  return (await rowsOf(pool, scheduleListSql, {})).map(scheduleFromRow);
}

/** Deletes a schedule (Store.scheduleDelete); NOT_FOUND when there is none. */
export async function scheduleDelete(pool: StorePool, params: { name: string; now: Date | null; actor: AuditActor | undefined }): Promise<void> {
  const { name, now, actor } = params;
  const row = await rowOf(pool, scheduleDeleteSql, { name, now, ...actorParams(actor) });
  if (!row) throw notFound(`schedule "${name}" not found`);
}

/** Pauses or resumes a schedule (Store.scheduleSetPaused); NOT_FOUND when there is none. */
export async function scheduleSetPaused(
  pool: StorePool,
  params: { name: string; paused: boolean; nextRunAt: Date | null; now: Date | null; actor: AuditActor | undefined },
): Promise<Schedule> {
  const { actor, ...rest } = params;
  const row = await rowOf(pool, scheduleSetPausedSql, { ...rest, ...actorParams(actor) });
  if (!row) throw notFound(`schedule "${params.name}" not found`);
  return scheduleFromRow(row);
}

/**
 * Submits one job of a schedule now (Store.scheduleTrigger), paused or not, with the key
 * schedule:<name>:trigger:<triggerId> (a fresh UUIDv7 when none is given), and records it
 * as the schedule's last run, with the audit event `schedule.trigger` (change: the job id),
 * in one transaction. A repeated trigger id returns its job and changes nothing: the last
 * run stays what it is (a later fire or trigger), and no audit event is written.
 */
export async function scheduleTrigger(
  pool: StorePool,
  params: { name: string; triggerId: string | null; now: Date | null; actor: AuditActor | undefined },
): Promise<{ schedule: Schedule; result: JobSubmitResult }> {
  return pool.withClient((client) =>
    inTransaction(client, async () => {
      const row = await rowOf(client, scheduleLockSql, { name: params.name });
      if (!row) throw notFound(`schedule "${params.name}" not found`);
      const schedule = scheduleFromRow(row);
      const key = scheduleTriggerKey(schedule.name, params.triggerId || uuidv7());
      const [result] = await jobsSubmitInTransaction(client, [scheduleJob(schedule, key)], params.now);
      if (!result!.created) return { schedule, result: result! };
      await rowsOf(client, scheduleAdvanceManySql, {
        names: [schedule.name],
        nextRunAts: [schedule.nextRunAt],
        lastRunAts: [result!.job.createdAt],
        lastJobIds: [result!.job.id],
      });
      await auditInsertInTransaction(client, {
        actor: params.actor,
        action: 'schedule.trigger',
        target: schedule.name,
        change: { job_id: result!.job.id },
        now: params.now,
      });
      return { schedule: { ...schedule, lastRunAt: result!.job.createdAt, lastJobId: result!.job.id }, result: result! };
    }),
  );
}

/** What one scheduler pass did. */
export interface ScheduleFireResult {
  /**
   * One entry per due schedule handled: its name and queue, the fire times that got a job
   * (with the job; `created` false when the fire's job already existed), and the skipped count;
   * `error`: why its fire plan could not be made (then no jobs, and next_run_at a day on).
   */
  fired: { name: string; queue: string; jobs: { fireAt: Date; jobId: string; created: boolean }[]; skipped: number; nextRunAt: Date; error: string | null }[];
  /** The earliest next_run_at of the schedules not paused after the pass (null: none), by `clock`. */
  nextDueAt: Date | null;
  /** The clock of the pass (`now`, or the database's). */
  clock: Date;
}

/**
 * One scheduler pass (Store.scheduleFireDue): in one transaction, locks up to `limit` due
 * schedules, submits each one's jobs for the fire times its misfire policy picks
 * (domain/schedule.ts, scheduleFirePlan), and moves each one's next_run_at on; then reads
 * the earliest next_run_at. A schedule whose fire plan throws (a cron or time zone that no
 * longer parses, e.g. after a tzdata change) is moved a day on and reported with no jobs and
 * the error, so it cannot block the others.
 */
export async function scheduleFireDue(pool: StorePool, params: { limit: number; now: Date | null }): Promise<ScheduleFireResult> {
  const fired = await pool.withClient((client) =>
    inTransaction(client, async () => {
      const rows = await rowsOf(client, scheduleDueLockSql, { limit: params.limit, now: params.now });
      if (rows.length === 0) return [];
      const clock = rows[0]!.clock;
      const plans = rows.map((row) => {
        const schedule = scheduleFromRow(row);
        try {
          return { schedule, plan: scheduleFirePlan(schedule, clock), error: null };
        } catch (err) {
          const error = err instanceof Error ? err.message : String(err);
          return { schedule, plan: { fires: [], skipped: 0, nextRunAt: new Date(clock.getTime() + 86_400_000) }, error };
        }
      });
      const jobs = plans.flatMap(({ schedule, plan }) => plan.fires.map((at) => scheduleJob(schedule, scheduleFireKey(schedule.name, at))));
      const results = await jobsSubmitInTransaction(client, jobs, params.now);
      let i = 0;
      const out = plans.map(({ schedule, plan, error }) => ({
        name: schedule.name,
        queue: schedule.queue,
        jobs: plan.fires.map((fireAt) => {
          const r = results[i++]!;
          return { fireAt, jobId: r.job.id, created: r.created };
        }),
        skipped: plan.skipped,
        nextRunAt: plan.nextRunAt,
        error,
      }));
      await rowsOf(client, scheduleAdvanceManySql, {
        names: out.map((o) => o.name),
        nextRunAts: out.map((o) => o.nextRunAt),
        lastRunAts: out.map((o) => o.jobs[o.jobs.length - 1]?.fireAt ?? null),
        lastJobIds: out.map((o) => o.jobs[o.jobs.length - 1]?.jobId ?? null),
      });
      return out;
    }),
  );
  const next = await rowOf(pool, scheduleNextDueSql, { now: params.now });
  return { fired, nextDueAt: next!.next_run_at, clock: next!.clock };
}

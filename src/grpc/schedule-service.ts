import { invalidArgument } from '../domain/errors.js';
import {
  checkScheduleName,
  checkScheduleUpsert,
  checkTriggerId,
  cronNextAfter,
  scheduleTriggerKey,
  storedNextAfter,
  type MisfirePolicy,
  type Schedule,
} from '../domain/schedule.js';
import { checkJsonSize } from '../domain/validate.js';
import { MisfirePolicy as PbMisfirePolicy, ScheduleServiceService, type Schedule as PbSchedule, type ScheduleServiceServer } from '../gen/evora/v1/schedule.js';
import type { ServiceDeps } from './deps.js';
import { scheduleScopeCheck, scopeCheck, scopeFilter, storedScopeCheck } from './auth.js';
import { unary } from './unary.js';
import { auditActor } from '../domain/audit.js';

const MISFIRE_TO_PB: Record<MisfirePolicy, PbMisfirePolicy> = {
  skip: PbMisfirePolicy.MISFIRE_POLICY_SKIP,
  run_once: PbMisfirePolicy.MISFIRE_POLICY_RUN_ONCE,
  run_each: PbMisfirePolicy.MISFIRE_POLICY_RUN_EACH,
};

/** A request's misfire policy: undefined for UNSPECIFIED (the default), INVALID_ARGUMENT for a value this server does not know. */
function misfireFromPb(p: PbMisfirePolicy): MisfirePolicy | undefined {
  if (p === PbMisfirePolicy.MISFIRE_POLICY_UNSPECIFIED) return undefined;
  const found = (Object.keys(MISFIRE_TO_PB) as MisfirePolicy[]).find((k) => MISFIRE_TO_PB[k] === p);
  if (!found) throw invalidArgument(`misfire_policy ${p} is not a known policy`);
  return found;
}

/** A schedule as clients see it. */
export function scheduleToPb(s: Schedule): PbSchedule {
  return {
    name: s.name,
    cron: s.cron,
    timezone: s.timezone,
    queue: s.queue,
    type: s.type,
    payload: s.payload,
    priority: s.priority,
    maxAttempts: s.maxAttempts ?? 0,
    misfirePolicy: MISFIRE_TO_PB[s.misfirePolicy],
    misfireCap: s.misfireCap,
    paused: s.paused,
    nextRunAt: s.nextRunAt,
    lastRunAt: s.lastRunAt ?? undefined,
    lastJobId: s.lastJobId ?? '',
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  };
}

/**
 * ScheduleService: operators keep recurring schedules; the leader's scheduler
 * (src/maintenance/scheduler.ts) fires them. Next fire times for upsert and resume are
 * computed from this process's clock; a clock a little off moves a fire by as much, never
 * duplicates one (the idempotency key does not change).
 */
export function scheduleService(deps: ServiceDeps): ScheduleServiceServer {
  const { store, logger, maxPayloadBytes } = deps;
  const M = ScheduleServiceService;
  return {
    upsertSchedule: unary(deps, M.upsertSchedule.path, async (req, _call, principal) => {
      const s = req.schedule;
      if (!s) throw invalidArgument('schedule is required');
      const input = checkScheduleUpsert({
        name: s.name,
        cron: s.cron,
        timezone: s.timezone,
        queue: s.queue,
        type: s.type,
        payload: checkJsonSize('payload', s.payload, maxPayloadBytes),
        priority: s.priority,
        maxAttempts: s.maxAttempts,
        misfirePolicy: misfireFromPb(s.misfirePolicy),
        misfireCap: s.misfireCap,
      });
      // The new queue, and the queue of the schedule it replaces.
      scopeCheck(principal, M.upsertSchedule.path, [input.queue]);
      await scheduleScopeCheck(store, principal, M.upsertSchedule.path, input.name);
      // After now by the database's clock, the one the scheduler fires by: by this process's,
      // a server behind it made a new schedule fire at once for times before it existed.
      const nextRunAt = cronNextAfter(input.cron, input.timezone, await store.dbNow());
      const { schedule, created } = await store.scheduleUpsert({ ...input, nextRunAt, actor: auditActor(principal) });
      logger.info({ schedule: schedule.name, created }, 'schedule upserted');
      return { schedule: scheduleToPb(schedule), created };
    }),
    getSchedule: unary(deps, M.getSchedule.path, async (req, _call, principal) => {
      const schedule = await store.scheduleGet({ name: checkScheduleName(req.name) });
      storedScopeCheck(principal, M.getSchedule.path, `schedule "${schedule.name}"`, schedule.queue);
      return { schedule: scheduleToPb(schedule) };
    }),
    listSchedules: unary(deps, M.listSchedules.path, async (_req, _call, principal) => ({
      schedules: scopeFilter(principal, await store.scheduleList(), (s) => s.queue).map(scheduleToPb),
    })),
    deleteSchedule: unary(deps, M.deleteSchedule.path, async (req, _call, principal) => {
      const name = checkScheduleName(req.name);
      await scheduleScopeCheck(store, principal, M.deleteSchedule.path, name);
      await store.scheduleDelete({ name, actor: auditActor(principal) });
      logger.info({ schedule: req.name }, 'schedule deleted');
      return {};
    }),
    pauseSchedule: unary(deps, M.pauseSchedule.path, async (req, _call, principal) => {
      const name = checkScheduleName(req.name);
      await scheduleScopeCheck(store, principal, M.pauseSchedule.path, name);
      const schedule = await store.scheduleSetPaused({ name, paused: true, actor: auditActor(principal) });
      return { schedule: scheduleToPb(schedule) };
    }),
    resumeSchedule: unary(deps, M.resumeSchedule.path, async (req, _call, principal) => {
      const name = checkScheduleName(req.name);
      const current = await store.scheduleGet({ name });
      storedScopeCheck(principal, M.resumeSchedule.path, `schedule "${name}"`, current.queue);
      const nextRunAt = storedNextAfter(current, await store.dbNow());
      const schedule = await store.scheduleSetPaused({ name, paused: false, nextRunAt, actor: auditActor(principal) });
      return { schedule: scheduleToPb(schedule) };
    }),
    triggerSchedule: unary(deps, M.triggerSchedule.path, async (req, _call, principal) => {
      const name = checkScheduleName(req.name);
      await scheduleScopeCheck(store, principal, M.triggerSchedule.path, name);
      const triggerId = checkTriggerId(req.triggerId);
      const { schedule, result } = await store.scheduleTrigger({ name, triggerId: triggerId || null, actor: auditActor(principal) });
      // A trigger sent again (same trigger_id) finds its job: only a job made now is counted.
      if (result.created) deps.metrics.jobsSubmitted.inc({ queue: result.job.queue });
      logger.info({ schedule: name, job_id: result.job.id, created: result.created }, 'schedule triggered');
      return {
        jobId: result.job.id,
        idempotencyKey: result.job.idempotencyKey ?? scheduleTriggerKey(name, triggerId),
        created: result.created,
        schedule: scheduleToPb(schedule),
      };
    }),
  };
}

import type { StorePool } from './pool.js';
import type { FinishedJobState, PruneCount } from '../domain/job.js';
import { rowsOf, statement } from './statements.js';

/**
 * Retention: the pruner's one statement (sql/job-prune.sql). It deletes finished jobs whose
 * queue's retention has passed, never one whose events telemetry has not projected yet, in
 * batches small enough that no lock is held for long; the loop over batches is the pruner's
 * (src/maintenance/pruner.ts).
 */

interface JobPruneRow {
  queue: string;
  state: FinishedJobState;
  jobs: number;
}
const jobPruneSql = statement<{ limit: number; now: Date | null }, JobPruneRow>(
  'job-prune',
  { limit: 'int8', now: 'timestamptz' },
  { queue: 'text', state: 'evora.job_state', jobs: 'int4' },
);

/** One batch of retention (Store.jobPrune): what it deleted, per queue and state. */
export async function jobsPrune(pool: StorePool, limit: number, now: Date | null): Promise<PruneCount[]> {
  return rowsOf(pool, jobPruneSql, { limit, now });
}

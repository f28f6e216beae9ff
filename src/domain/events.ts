import type { JobState } from './job.js';

/**
 * Job events: what every state change records in the outbox (in the same transaction as
 * the change), and the helpers that read a packed outbox row. The store produces
 * OutboxEvents; the projection and the sinks consume them.
 */

/** What an outbox event records (the evora.job_event_kind enum). */
export type JobEventKind =
  | 'submitted'
  | 'claimed'
  | 'completed'
  | 'failed_retrying'
  | 'dead_lettered'
  | 'cancelled'
  | 'retried_manually'
  | 'snoozed'
  | 'lease_expired'
  /** WAITING -> PENDING: the job's last parent completed (0011_dependencies.sql). */
  | 'released'
  /** CANCELLED -> WAITING: the parent whose end cancelled the job was retried. */
  | 'restored';

/**
 * One outbox event, as a sink that stores events sees it. The outbox keeps one packed row
 * per statement (evora.job_events in src/store/migrations/0001_baseline.sql);
 * outboxEventsUnpack turns those rows into events.
 */
export interface JobEvent {
  /**
   * The outbox row's id * 2^20 + the event's position: past 2^53 (from the outbox's
   * 2^33rd row) no double holds it exactly, so it is a bigint (MongoDB stores an Int64).
   */
  id: bigint;
  jobId: string;
  queue: string;
  type: string;
  kind: JobEventKind;
  fromState: JobState | null;
  toState: JobState;
  attempt: number;
  workerId: string | null;
  at: Date;
  waitMs: number | null;
  runMs: number | null;
}

/**
 * An event's id is its outbox row's id * 2^20 + its position in the row (from 1): unique,
 * and in the order the events were written (the baseline migration says the same).
 */
const OUTBOX_EVENTS_PER_ROW = 1_048_576n;

/**
 * The events of one outbox row (one statement's), column by column, as the projector
 * reads them. A column whose values are all the same comes as that one value, the usual
 * case (one statement: one queue, one kind): the projection reads it as it is, and
 * PostgreSQL does not write it out as JSON hundreds of times (that was ~2 µs per event,
 * the projector's whole read; now ~0.4). `details` only when the read asked for them.
 */
export interface OutboxEvents {
  /** The outbox row's id (job_events.id); its events' ids follow from it (outboxEventsUnpack). */
  rowId: number;
  /** When the statement's changes happened (one time for all of them). */
  at: Date;
  /** Number of events; every array column has this length. */
  n: number;
  queue: string | string[];
  kind: JobEventKind | JobEventKind[];
  fromState: JobState | null | (JobState | null)[];
  toState: JobState | JobState[];
  waitMs: (number | null)[];
  runMs: (number | null)[];
  details: { jobIds: string[]; types: string[]; attempts: number[]; workerIds: (string | null)[] } | null;
}

/** Column `i` of an outbox row: the value of a collapsed column, else its i-th element. */
export function outboxColumn<T>(column: T | T[], i: number): T {
  return Array.isArray(column) ? (column[i] as T) : column;
}

/** The events of outbox rows read with details, one by one (for a sink that stores events). */
export function outboxEventsUnpack(rows: readonly OutboxEvents[]): JobEvent[] {
  const events: JobEvent[] = [];
  for (const row of rows) {
    const d = row.details;
    if (!d) throw new Error('outboxEventsUnpack: the outbox was read without details');
    // In bigint: as a double, the ids of a row past the 2^33rd collapsed onto one another
    // (a MongoDB sink then took the later events of the row for duplicates and dropped them).
    const base = BigInt(row.rowId) * OUTBOX_EVENTS_PER_ROW;
    for (let i = 0; i < row.n; i++) {
      events.push({
        id: base + BigInt(i + 1),
        jobId: d.jobIds[i]!,
        queue: outboxColumn(row.queue, i),
        type: d.types[i]!,
        kind: outboxColumn(row.kind, i),
        fromState: outboxColumn(row.fromState, i) ?? null,
        toState: outboxColumn(row.toState, i),
        attempt: d.attempts[i]!,
        workerId: d.workerIds[i] ?? null,
        at: row.at,
        waitMs: row.waitMs[i] ?? null,
        runMs: row.runMs[i] ?? null,
      });
    }
  }
  return events;
}

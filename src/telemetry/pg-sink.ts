import type pg from 'pg';
import type { Histogram, ProjectionUpdate, TelemetryRows, TelemetrySink } from './projection.js';
import type { JobState } from '../domain/job.js';

/**
 * The embedded telemetry sink: the projection kept in Postgres tables of its own
 * (migrations/0003_telemetry.sql), for when MONGODB_URL is not set. A batch is applied in
 * one transaction together with its id in telemetry_applied_batches, so applying it again
 * after a crash is a no-op.
 */
export class PostgresTelemetrySink implements TelemetrySink {
  readonly name = 'postgres';
  /** Recent events are copied from the outbox in SQL (apply). */
  readonly storesEvents = false;

  constructor(
    private readonly pool: pg.Pool,
    /** How long recent job events are kept. */
    private readonly eventRetentionSeconds = 86_400,
  ) {}

  async init(): Promise<void> {
    // The tables come with the migrations.
  }

  async close(): Promise<void> {
    // The pool belongs to the store.
  }

  async apply(batchId: number, update: ProjectionUpdate): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const first = await client.query(
        'INSERT INTO evora.telemetry_applied_batches (batch_id) VALUES ($1) ON CONFLICT DO NOTHING RETURNING batch_id',
        [batchId],
      );
      if (first.rowCount === 0) {
        await client.query('COMMIT');
        return;
      }
      const counts = [...update.counts].flatMap(([queue, byState]) =>
        Object.entries(byState).map(([state, n]) => ({ queue, state, n })),
      );
      if (counts.length > 0) {
        await client.query(
          `INSERT INTO evora.telemetry_queue_counts AS c (queue, state, n)
           SELECT * FROM unnest($1::text[], $2::evora.job_state[], $3::bigint[])
           ON CONFLICT (queue, state) DO UPDATE SET n = c.n + EXCLUDED.n`,
          [counts.map((c) => c.queue), counts.map((c) => c.state), counts.map((c) => c.n)],
        );
      }
      const minutes = [...update.minutes.values()];
      if (minutes.length > 0) {
        await client.query(
          `INSERT INTO evora.telemetry_minutes AS m
             (queue, minute, submitted, completed, failed, dead_lettered, wait_hist, run_hist)
           SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
                                $7::jsonb[], $8::jsonb[])
           ON CONFLICT (queue, minute) DO UPDATE SET
             submitted = m.submitted + EXCLUDED.submitted,
             completed = m.completed + EXCLUDED.completed,
             failed = m.failed + EXCLUDED.failed,
             dead_lettered = m.dead_lettered + EXCLUDED.dead_lettered,
             wait_hist = evora.histogram_add(m.wait_hist, EXCLUDED.wait_hist),
             run_hist = evora.histogram_add(m.run_hist, EXCLUDED.run_hist)`,
          [
            minutes.map((m) => m.queue),
            minutes.map((m) => m.minute),
            minutes.map((m) => m.submitted),
            minutes.map((m) => m.completed),
            minutes.map((m) => m.failed),
            minutes.map((m) => m.deadLettered),
            minutes.map((m) => JSON.stringify(m.wait)),
            minutes.map((m) => JSON.stringify(m.run)),
          ],
        );
      }
      // Recent events: the batch's packed outbox rows, copied as they are.
      await client.query(
        `INSERT INTO evora.telemetry_recent_events (outbox_id, at, n, job_ids, queues, types, kinds, to_states, attempts, worker_ids)
         SELECT id, at, n, job_ids, queues, types, kinds, to_states, attempts, worker_ids
         FROM evora.job_events WHERE id <= $1 AND xid < $2::xid8
         ON CONFLICT (outbox_id) DO NOTHING`,
        [update.outbox.hiId, update.outbox.horizon],
      );
      await client.query(
        `DELETE FROM evora.telemetry_recent_events WHERE at < now() - make_interval(secs => $1)`,
        [this.eventRetentionSeconds],
      );
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  async read(params: { queues: string[] | null; since: Date }): Promise<TelemetryRows> {
    const counts = await this.pool.query<{ queue: string; state: JobState; n: string }>(
      `SELECT queue, state, n FROM evora.telemetry_queue_counts WHERE $1::text[] IS NULL OR queue = ANY($1)`,
      [params.queues],
    );
    const minutes = await this.pool.query<{
      queue: string;
      minute: Date;
      submitted: string;
      completed: string;
      failed: string;
      dead_lettered: string;
      wait_hist: Histogram;
      run_hist: Histogram;
    }>(
      `SELECT * FROM evora.telemetry_minutes WHERE ($1::text[] IS NULL OR queue = ANY($1)) AND minute > $2`,
      [params.queues, params.since],
    );
    return {
      counts: counts.rows.map((r) => ({ queue: r.queue, state: r.state, n: Number(r.n) })),
      minutes: minutes.rows.map((r) => ({
        queue: r.queue,
        minute: r.minute,
        submitted: Number(r.submitted),
        completed: Number(r.completed),
        failed: Number(r.failed),
        deadLettered: Number(r.dead_lettered),
        wait: r.wait_hist,
        run: r.run_hist,
      })),
    };
  }
}

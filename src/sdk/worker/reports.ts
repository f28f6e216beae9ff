// Over 400 lines on purpose: the Reports class is the one owner of a report from write to ack
// (batching, size limits, resends after RETRY_LATER and outages, give-up), read best in one place.
import type { ServerAck, ServerWelcome, WorkerComplete, WorkerFail, WorkRequest } from '../../gen/evora/v1/worker.js';
import { ackResultOf } from './codes.js';
import { failReport } from './handler-runner.js';
import type { HeldJob, HeldJobs, Report, ReportOutcome } from './held-job.js';
import { jsonTooLarge, limitsOf, messageTooLarge, type ServerLimits } from './limits.js';
import type { TimerSet } from './timers.js';
import type { AckResultName, JobOutcome, WorkerLog } from './types.js';

/** Resends after RETRY_LATER acks, at most (each one waits twice as long as the last). */
export const MAX_RESENDS = 5;
/** The wait before the first resend after a RETRY_LATER. */
export const RESEND_BASE_MS = 200;
/**
 * The longest wait between resends of a report the server could not apply because it cannot
 * reach its database (ServerAck.database_unavailable): those are resent for as long as the
 * outage lasts, since the server holds the lease while the heartbeats name it.
 */
export const OUTAGE_RESEND_MAX_MS = 2000;
/** Largest `completes` / `fails` batch by Report.bytes (servers take 4 MiB messages by default; at most half the server's limit). */
const REPORT_BATCH_MAX_BYTES = 1024 * 1024;

/** The wire name of a report, as the error of the fail sent when the server refuses one says it ("snooze refused: …"). */
const REPORT_NAME: Record<ReportOutcome, string> = { completed: 'complete', failed: 'fail', snoozed: 'snooze' };

/** What the report batcher needs of the Work stream. */
export interface ReportStream {
  /** A write now goes out without queuing behind a full buffer. */
  readonly writable: boolean;
  readonly session: ServerWelcome | null;
  write(req: WorkRequest): boolean;
}

/**
 * The reports of finished handlers, from the handler to the server's ack: batches them,
 * writes them when the stream takes writes, matches each ack to its report by job id and
 * lease token (one job may be reported under two leases, and their acks may come in either
 * order; an ack without a token, from an older server, answers the job's oldest report),
 * and acts on each ack's code (never on its text):
 *
 * - accepted: the job is done.
 * - lease_lost: the job is lost; nothing is resent. (An older server's ack without a code
 *   reads as accepted or lease_lost from its `accepted` flag.) When an earlier write of the
 *   report went unanswered (its stream ended), that write may have been applied: the
 *   outcome says `maybeApplied`.
 * - retry_later: the same report is written again after 200 ms, 400 ms … while the lease
 *   surely lasts, at most MAX_RESENDS times; past that the job is given up as lost (its
 *   lease expires and the server retries it).
 * - invalid: the report itself can never be applied (a result too large or with a NUL, a
 *   retry time out of range); the server changed nothing and the lease runs on. The worker
 *   sends, once, a fail under the same lease instead: non-retryable, its error "<complete,
 *   snooze or fail> refused: <the server's reason>", so the job ends at once with a readable error and its
 *   work is not done again when the lease runs out (see refused()). If that fail is refused
 *   too, the job is given up (`accepted: false`, ackResult 'invalid').
 *
 * A report the welcome's limits say the server would refuse or could not receive (a result
 * over max_result_bytes, a message over max_message_bytes) is never written: it is replaced
 * by that same fail before it goes out, its reason the worker's own ("result is N bytes of
 * JSON; the server takes at most M"). Written, a message over the limit would end the whole
 * stream (RESOURCE_EXHAUSTED), and be written again on the next one, for ever.
 *
 * A lease_lost naming the lease of a report that waits to be written (for a resend, a
 * reconnect, its batch) settles it as lost without writing it; one naming a report already
 * written frees its slot and leaves it to its ack (see leaseLost()).
 *
 * Reports that become ready in the same tick go out together on setImmediate: completes as
 * one `completes`, fails as one `fails` (each kept under a size bound) when the welcome
 * says the server takes them, else one message each; snoozes always one each. A result
 * goes as JSON text (result_json) when the welcome says the server takes it, else as a
 * Struct. While the stream's buffer is full the reports wait (and so gather into larger
 * batches).
 *
 * What must stay true: a report is written at most once per session unless its ack asks
 * for a resend; a report written on a stream that ended is written again on the next
 * session unless its lease was reported lost; every report ends in exactly one `settled`
 * call; only reports in state reporting are in the outbox.
 */
export class Reports {
  /** Reports to write on the next flush, in the order they became ready. */
  private readonly outbox = new Set<HeldJob>();
  private flushScheduled = false;
  /**
   * Whether the last word on the database was an outage (an ack with database_unavailable)
   * and no report has been applied since: the outage is logged at warn once when it is first
   * met and at info once it is over, however many reports it holds back.
   */
  private outageMet = false;

  constructor(
    private readonly deps: {
      stream: ReportStream;
      jobs: HeldJobs;
      timers: TimerSet;
      log: WorkerLog;
      /** The report's fate is known (the `jobFinished` event). */
      settled: (outcome: JobOutcome) => void;
    },
  ) {}

  /** A handler's report: the job moves from running to reporting, and the report goes out with this tick's others. */
  submit(h: HeldJob, report: Report): void {
    h.report = report;
    h.to('reporting');
    this.enqueue(h);
  }

  /**
   * The stream ended: every report written on it and not acknowledged is written again on
   * the next session, except those whose lease the server said is lost (lostAwaitingAck):
   * nothing may be sent under a lost lease, and their ack will never come, so they settle
   * as lost.
   */
  streamLost(): void {
    for (const h of [...this.deps.jobs.reports()]) {
      if (h.state === 'lostAwaitingAck') {
        h.ackMissed = true;
        h.to('lost');
        this.settle(h, 'lease_lost', 'the stream ended before the ack of a report whose lease was lost');
      } else if (h.state === 'awaitingAck') {
        h.ackMissed = true;
        h.to('reporting');
        this.outbox.add(h);
      }
    }
  }

  /**
   * Writes the waiting reports while the stream takes writes (called again when it does).
   * `ignoreBackpressure`: write them all even into a full buffer (the last flush before
   * the stream is half-closed).
   */
  flush(opts: { ignoreBackpressure?: boolean } = {}): void {
    this.flushScheduled = false;
    const stream = this.deps.stream;
    if (this.outbox.size === 0 || !stream.session) return;
    // A full buffer: build nothing now; 'drain' calls again.
    if (!stream.writable && !opts.ignoreBackpressure) return;
    const messages = this.messages(stream.session);
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i]!;
      if ((!stream.writable && !opts.ignoreBackpressure) || !stream.write(m.req)) {
        // The rest waits for the next flush; what went out leaves the outbox.
        for (let j = 0; j < i; j++) for (const h of messages[j]!.jobs) this.outbox.delete(h);
        return;
      }
      for (const h of m.jobs) {
        h.sends++;
        h.to('awaitingAck');
      }
    }
    this.outbox.clear();
  }

  /** The server answered a report: the one under the ack's lease token (see HeldJobs.reportAcked). */
  acked(ack: ServerAck): void {
    const h = this.deps.jobs.reportAcked(ack.jobId, ack.leaseToken);
    if (!h) {
      this.deps.log.debug({ job_id: ack.jobId, lease_token: ack.leaseToken }, 'an ack for a report this worker no longer waits on');
      return;
    }
    this.unqueue(h);
    const result = ackResultOf(ack);
    switch (result) {
      case 'accepted':
        if (this.outageMet) {
          this.outageMet = false;
          this.deps.log.info({ job_id: h.job.id }, 'the server reaches its database again; the reports it held back are being applied');
        }
        h.to('done');
        return this.settle(h, result, '');
      case 'retry_later':
        if (h.state === 'lostAwaitingAck') {
          // Not applied, and no resend can be: the lease is gone.
          h.to('lost');
          return this.settle(h, 'lease_lost', ack.reason);
        }
        return ack.databaseUnavailable ? this.resendThroughOutage(h, ack.reason) : this.resendLater(h, ack.reason);
      case 'lease_lost': {
        // A resend after a reconnect may meet its own earlier, already applied write.
        const fields = { job_id: h.job.id, outcome: h.report?.outcome, ack: result, reason: ack.reason };
        if (h.ackMissed) this.deps.log.info({ ...fields, resent: true }, 'report resent after a reconnect and answered lease lost: it may have been applied before the reconnect');
        else if (h.state === 'lostAwaitingAck') this.deps.log.info(fields, 'report not applied: the lease was lost, as the server had said');
        else this.deps.log.warn(fields, 'report not applied: the lease is lost');
        h.to('lost');
        return this.settle(h, result, ack.reason);
      }
      case 'invalid':
        return this.refused(h, ack.reason);
    }
  }

  /**
   * INVALID: the server refused the report and changed nothing; its lease runs on
   * (docs/api.md, "What each ack result asks of the worker"). The first time, the worker
   * fails the job instead under the same lease, non-retryable, with the server's reason in
   * the error: the job ends at once (DLQ) with a readable error rather than running again
   * after its lease expires and ending as "lease expired". The refused report is kept in
   * `refused` for jobFinished. A refused fail-instead (or a report whose lease the server
   * has said is lost) gives the job up.
   */
  private refused(h: HeldJob, reason: string): void {
    const fields = { job_id: h.job.id, outcome: h.report?.outcome, ack: 'invalid', reason };
    if (h.refused === null && h.report && h.state === 'awaitingAck') {
      this.deps.log.error(fields, 'the server refused the report as invalid; failing the job instead (non-retryable)');
      this.failInstead(h, h.report, reason);
      h.to('reporting');
      this.enqueue(h);
      return;
    }
    this.deps.log.error(fields, 'the server refused the report as invalid; it is not sent again');
    h.to('done');
    this.settle(h, 'invalid', reason);
  }

  /**
   * Replaces `report` (h's) by a non-retryable fail under the same lease whose error names
   * the refused report and `reason`; keeps the refused one in `h.refused` for jobFinished.
   */
  private failInstead(h: HeldJob, report: Report, reason: string): Report {
    h.refused = { outcome: report.outcome, reason };
    h.report = failReport(h, `${REPORT_NAME[report.outcome]} refused: ${reason}`, { nonRetryable: true });
    // A new report: its writes and resends are counted afresh.
    h.sends = 0;
    h.writeRetries = 0;
    h.ackMissed = false;
    return h.report;
  }

  /**
   * Why the server would refuse this report or could not receive its message `m` (the
   * welcome's limits), or null when it can be written.
   */
  private tooLarge(report: Report, m: NonNullable<WorkRequest['msg']>, limits: ServerLimits): string | null {
    if (report.resultText !== undefined) {
      const reason = jsonTooLarge('result', report.resultText, limits);
      if (reason !== null) return reason;
    }
    const json = m.$case === 'complete' ? m.value.resultJson : undefined;
    const estimate = json && json.length > 0 ? 200 + json.length : report.bytes;
    return messageTooLarge({ msg: m }, estimate, limits);
  }

  /**
   * The server says the lease of a report is lost (`code`, `reason`: for the log). One still
   * waiting to be written is settled as lost (`ackResult` 'lease_lost') and never written.
   * One already written (awaitingAck) moves to lostAwaitingAck: it frees its slot at once,
   * as the server's did, and its ack (the write may have been applied just before) settles it.
   */
  leaseLost(h: HeldJob, code: string, reason: string): void {
    if (h.state === 'awaitingAck') {
      this.deps.log.info(
        { job_id: h.job.id, lease_token: h.token, outcome: h.report?.outcome, code, reason },
        'lease lost while the report awaits its ack; its slot is free, the ack will tell whether it was applied',
      );
      h.to('lostAwaitingAck');
      return;
    }
    if (h.state !== 'reporting') return;
    this.unqueue(h);
    this.deps.log.warn(
      { job_id: h.job.id, lease_token: h.token, outcome: h.report?.outcome, code, reason },
      'lease lost before the report went out; it is dropped',
    );
    h.to('lost');
    this.settle(h, 'lease_lost', reason);
  }

  /** RETRY_LATER: the same report again after a delay, while the bound and the lease allow. */
  private resendLater(h: HeldJob, reason: string): void {
    const delay = RESEND_BASE_MS * 2 ** h.writeRetries;
    if (h.writeRetries >= MAX_RESENDS || Date.now() + delay >= h.leaseDeadline) {
      this.deps.log.warn(
        { job_id: h.job.id, reason, resends: h.writeRetries },
        'the server could not apply a report and the resend bound is reached; giving the job up (its lease expires and the server retries it)',
      );
      h.to('lost');
      return this.settle(h, 'retry_later', reason);
    }
    h.writeRetries++;
    this.deps.log.warn({ job_id: h.job.id, reason, retry_in_ms: delay }, 'the server could not apply a report; sending it again');
    this.resendAfter(h, delay);
  }

  /**
   * RETRY_LATER because the server cannot reach its database: the same report again, with
   * a backoff capped at OUTAGE_RESEND_MAX_MS, for as long as the outage lasts. Neither the
   * resend bound nor the lease deadline applies: the server holds the lease while this
   * worker's heartbeats name it (the report's lease is among them), and its sweeper waits one
   * lease length after the database is back. Logged at warn once per outage (outageMet),
   * then at debug.
   */
  private resendThroughOutage(h: HeldJob, reason: string): void {
    const delay = Math.min(OUTAGE_RESEND_MAX_MS, RESEND_BASE_MS * 2 ** Math.min(h.outageResends, 16));
    const fields = { job_id: h.job.id, reason, retry_in_ms: delay, resends: h.outageResends };
    if (!this.outageMet) {
      this.outageMet = true;
      this.deps.log.warn(fields, 'the server cannot reach its database; its reports are sent again until it can');
    } else this.deps.log.debug(fields, 'the server still cannot reach its database; sending the report again');
    h.outageResends++;
    this.resendAfter(h, delay);
  }

  /** Puts the report back to be written again after `delay` ms. */
  private resendAfter(h: HeldJob, delay: number): void {
    if (h.state === 'awaitingAck') h.to('reporting');
    h.resendTimer = this.deps.timers.after(delay, () => {
      h.resendTimer = null;
      if (h.state === 'reporting') this.enqueue(h);
    });
  }

  /** The report is settled or waits no more: no resend, no write at the next flush. */
  private unqueue(h: HeldJob): void {
    if (h.resendTimer) h.resendTimer = this.deps.timers.clear(h.resendTimer);
    // Only a report in state reporting can be in the outbox.
    if (h.state === 'reporting') this.outbox.delete(h);
  }

  private enqueue(h: HeldJob): void {
    if (h.resendTimer) h.resendTimer = this.deps.timers.clear(h.resendTimer);
    this.outbox.add(h);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  private settle(h: HeldJob, ackResult: AckResultName, reason: string): void {
    const report = h.report;
    this.deps.settled({
      job: h.job,
      outcome: report?.outcome ?? 'failed',
      accepted: ackResult === 'accepted',
      reason,
      error: report?.error ?? null,
      ackResult,
      refused: h.refused,
      // Only a lost lease can hide an applied write: every other ack answers the write itself.
      maybeApplied: ackResult === 'lease_lost' && h.ackMissed,
    });
  }

  /**
   * The outbox as messages: snoozes one each; completes and fails batched (if the server
   * takes batches) under the size bound; a report over the session's limits replaced by a
   * fail (see the class comment). Per report it only pushes onto arrays.
   */
  private messages(session: ServerWelcome): OutMessage[] {
    const batches = session.acceptsBatches;
    const limits = limitsOf(session);
    const batchMaxBytes = Math.min(REPORT_BATCH_MAX_BYTES, limits.messageBytes / 2);
    const out: OutMessage[] = [];
    const completes = new Batch<WorkerComplete>();
    const fails = new Batch<WorkerFail>();
    for (const h of this.outbox) {
      let report = h.report;
      if (!report) continue;
      let m = report.msg;
      if (session.payloadsAsJson && m.$case === 'complete' && report.resultText !== undefined) {
        m = { $case: 'complete', value: { jobId: m.value.jobId, leaseToken: m.value.leaseToken, resultJson: Buffer.from(report.resultText) } };
      }
      const tooLarge = this.tooLarge(report, m, limits);
      if (tooLarge !== null) {
        this.deps.log.error(
          { job_id: h.job.id, outcome: report.outcome, reason: tooLarge },
          'the report is more than the server takes; failing the job instead (non-retryable)',
        );
        report = this.failInstead(h, report, tooLarge);
        m = report.msg;
      }
      if (batches && m.$case === 'complete') {
        if (completes.bytes + report.bytes > batchMaxBytes) completes.flush(out, completeMessage);
        completes.add(h, m.value, report.bytes);
      } else if (batches && m.$case === 'fail') {
        if (fails.bytes + report.bytes > batchMaxBytes) fails.flush(out, failMessage);
        fails.add(h, m.value, report.bytes);
      } else {
        out.push({ jobs: [h], req: { msg: m } });
      }
    }
    completes.flush(out, completeMessage);
    fails.flush(out, failMessage);
    return out;
  }
}

/** One message to write and the reports it carries. */
interface OutMessage {
  jobs: HeldJob[];
  req: WorkRequest;
}

/** Reports of one kind gathering into a batch message. */
class Batch<V> {
  jobs: HeldJob[] = [];
  values: V[] = [];
  bytes = 0;

  add(h: HeldJob, value: V, bytes: number): void {
    this.jobs.push(h);
    this.values.push(value);
    this.bytes += bytes;
  }

  /** Appends the gathered reports to `out` as one message (a lone report as itself) and starts anew. */
  flush(out: OutMessage[], message: (values: V[]) => WorkRequest): void {
    if (this.jobs.length === 0) return;
    out.push({ jobs: this.jobs, req: message(this.values) });
    this.jobs = [];
    this.values = [];
    this.bytes = 0;
  }
}

function completeMessage(values: WorkerComplete[]): WorkRequest {
  return values.length === 1
    ? { msg: { $case: 'complete', value: values[0]! } }
    : { msg: { $case: 'completes', value: { completes: values } } };
}

function failMessage(values: WorkerFail[]): WorkRequest {
  return values.length === 1 ? { msg: { $case: 'fail', value: values[0]! } } : { msg: { $case: 'fails', value: { fails: values } } };
}

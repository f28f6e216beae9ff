package main

import (
	"slices"
	"time"

	evorav1 "github.com/evora/evora/examples/go-worker/gen/evora/v1"
)

// Resending a report the server could not apply now (ACK_RESULT_RETRY_LATER): at most
// maxSends sends in all, the first resend after firstResend, doubling, and never past the
// job's lease. When the ack says database_unavailable (the server cannot reach its
// database), the resends double from firstResend up to maxOutageResend apart and go on for
// as long as the outage lasts, past the lease end last heard: the server holds the lease
// while the heartbeats name it, and giving up would only make a finished job run again.
const (
	maxSends        = 5
	firstResend     = 200 * time.Millisecond
	maxOutageResend = 2 * time.Second
)

// ackResult is what an ack says became of a report. A server that predates result codes
// leaves it unset, and then `accepted` decides: true is ACCEPTED, false is LEASE_LOST.
func ackResult(a *evorav1.ServerAck) evorav1.AckResult {
	if r := a.GetResult(); r != evorav1.AckResult_ACK_RESULT_UNSPECIFIED {
		return r
	}
	if a.GetAccepted() {
		return evorav1.AckResult_ACK_RESULT_ACCEPTED
	}
	return evorav1.AckResult_ACK_RESULT_LEASE_LOST
}

// resendDelay says how long to wait before sending a report again after
// ACK_RESULT_RETRY_LATER, given how many times it was sent; false means give up: it was
// sent maxSends times, or the lease would end first (the server then requeues the job).
// leaseEnd is by this worker's clock (task.leaseEnd), so a clock that differs from the
// server's changes nothing.
func resendDelay(sends int, now, leaseEnd time.Time) (time.Duration, bool) {
	if sends >= maxSends {
		return 0, false
	}
	d := firstResend << max(0, sends-1)
	if !now.Add(d).Before(leaseEnd) {
		return 0, false
	}
	return d, true
}

// outageResendDelay says how long to wait before sending a report again after
// ACK_RESULT_RETRY_LATER with database_unavailable, given how many such resends it had.
// There is no giving up: the outage ends, or a lease_lost drops the report.
func outageResendDelay(resends int) time.Duration {
	// Four doublings already pass the cap; the shift stays small whatever the count.
	return min(maxOutageResend, firstResend<<min(resends, 4))
}

// send puts a report on the stream. On error the stream's end reconnects, and connect
// sends every unacknowledged report again.
func (w *worker) send(s *session, r *report) {
	r.tries++
	r.resendAt = time.Time{}
	_ = s.stream.Send(r.req)
}

// ackedReport finds the report an ack answers among a job's unacknowledged reports (oldest
// first): the one under the lease token the ack names, or -1 if none is. An ack without a
// token comes from a server that predates ServerAck.lease_token, which acks one job's
// reports in the order they were sent: it answers the oldest.
func ackedReport(rs []*report, token string) int {
	if len(rs) == 0 {
		return -1
	}
	if token == "" {
		return 0
	}
	return reportUnder(rs, token)
}

// reportUnder finds the report made under a lease among a job's unacknowledged reports, or
// -1 if none was.
func reportUnder(rs []*report, token string) int {
	for i, r := range rs {
		if leaseToken(r.req) == token {
			return i
		}
	}
	return -1
}

// onAck acts on the result code of a report's ack, never on its reason text (which is
// only logged).
func (w *worker) onAck(s *session, a *evorav1.ServerAck) {
	id := a.GetJobId()
	i := ackedReport(w.pending[id], a.GetLeaseToken())
	if i < 0 {
		w.log.Debug("an ack for no report this worker waits on", "job_id", id, "lease_token", a.GetLeaseToken())
		return
	}
	r := w.pending[id][i]
	switch res := ackResult(a); res {
	case evorav1.AckResult_ACK_RESULT_ACCEPTED:
		w.log.Info("report acknowledged", "job_id", id)
	case evorav1.AckResult_ACK_RESULT_LEASE_LOST:
		// Nothing changed and the job is no longer ours. After a reconnect this may be the
		// resend of a report the server had already applied.
		w.log.Warn("report not applied: the lease was lost; dropping the job", "job_id", id, "resent", r.tries > 1)
	case evorav1.AckResult_ACK_RESULT_RETRY_LATER:
		if a.GetDatabaseUnavailable() {
			d := outageResendDelay(r.outageResends)
			// One warning per report; an outage answers every resend the same way.
			log := w.log.Debug
			if r.outageResends == 0 {
				log = w.log.Warn
			}
			log("the server cannot reach its database; sending the report again until it can",
				"job_id", id, "in", d, "resends", r.outageResends, "reason", a.GetReason())
			r.outageResends++
			r.resendAt = time.Now().Add(d)
			return
		}
		// The sends made through an outage do not count toward maxSends.
		if d, ok := resendDelay(r.tries-r.outageResends, time.Now(), r.leaseEnd); ok {
			r.resendAt = time.Now().Add(d)
			w.log.Warn("the server could not apply the report now; sending it again", "job_id", id, "in", d, "reason", a.GetReason())
			return
		}
		w.log.Error("the server could not apply the report; giving up (the lease will expire and the job will run again)",
			"job_id", id, "sends", r.tries, "reason", a.GetReason())
	case evorav1.AckResult_ACK_RESULT_INVALID:
		if !r.insteadOfRefused {
			w.log.Error("report refused as invalid; failing the job instead (non-retryable)", "job_id", id, "reason", a.GetReason())
			failInstead(r, a.GetReason())
			w.send(s, r)
			return
		}
		w.log.Error("report refused as invalid; not sending it again (the lease will expire and the job will run again)",
			"job_id", id, "reason", a.GetReason())
	default:
		w.log.Error("report answered with an unknown result; dropping it", "job_id", id, "result", res, "reason", a.GetReason())
	}
	w.settle(s, id, i)
}

// failInstead turns r, a report the server refused as invalid (it changed nothing and the
// lease runs on: docs/api.md, "What each ack result asks of the worker"), into a
// non-retryable fail under the same lease whose error names the refused report and the
// server's reason. The job then ends at once in the DLQ with a readable error, instead of
// running again when its lease expires and ending as "lease expired". It is a new report:
// its sends are counted afresh.
func failInstead(r *report, reason string) {
	what, id, token := "fail", r.req.GetFail().GetJobId(), r.req.GetFail().GetLeaseToken()
	if c := r.req.GetComplete(); c != nil {
		what, id, token = "complete", c.GetJobId(), c.GetLeaseToken()
	}
	r.req = &evorav1.WorkRequest{Msg: &evorav1.WorkRequest_Fail{Fail: &evorav1.WorkerFail{
		JobId: id, LeaseToken: token, Error: cutError(what + " refused: " + reason), NonRetryable: true,
	}}}
	r.tries, r.outageResends, r.resendAt, r.insteadOfRefused = 0, 0, time.Time{}, true
}

// resendOnNewSession sends on a new session the reports left without an answer on the old
// one: each may or may not have been applied, and the server answers a resend of one it
// applied with ACK_RESULT_LEASE_LOST. A report answered ACK_RESULT_RETRY_LATER and waiting
// for its resend was answered: it keeps its delay (resendDue sends it), so a reconnect
// neither cuts the backoff short nor spends one of its maxSends.
func (w *worker) resendOnNewSession(s *session) {
	for _, rs := range w.pending {
		for _, r := range rs {
			if r.resendAt.IsZero() {
				w.send(s, r)
			}
		}
	}
}

// resendDue sends the reports whose retry time has come.
func (w *worker) resendDue(s *session) {
	now := time.Now()
	for _, rs := range w.pending {
		for _, r := range rs {
			if !r.resendAt.IsZero() && !now.Before(r.resendAt) {
				w.send(s, r)
			}
		}
	}
}

// settle forgets the i-th report about a job (see ackedReport), whose fate is decided, and
// drains after -max-jobs of them.
func (w *worker) settle(s *session, jobID string, i int) {
	if rs := slices.Delete(w.pending[jobID], i, i+1); len(rs) > 0 {
		w.pending[jobID] = rs
	} else {
		delete(w.pending, jobID)
	}
	w.acked++
	w.markIdle()
	if !w.stop && w.cfg.maxJobs > 0 && w.acked >= w.cfg.maxJobs {
		w.log.Info("reached -max-jobs; draining", "max_jobs", w.cfg.maxJobs)
		w.beginStop(s)
	}
}

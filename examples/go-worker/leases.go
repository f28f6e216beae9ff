package main

import (
	"time"

	evorav1 "github.com/evora/evora/examples/go-worker/gen/evora/v1"
)

// The leases the worker holds: a running job's, and a reported job's until its report is
// settled (acknowledged, dropped, or given up on). Both are named in hello.held and in every
// heartbeat, so a report sent again after ACK_RESULT_RETRY_LATER goes out under a lease
// that was kept alive meanwhile. A lease_lost names the lease by its token and ends only
// that one.

// heldLeases are the leases to name in hello.held and in a heartbeat: per job, the newest
// one the worker holds, that is the running job's, or else the one of the job's latest
// unsettled report. An older lease of the same job cannot be current any more (the job was
// leased again), and naming one lease per job keeps an answer by job id alone (a lease_lost
// without a token, from an older server) from being read as about the other.
func (w *worker) heldLeases() []*evorav1.Lease {
	var leases []*evorav1.Lease
	for id, t := range w.running {
		if !t.lost {
			leases = append(leases, &evorav1.Lease{JobId: id, LeaseToken: t.token})
		}
	}
	for id, rs := range w.pending {
		if _, running := w.running[id]; running || len(rs) == 0 {
			continue
		}
		leases = append(leases, &evorav1.Lease{JobId: id, LeaseToken: leaseToken(rs[len(rs)-1].req)})
	}
	return leases
}

// minBeat is the shortest heartbeat interval, whatever the leases.
const minBeat = 100 * time.Millisecond

// beatFor keeps the heartbeats fast enough for a pushed job's lease: at least every third of
// it. The welcome's interval is a third of the queues' shortest lease at hello; a queue's
// lease_seconds lowered since gives its next jobs shorter leases, which that interval would
// let expire (docs/api.md, the heartbeat row). The schedule only gets faster during a
// session; the next welcome's interval is computed from the queues' leases as they are then.
func (s *session) beatFor(lj *evorav1.LeasedJob) {
	if every := max(minBeat, leaseLength(lj)/3); s.beatEvery == 0 || every < s.beatEvery {
		s.beatEvery = every
		s.beatChanged = true
	}
}

// staleAfter is how long the server may stay silent before the worker drops the stream
// (max(30 s, 3 heartbeat intervals), as the Node SDK's STALE_MS rule).
const staleAfter = 30 * time.Second

// unansweredPrune drops the send times of heartbeats too old to be answered any more. A
// heartbeat the server could not write (its database away) is never answered, and acks carry
// no id: paired by order, every later ack would take a send time one beat older, for good,
// and the leases' ends would stop moving (a report answered RETRY_LATER then given up at
// once). An answer comes within the silence bound or the stream is dropped, so a send time
// older than that answers nothing; the list also stays short.
func unansweredPrune(sent []time.Time, now time.Time, every time.Duration) []time.Time {
	oldest := now.Add(-max(staleAfter, 3*every))
	i := 0
	for i < len(sent) && sent[i].Before(oldest) {
		i++
	}
	return sent[i:]
}

// leaseLength is a pushed job's lease: lease_expires_at - started_at, both the server's
// clock, so that the worker's own clock, which may differ from the server's, only measures
// the lease from when it came. From a server that does not send started_at: the time left
// by this worker's clock.
func leaseLength(lj *evorav1.LeasedJob) time.Duration {
	end := lj.GetLeaseExpiresAt().AsTime()
	if started := lj.GetJob().GetStartedAt(); started != nil {
		return end.Sub(started.AsTime())
	}
	return time.Until(end)
}

// heartbeat extends every lease the worker holds (an empty one is a plain keep-alive).
func (w *worker) heartbeat(s *session) {
	hb := &evorav1.WorkerHeartbeat{Leases: w.heldLeases()}
	sentAt := time.Now()
	if s.stream.Send(&evorav1.WorkRequest{Msg: &evorav1.WorkRequest_Heartbeat{Heartbeat: hb}}) == nil {
		s.beatsSent++
		s.beatsSentAt = append(s.beatsSentAt, sentAt)
	}
}

// onHeartbeatAck records until when the extended leases surely last (a report's, for how
// long it may still be sent again): the answered heartbeat's send time plus each lease's
// length, by this worker's clock (the ack's lease_expires_at is the server's). It stops the
// running jobs an operator asked to cancel. A lease left out was lost; the server says so
// with lease_lost. Once every heartbeat up to the fencing one is answered, the stream is
// fenced: every job pushed before our drain has arrived.
func (w *worker) onHeartbeatAck(s *session, a *evorav1.ServerHeartbeatAck) {
	s.beatsAcked++
	sentAt := time.Now()
	s.beatsSentAt = unansweredPrune(s.beatsSentAt, sentAt, s.beatEvery)
	if len(s.beatsSentAt) > 0 {
		sentAt, s.beatsSentAt = s.beatsSentAt[0], s.beatsSentAt[1:]
	}
	if s.fenceSet && s.beatsAcked >= s.fenceBeats {
		s.fenced = true
	}
	for _, l := range a.GetLeases() {
		id, token := l.GetJobId(), l.GetLeaseToken()
		if t, ok := w.running[id]; ok && t.token == token {
			t.leaseEnd = sentAt.Add(t.leaseLen)
			if l.GetCancelRequested() {
				t.cancel(errCancelled)
			}
			continue
		}
		if i := reportUnder(w.pending[id], token); i >= 0 {
			r := w.pending[id][i]
			r.leaseEnd = sentAt.Add(r.leaseLen)
		}
	}
}

// onLeaseLost acts on a lease_lost: every code (EXPIRED, NOT_HELD_ON_RECONNECT, or none
// from an old server) means that lease is no longer ours. A running job under it is stopped
// and reported to nobody; a report made under it, awaiting its ack or a resend, is dropped
// and never sent again (the server applied it already, or never will). A token that names
// neither (an older lease of a job leased again) changes nothing. Without a token (a server
// that predates ServerLeaseLost.lease_token) it is about the job's running lease; a report
// already on its way is then settled by its ack.
func (w *worker) onLeaseLost(s *session, ll *evorav1.ServerLeaseLost) {
	id, token := ll.GetJobId(), ll.GetLeaseToken()
	if t, ok := w.running[id]; ok && !t.lost && (token == "" || token == t.token) {
		w.log.Warn("lease lost; stopping the job without a report", "job_id", id, "code", ll.GetCode())
		t.lost = true
		t.cancel(errLeaseLost)
		return
	}
	if token != "" {
		if i := reportUnder(w.pending[id], token); i >= 0 {
			w.log.Warn("lease lost while its report waited; dropping the report, not sending it again",
				"job_id", id, "code", ll.GetCode(), "awaiting_resend", !w.pending[id][i].resendAt.IsZero())
			w.settle(s, id, i)
			return
		}
	}
	w.log.Debug("lease_lost for a lease this worker does not hold", "job_id", id, "lease_token", token, "code", ll.GetCode())
}
